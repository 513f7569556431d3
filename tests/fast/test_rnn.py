"""``zoo.fast.rnn``: ``rnn.run_layer``'s fast path (one input product, the time loop's gradient
written out) equals the reference (Keras' layer): the same outputs at real steps, final states and
gradients, for GRU and LSTM, one and both directions, padded rows (length 0 included), initial
states, in eager, graph and XLA; the RNN models' logits, loss and gradients; and the cases that must
fall back to the reference."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from zoo import kernels
from zoo.fast import rnn as fast_rnn
from zoo.models.recurrent import rnn

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


def _run(mode, layer, x, **kwargs):
    with kernels.using(mode):
        return rnn.run_layer(layer, x, **kwargs)


def test_the_fast_path_is_registered_and_stays_in_force_when_exporting():
    with kernels.using("fast"):
        assert kernels.replacement(rnn.run_layer.key) is fast_rnn.run_layer
        with kernels.exporting():  # a SavedModel is traced on the fast loops too, forward only
            assert kernels.replacement(rnn.run_layer.key) is fast_rnn.run_layer


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
def test_exported_fast_layers_run_forward_only_with_no_custom_gradient_and_equal_the_reference(cell):
    """Traced within ``kernels.exporting()`` (as a SavedModel's functions are), the fast bidirectional
    layer holds no custom gradient (loading the SavedModel then warns of nothing) and gives Keras'
    layer's numbers."""
    keras.utils.set_random_seed(4)
    _, x, mask = _inputs(5)
    layer = rnn.make_rnn(cell, 7, "encoder", True)
    want = _run("reference", layer, x, mask=mask)
    spec = [tf.TensorSpec([None, None, 5], tf.float32), tf.TensorSpec([None, None], tf.bool)]
    with kernels.using("fast"), kernels.exporting():
        traced = tf.function(lambda x, m: rnn.run_layer(layer, x, mask=m), input_signature=spec)
        graph = traced.get_concrete_function().graph
        got = traced(tf.constant(x), tf.constant(mask))
    types = {op.type for op in graph.get_operations()}
    for function in graph._functions.values():
        types |= {node.op for node in function.definition.node_def}
    assert "Bitcast" in types and "ReverseSequence" in types  # the fast loops (int32 moves, reversal by length)
    assert not [op for op in graph.get_operations() if "_gradient_op_type" in op.node_def.attr]
    _close(want[0], got[0], mask)
    for want_state, got_state in zip(want[1:], got[1:]):
        _close(want_state, got_state)


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_fast_equals_reference_with_masks(cell, bidirectional):
    keras.utils.set_random_seed(1)
    _, x, mask = _inputs()
    layer = rnn.make_rnn(cell, 7, "encoder", bidirectional)
    assert all(fast_rnn._plain_cell(part, True) for part in (
        (layer.forward_layer, layer.backward_layer) if bidirectional else (layer,)))
    want, got = _run("reference", layer, x, mask=mask), _run("fast", layer, x, mask=mask)
    assert len(got) == len(want) == 1 + (2 if bidirectional else 1) * rnn.states_per_layer(cell)
    _close(want[0], got[0], mask)
    assert np.all(np.asarray(got[0])[~mask] == 0)  # padded steps: zero
    for want_state, got_state in zip(want[1:], got[1:]):
        _close(want_state, got_state)  # the length-0 row keeps its (zero) initial state


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
@pytest.mark.parametrize("used, masked, graph", [
    ("all", False, False), ("outputs", False, False), ("states", False, False), ("all", True, False),
    ("all", False, True), ("all", True, True),
], ids=["all-eager", "outputs-eager", "states-eager", "all-padded-eager", "all-graph", "all-padded-graph"])
def test_fast_equals_reference_with_initial_state_and_gradients(cell, used, masked, graph):
    """The loop's written-out gradient (``_gru_sequences``, ``_lstm_sequences``) against Keras' layer
    differentiated by TensorFlow, from given initial states, with the loss on every result or only on
    some (the others' gradients then reach the loop as None). The loss on a part of the results is
    checked eagerly only: ``tf.custom_gradient`` hands the written-out gradient zeros for the unused
    results eagerly and in a graph alike; the graph's own loops (``While`` ops) run with and without
    the padding."""
    keras.utils.set_random_seed(2)
    rng, x, mask = _inputs(3)
    layer = rnn.make_rnn(cell, 7, "decoder")
    initial = [tf.constant(rng.normal(size=(len(LENGTHS), 7)).astype("float32"))
               for _ in range(rnn.states_per_layer(cell))]
    x = tf.constant(x)
    pick = {"all": slice(None), "outputs": slice(0, 1), "states": slice(1, None)}[used]
    kept = tf.constant(mask[:, :, None] if masked else np.ones((len(LENGTHS), 6, 1), bool), tf.float32)

    def loss_and_grads(mode):
        with tf.GradientTape() as tape:
            tape.watch([x, *initial])
            outputs = _run(mode, layer, x, mask=mask if masked else None, initial_state=initial, training=True)
            outputs = [outputs[0] * kept, *outputs[1:]]  # the real steps' outputs
            loss = sum(ops.sum(ops.sin(out)) for out in outputs[pick])
        return outputs, tape.gradient(loss, [x, *initial, *layer.trainable_weights])

    run = tf.function(loss_and_grads) if graph else loss_and_grads
    (want, want_grads), (got, got_grads) = run("reference"), run("fast")
    for a, b in zip(want + want_grads, got + got_grads):
        _close(a, b)


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
def test_fast_gradients_equal_reference_under_mixed_bfloat16(cell):
    """Under ``mixed_bfloat16`` the loop runs in bfloat16, its gradient too: the reference's numbers up to bfloat16's rounding."""
    _, x, mask = _inputs(5)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(4)
        layer = rnn.make_rnn(cell, 8, "encoder", bidirectional=True)
        layer(x, mask=mask)
    finally:
        keras.mixed_precision.set_global_policy("float32")

    def grads(mode):
        with tf.GradientTape() as tape:
            outputs = _run(mode, layer, x, mask=mask)
            loss = sum(ops.sum(ops.sin(ops.cast(out, "float32"))) for out in outputs)
        return tape.gradient(loss, layer.trainable_weights)

    for want, got in zip(grads("reference"), grads("fast")):
        assert got.dtype == tf.float32  # the variables' gradients, in the variables' dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=0.1, rtol=0.05)


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
def test_fast_compiles_under_xla_with_the_reference_gradient(cell):
    """``jit_compile=True`` runs (``fit`` turns it on with ``runtime.jit_compile``) and gives the layer's gradient."""
    keras.utils.set_random_seed(3)
    _, x, mask = _inputs(4)
    layer = rnn.make_rnn(cell, 7, "encoder", bidirectional=True)
    layer(x, mask=mask)

    def grads(mode):
        with tf.GradientTape() as tape:
            outputs = _run(mode, layer, x, mask=mask)
            loss = ops.sum(ops.square(outputs[0])) + sum(ops.sum(state) for state in outputs[1:])
        return tape.gradient(loss, layer.trainable_weights)

    for want, got in zip(grads("reference"), tf.function(lambda: grads("fast"), jit_compile=True)()):
        _close(want, got)


def test_layers_that_are_not_plain_run_the_reference():
    dropout = keras.layers.GRU(4, dropout=0.5, return_sequences=True, return_state=True)
    assert not fast_rnn._plain_cell(dropout, True) and fast_rnn._plain_cell(dropout, False)  # dropout in training
    assert not fast_rnn._plain_cell(keras.layers.GRU(4, reset_after=False), False)
    assert not fast_rnn._plain_cell(keras.layers.LSTM(4, activation="relu"), False)
    assert not fast_rnn._plain_cell(keras.layers.SimpleRNN(4), False)
    assert not fast_rnn._plain_cell(keras.layers.GRU(4, return_sequences=True), False)  # no states returned
    _, x, mask = _inputs()
    backwards = keras.layers.GRU(4, go_backwards=True, return_sequences=True, return_state=True)
    summed = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True, return_state=True),
                                        merge_mode="sum")
    for layer in (backwards, summed):  # go_backwards on a layer of its own; merge_mode sum
        want = layer(x, mask=mask)
        for a, b in zip(want, _run("fast", layer, x, mask=mask)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name, options", [
    ("bahdanau", {"cell": "gru"}), ("bahdanau", {"cell": "lstm", "num_layers": 2}),
    ("luong", {"cell": "lstm"}), ("luong", {"cell": "gru", "bidirectional": False}),
    ("seq2seq", {"cell": "gru", "bidirectional": True, "num_layers": 2})],
    ids=["bahdanau-gru", "bahdanau-lstm-2", "luong-lstm", "luong-gru-1way", "seq2seq-gru-2"])
def test_rnn_models_train_alike_fast_and_reference(name, options):
    """The models that run ``run_layer``: the same logits at real target steps, loss and gradients of
    every weight with ``kernels=fast`` (every replacement they reach) and ``kernels=reference``, on
    padded sources and targets."""
    import zoo.models
    from zoo.training.losses import token_losses

    keras.utils.set_random_seed(5)
    model = zoo.models.create(name, source_vocab_size=13, target_vocab_size=11, embed_dim=8, hidden_size=8,
                              dropout=0.0, **options)
    source = tf.constant([[5, 6, 3, 7, 2], [4, 9, 0, 0, 0]], tf.int32)
    target_in = tf.constant([[1, 5, 6, 3], [1, 4, 0, 0]], tf.int32)
    target_out = tf.constant([[5, 6, 3, 2], [4, 2, 0, 0]], tf.int32)
    model((source, target_in))

    def run(mode):  # eager: tracing these models costs more than running them
        with tf.GradientTape() as tape, kernels.using(mode):
            logits = model((source, target_in), training=True)
            nll, mask = token_losses(target_out, logits)
            loss = tf.reduce_sum(nll * mask) / tf.reduce_sum(mask)
        return logits * mask[:, :, None], loss, tape.gradient(loss, model.trainable_weights)

    (want_logits, want_loss, want_grads), (got_logits, got_loss, got_grads) = run("reference"), run("fast")
    np.testing.assert_allclose(got_logits.numpy(), want_logits.numpy(), rtol=1e-5, atol=2e-6)
    assert float(got_loss) == pytest.approx(float(want_loss), rel=1e-6)
    for weight, a, b in zip(model.trainable_weights, got_grads, want_grads):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=weight.path)
