"""Position encodings: sinusoidal and rotary vs their formulas, learned embeddings."""

import keras
import numpy as np
import pytest

import zoo.attention

from attention_helpers import fixed_seed, to_numpy  # noqa: F401 (autouse fixture)


def sinusoidal_numpy(length, depth, start=0, base=10000.0):
    pe = np.zeros((length, depth))
    for pos in range(length):
        for i in range(0, depth, 2):
            angle = (start + pos) / base ** (i / depth)  # i = 2k: 10000^{2k / d_model}
            pe[pos, i] = np.sin(angle)
            if i + 1 < depth:
                pe[pos, i + 1] = np.cos(angle)
    return pe


@pytest.mark.parametrize("depth", [6, 7])
def test_sinusoidal_matches_the_formula(depth):
    x = np.random.default_rng(0).normal(size=(2, 5, depth)).astype("float32")
    out = to_numpy(zoo.attention.create("sinusoidal")(x))
    np.testing.assert_allclose(out, x + sinusoidal_numpy(5, depth), atol=1e-5)


def test_sinusoidal_start_index_continues_the_sequence():
    layer = zoo.attention.create("sinusoidal", max_wavelength=100.0)
    full = to_numpy(layer(np.zeros((1, 8, 4), "float32")))
    step = to_numpy(layer(np.zeros((1, 3, 4), "float32"), start_index=5))
    np.testing.assert_allclose(step, full[:, 5:], atol=1e-5)
    np.testing.assert_allclose(full[0], sinusoidal_numpy(8, 4, base=100.0), atol=1e-5)
    per_example = to_numpy(layer(np.zeros((2, 3, 4), "float32"), start_index=np.array([0, 5])))
    np.testing.assert_allclose(per_example[0], full[0, :3], atol=1e-5)
    np.testing.assert_allclose(per_example[1], full[0, 5:], atol=1e-5)


def test_sinusoidal_keeps_the_keras_mask():
    x = keras.layers.Embedding(10, 4, mask_zero=True)(np.array([[1, 2, 0]]))
    out = zoo.attention.create("sinusoidal")(x)
    np.testing.assert_array_equal(to_numpy(out._keras_mask), [[True, True, False]])


def test_learned_embeddings_are_added_and_indexed_from_start_index():
    layer = zoo.attention.create("learned", max_length=8)
    x = np.random.default_rng(1).normal(size=(2, 5, 4)).astype("float32")
    out = to_numpy(layer(x, start_index=2))
    table = to_numpy(layer.embeddings)
    assert table.shape == (8, 4) and len(layer.trainable_weights) == 1
    np.testing.assert_allclose(out, x + table[2:7], atol=1e-6)
    # Beyond max_length the last row is reused (documented).
    np.testing.assert_allclose(to_numpy(layer(x, start_index=6))[0, 2:], x[0, 2:] + table[7], atol=1e-6)


def test_learned_rejects_a_static_length_beyond_max_length():
    with pytest.raises(ValueError, match="cannot embed 9 positions"):
        zoo.attention.create("learned", max_length=8)(np.zeros((1, 9, 4)))


def rotary_numpy(x, start=0, base=10000.0):
    """RoFormer eq. 34: rotate pairs (x_{2i}, x_{2i+1}) at position m by m * theta_i."""
    t, d = x.shape[1], x.shape[-1]
    out = np.empty_like(x, dtype="float64")
    for m in range(t):
        for i in range(d // 2):
            theta = base ** (-2 * i / d)
            c, s = np.cos((start + m) * theta), np.sin((start + m) * theta)
            a, b = x[:, m, ..., 2 * i], x[:, m, ..., 2 * i + 1]
            out[:, m, ..., 2 * i] = a * c - b * s
            out[:, m, ..., 2 * i + 1] = a * s + b * c
    return out


def test_rotary_matches_the_formula_for_3d_and_4d_inputs():
    rng = np.random.default_rng(2)
    layer = zoo.attention.create("rotary")
    x3 = rng.normal(size=(2, 5, 6)).astype("float32")
    np.testing.assert_allclose(to_numpy(layer(x3)), rotary_numpy(x3), atol=1e-5)
    x4 = rng.normal(size=(2, 5, 3, 4)).astype("float32")  # [B, T, H, d]
    np.testing.assert_allclose(to_numpy(layer(x4, start_index=3)), rotary_numpy(x4, start=3), atol=1e-5)
    heads_first = zoo.attention.create("rotary", sequence_axis=2)
    x4t = x4.transpose(0, 2, 1, 3)  # [B, H, T, d]
    np.testing.assert_allclose(to_numpy(heads_first(x4t, start_index=3)),
                               rotary_numpy(x4, start=3).transpose(0, 2, 1, 3), atol=1e-5)
    # one call's own axis: a layer built for [B, T, H, d] rotating heads-first operands (the Transformer's)
    np.testing.assert_allclose(to_numpy(layer(x4t, start_index=3, sequence_axis=2)),
                               rotary_numpy(x4, start=3).transpose(0, 2, 1, 3), atol=1e-5)
    with pytest.raises(ValueError, match=r"sequence_axis=3, inputs_shape=\(2, 3, 5, 4\)"):
        layer(x4t, sequence_axis=3)  # the features' axis


def test_rotary_dot_products_depend_on_relative_position_only():
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(1, 1, 8)).astype("float32"), rng.normal(size=(1, 1, 8)).astype("float32")
    rope = zoo.attention.create("rotary")

    def score(m, n):
        return float(np.sum(to_numpy(rope(q, start_index=m)) * to_numpy(rope(k, start_index=n))))

    assert score(3, 1) == pytest.approx(score(10, 8), abs=1e-4)
    assert score(0, 0) == pytest.approx(float(np.sum(q * k)), abs=1e-5)
    np.testing.assert_allclose(np.linalg.norm(to_numpy(rope(q, start_index=7))), np.linalg.norm(q), rtol=1e-5)


def test_rotary_needs_an_even_feature_size():
    with pytest.raises(ValueError, match="even size"):
        zoo.attention.create("rotary")(np.zeros((1, 3, 5)))


@pytest.mark.parametrize("name", ["sinusoidal", "learned", "rotary"])
def test_positional_symbolic_shapes(name):
    inputs = keras.Input((None, 6))
    outputs = zoo.attention.create(name)(inputs)
    assert tuple(outputs.shape) == (None, None, 6)
    model = keras.Model(inputs, outputs)
    assert model.predict(np.zeros((2, 3, 6), "float32"), verbose=0).shape == (2, 3, 6)
