"""``rnn.run_layer``'s fast path (``_projected_rnn``) against the Keras layer it stands in for:
the same outputs, final states and gradients, with masks (length 0 included), initial states,
both directions, in eager, graph and XLA; and the cases that must fall back to the layer."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from zoo.models import rnn

LENGTHS = np.array([6, 3, 1, 0])


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(len(LENGTHS), 6, 5)).astype("float32")
    mask = np.arange(6)[None] < LENGTHS[:, None]
    return rng, x, mask


def _close(want, got, mask=None):
    want, got = np.asarray(want), np.asarray(got)
    if mask is not None:  # outputs: compared where the step is real (Keras repeats the last one after)
        want, got = want * mask[:, :, None], got * mask[:, :, None]
    np.testing.assert_allclose(got, want, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_fast_path_matches_keras_layer_with_masks(cell, bidirectional):
    keras.utils.set_random_seed(1)
    _, x, mask = _inputs()
    layer = rnn.make_rnn(cell, 7, "encoder", bidirectional)
    assert all(rnn._plain_cell(part, True) for part in (
        (layer.forward_layer, layer.backward_layer) if bidirectional else (layer,)))
    want, got = layer(x, mask=mask), rnn.run_layer(layer, x, mask=mask)
    assert len(got) == len(want)
    _close(want[0], got[0], mask)
    assert np.all(np.asarray(got[0])[~mask] == 0)  # padded steps: zero
    for want_state, got_state in zip(want[1:], got[1:]):
        _close(want_state, got_state)  # the length-0 row keeps its (zero) initial state


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("used", ["all", "outputs", "states"])
def test_fast_path_matches_keras_layer_with_initial_state_and_gradients(cell, graph, used):
    """The loop's written-out gradient (``_gru_sequences``, ``_lstm_sequences``) against Keras' layer
    differentiated by TensorFlow, with the loss on every result or only on some (the others' gradients
    then reach the loop as None)."""
    keras.utils.set_random_seed(2)
    rng, x, mask = _inputs(3)
    layer = rnn.make_rnn(cell, 7, "decoder")
    initial = [tf.constant(rng.normal(size=(len(LENGTHS), 7)).astype("float32"))
               for _ in range(2 if cell == "lstm" else 1)]
    x = tf.constant(x)
    pick = {"all": slice(None), "outputs": slice(0, 1), "states": slice(-1, None)}[used]

    def loss_and_grads(fast):
        with tf.GradientTape() as tape:
            tape.watch([x, *initial])
            outputs = rnn.run_layer(layer, x, initial_state=initial, training=True, fast=fast)
            loss = sum(ops.sum(ops.sin(out)) for out in outputs[pick])
        return outputs, tape.gradient(loss, [x, *initial, *layer.trainable_weights])

    run = tf.function(loss_and_grads) if graph else loss_and_grads
    (want, want_grads), (got, got_grads) = run(False), run(True)
    for a, b in zip(want + want_grads, got + got_grads):
        _close(a, b)


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
def test_fast_path_gradients_under_mixed_bfloat16(cell):
    """Under ``mixed_bfloat16`` the loop runs in bfloat16, its gradient too: Keras' numbers up to bfloat16's rounding."""
    _, x, mask = _inputs(5)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(4)
        layer = rnn.make_rnn(cell, 8, "encoder", bidirectional=True)
        layer(x, mask=mask)
    finally:
        keras.mixed_precision.set_global_policy("float32")

    def grads(fast):
        with tf.GradientTape() as tape:
            outputs = rnn.run_layer(layer, x, mask=mask, fast=fast)
            loss = sum(ops.sum(ops.sin(ops.cast(out, "float32"))) for out in outputs)
        return tape.gradient(loss, layer.trainable_weights)

    for want, got in zip(grads(False), grads(True)):
        assert got.dtype == tf.float32  # the variables' gradients, in the variables' dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=0.1, rtol=0.05)


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
def test_fast_path_compiles_under_xla_with_a_gradient(cell):
    """``jit_compile=True`` runs (``fit`` turns it on with ``runtime.jit_compile``) and gives the layer's gradient."""
    keras.utils.set_random_seed(3)
    _, x, mask = _inputs(4)
    layer = rnn.make_rnn(cell, 7, "encoder", bidirectional=True)
    layer(x, mask=mask)

    def grads(fast):
        with tf.GradientTape() as tape:
            outputs = rnn.run_layer(layer, x, mask=mask, fast=fast)
            loss = ops.sum(ops.square(outputs[0])) + sum(ops.sum(state) for state in outputs[1:])
        return tape.gradient(loss, layer.trainable_weights)

    for want, got in zip(grads(False), tf.function(lambda: grads(True), jit_compile=True)()):
        _close(want, got)


def test_layers_that_are_not_plain_fall_back_to_keras():
    dropout = keras.layers.GRU(4, dropout=0.5, return_sequences=True, return_state=True)
    assert not rnn._plain_cell(dropout, True) and rnn._plain_cell(dropout, False)  # dropout only in training
    assert not rnn._plain_cell(keras.layers.GRU(4, reset_after=False), False)
    assert not rnn._plain_cell(keras.layers.LSTM(4, activation="relu"), False)
    assert not rnn._plain_cell(keras.layers.SimpleRNN(4), False)
    assert not rnn._plain_cell(keras.layers.GRU(4, return_sequences=True), False)  # no states returned
    backwards = keras.layers.GRU(4, go_backwards=True, return_sequences=True, return_state=True)
    _, x, mask = _inputs()
    want = backwards(x, mask=mask)
    got = rnn.run_layer(backwards, x, mask=mask)  # go_backwards on a layer of its own: the layer itself
    for a, b in zip(want, got):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    summed = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True, return_state=True),
                                        merge_mode="sum")
    want = summed(x, mask=mask)
    got = rnn.run_layer(summed, x, mask=mask)  # merge_mode sum: the layer itself
    for a, b in zip(want, got):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
