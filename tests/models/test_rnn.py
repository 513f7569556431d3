"""``zoo.models.recurrent.rnn``'s reference path: ``run_layer`` is Keras' layer, a GRU step is Cho et al.'s
equations (Keras' ``reset_after`` form), an LSTM step Hochreiter and Schmidhuber's, padding keeps the
state, and ``reverse_padded`` keeps the padding at the end. (The fast path: ``tests/fast/test_rnn.py``.)"""

import keras
import numpy as np
import pytest

from zoo import kernels
from zoo.models.recurrent import rnn


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_a_gru_step_is_the_papers_equations():
    keras.utils.set_random_seed(0)
    cell = rnn.make_cell("gru", 3, "gru")
    x, h = np.random.default_rng(0).normal(size=(2, 4)).astype("float32"), np.ones((2, 3), "float32") * 0.3
    new, _ = cell(x, [h])
    w, u, b = (np.asarray(v) for v in (cell.kernel, cell.recurrent_kernel, cell.bias))
    b = b + np.random.default_rng(1).normal(size=b.shape).astype("float32")  # non-zero biases: both are used
    cell.bias.assign(b)
    new, _ = cell(x, [h])
    xs, hs = x @ w + b[0], h @ u + b[1]  # gates z, r, h in Keras' order
    z, r = _sigmoid(xs[:, :3] + hs[:, :3]), _sigmoid(xs[:, 3:6] + hs[:, 3:6])
    candidate = np.tanh(xs[:, 6:] + r * hs[:, 6:])
    np.testing.assert_allclose(np.asarray(new), z * h + (1 - z) * candidate, rtol=1e-5, atol=1e-6)


def test_an_lstm_step_is_the_papers_equations():
    keras.utils.set_random_seed(1)
    cell = rnn.make_cell("lstm", 3, "lstm")
    rng = np.random.default_rng(2)
    x, h, c = (rng.normal(size=(2, n)).astype("float32") for n in (4, 3, 3))
    new, (h_new, c_new) = cell(x, [h, c])
    w, u, b = (np.asarray(v) for v in (cell.kernel, cell.recurrent_kernel, cell.bias))
    gates = x @ w + h @ u + b  # i, f, g, o in Keras' order
    i, f, g, o = _sigmoid(gates[:, :3]), _sigmoid(gates[:, 3:6]), np.tanh(gates[:, 6:9]), _sigmoid(gates[:, 9:])
    want_c = f * c + i * g
    np.testing.assert_allclose(np.asarray(c_new), want_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h_new), o * np.tanh(want_c), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(new), np.asarray(h_new))


@pytest.mark.parametrize("cell", rnn.RNN_CELLS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_run_layer_is_the_keras_layer_and_padding_keeps_the_state(cell, bidirectional):
    """The reference returns ``[outputs, *states]`` as the layer does; a padded row's final state is
    the state after its last real token (a row of the same tokens, unpadded)."""
    keras.utils.set_random_seed(2)
    x = np.random.default_rng(3).normal(size=(2, 5, 4)).astype("float32")
    x[1] = np.concatenate([x[0, :3], np.zeros((2, 4), "float32")])  # row 1: row 0's first 3 steps, padded
    mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    layer = rnn.make_rnn(cell, 6, "encoder", bidirectional)
    with kernels.using("reference"):
        got = rnn.run_layer(layer, x, mask=mask)
        short = rnn.run_layer(layer, x[1:, :3])  # row 1 without its padding
    assert len(got) == 1 + (2 if bidirectional else 1) * rnn.states_per_layer(cell)
    for a, b in zip(layer(x, mask=mask), got):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for state, want in zip(got[1:], short[1:]):
        np.testing.assert_allclose(np.asarray(state)[1], np.asarray(want)[0], rtol=1e-5, atol=1e-6)


def test_run_layer_starts_from_the_initial_state():
    keras.utils.set_random_seed(4)
    x = np.random.default_rng(5).normal(size=(2, 3, 4)).astype("float32")
    layer = rnn.make_rnn("lstm", 5, "decoder")
    initial = [np.full((2, 5), 0.5, "float32"), np.full((2, 5), -0.5, "float32")]
    with kernels.using("reference"):
        got = rnn.run_layer(layer, x, initial_state=initial)
        zero = rnn.run_layer(layer, x)
    want = layer(x, initial_state=initial)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.allclose(np.asarray(got[1]), np.asarray(zero[1]))


def test_reverse_padded_keeps_padding_at_the_end():
    sequences = np.array([[1, 2, 3, 0, 0], [4, 5, 0, 0, 0]])
    got = rnn.reverse_padded(sequences, np.array([3, 2]))
    np.testing.assert_array_equal(np.asarray(got), [[3, 2, 1, 0, 0], [5, 4, 0, 0, 0]])
