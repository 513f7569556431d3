"""Hand-computed numbers for each alignment layer, checked against numpy."""

import math

import keras
import numpy as np
import pytest
from keras import ops

import zoo.attention

from attention_helpers import ALIGNMENT_NAMES, fixed_seed, gradients, to_numpy  # noqa: F401 (autouse fixture)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def rand(rng, *shape):
    return rng.normal(size=shape).astype("float32")


def test_dot_with_small_numbers():
    query = np.array([[[1.0, 0.0], [0.0, 2.0]]], "float32")
    value = np.array([[[1.0, 1.0], [2.0, 0.0], [0.0, 1.0]]], "float32")
    output, weights = zoo.attention.create("dot")(query, value, return_attention_scores=True)
    # scores: row 0 = [1, 2, 0], row 1 = [2, 0, 2]
    np.testing.assert_allclose(to_numpy(weights)[0, 0], [0.2447, 0.6652, 0.0900], atol=1e-4)
    np.testing.assert_allclose(to_numpy(weights)[0, 1], [0.4683, 0.0634, 0.4683], atol=1e-4)
    np.testing.assert_allclose(to_numpy(output)[0], softmax(np.array([[1, 2, 0], [2, 0, 2.0]])) @ value[0],
                               atol=1e-6)


def test_dot_rejects_different_query_and_key_sizes():
    with pytest.raises(ValueError, match="same feature size"):
        zoo.attention.create("dot")(np.ones((1, 2, 3)), np.ones((1, 4, 5)))


def test_scaled_dot_divides_by_sqrt_dk():
    rng = np.random.default_rng(0)
    q, v, k = rand(rng, 2, 3, 4), rand(rng, 2, 5, 6), rand(rng, 2, 5, 4)
    output, weights = zoo.attention.create("scaled_dot")(q, v, k, return_attention_scores=True)
    expected = softmax(q @ k.transpose(0, 2, 1) / 2.0)
    np.testing.assert_allclose(to_numpy(weights), expected, atol=1e-6)
    np.testing.assert_allclose(to_numpy(output), expected @ v, atol=1e-5)


def test_general_is_bilinear_with_w_a_on_the_keys():
    rng = np.random.default_rng(1)
    q, v = rand(rng, 2, 3, 4), rand(rng, 2, 5, 6)
    layer = zoo.attention.create("general")
    layer(q, v)
    kernel = rand(rng, 6, 4)  # Dense kernel = W_a^T, W_a: [Dq, Dk]
    layer.key_dense.kernel.assign(kernel)
    output, weights = layer(q, v, return_attention_scores=True)
    w_a = kernel.T
    expected = softmax(np.einsum("bqi,ij,bkj->bqk", q, w_a, v))
    np.testing.assert_allclose(to_numpy(weights), expected, atol=1e-5)
    np.testing.assert_allclose(to_numpy(layer.prepare_key(v)), v @ kernel, atol=1e-5)  # W_a h_s


def test_concat_scores_the_concatenation():
    rng = np.random.default_rng(2)
    q, v = rand(rng, 2, 3, 4), rand(rng, 2, 5, 6)
    layer = zoo.attention.create("concat", units=7)
    _, weights = layer(q, v, return_attention_scores=True)
    kernel, v_a = to_numpy(layer.kernel), to_numpy(layer.v)
    assert kernel.shape == (4 + 6, 7)
    scores = np.zeros((2, 3, 5))
    for b in range(2):
        for t in range(3):
            for s in range(5):
                scores[b, t, s] = v_a @ np.tanh(np.concatenate([q[b, t], v[b, s]]) @ kernel)
    np.testing.assert_allclose(to_numpy(weights), softmax(scores), atol=1e-5)


def additive_numpy(q, k, w_q, w_k, v, bias=0.0):
    hidden = np.tanh((q @ w_q)[:, :, None, :] + (k @ w_k + bias)[:, None, :, :])
    return softmax(hidden @ v)


def test_additive_matches_numpy():
    rng = np.random.default_rng(3)
    q, v = rand(rng, 2, 3, 4), rand(rng, 2, 5, 6)
    layer = zoo.attention.create("additive", units=8)
    _, weights = layer(q, v, return_attention_scores=True)
    expected = additive_numpy(q, v, to_numpy(layer.query_dense.kernel), to_numpy(layer.key_dense.kernel),
                              to_numpy(layer.v))
    np.testing.assert_allclose(to_numpy(weights), expected, atol=1e-5)


def test_additive_normalize_is_weight_normalized_bahdanau():
    rng = np.random.default_rng(4)
    q, v = rand(rng, 2, 3, 4), rand(rng, 2, 5, 6)
    layer = zoo.attention.create("additive", units=8, normalize=True)
    _, weights = layer(q, v, return_attention_scores=True)
    assert {w.path.split("/")[-1] for w in layer.weights} >= {"v", "g", "b"}
    np.testing.assert_allclose(to_numpy(layer.g), math.sqrt(1.0 / 8), rtol=1e-6)
    np.testing.assert_array_equal(to_numpy(layer.b), 0.0)
    layer.g.assign(1.7)
    layer.b.assign(rand(rng, 8))
    _, weights = layer(q, v, return_attention_scores=True)
    v_a = to_numpy(layer.v)
    expected = additive_numpy(q, v, to_numpy(layer.query_dense.kernel), to_numpy(layer.key_dense.kernel),
                              1.7 * v_a / np.linalg.norm(v_a), bias=to_numpy(layer.b))
    np.testing.assert_allclose(to_numpy(weights), expected, atol=1e-5)
    # Weight normalization: the scale of v_a does not matter, only g does.
    layer.v.assign(5.0 * v_a)
    np.testing.assert_allclose(to_numpy(layer(q, v, return_attention_scores=True)[1]), expected, atol=1e-5)
    assert zoo.attention.create("additive", normalize=True).get_config()["normalize"] is True


# -- multi-head: the same numbers as keras.layers.MultiHeadAttention --------------------------

def copy_weights(ours, theirs):
    for mine, keras_dense in [(ours.query_dense, theirs._query_dense), (ours.key_dense, theirs._key_dense),
                              (ours.value_dense, theirs._value_dense), (ours.output_dense, theirs._output_dense)]:
        mine.set_weights(keras_dense.get_weights())


def mha_pair(query, value, key=None, **kwargs):
    keras_kwargs = {("output_shape" if k == "output_dim" else k): v for k, v in kwargs.items()}
    theirs = keras.layers.MultiHeadAttention(**keras_kwargs)
    # Built through the explicit-scores path: Keras' fused path (ops.dot_product_attention) fails
    # on JAX when value_dim != key_dim.
    theirs(query, value, key, return_attention_scores=True)
    ours = zoo.attention.create("multi_head", **kwargs)
    ours(query, value, key)
    copy_weights(ours, theirs)
    return ours, theirs


@pytest.mark.parametrize("kwargs", [
    {"num_heads": 2, "key_dim": 3},
    {"num_heads": 3, "key_dim": 2, "value_dim": 4, "output_dim": 5},
    {"num_heads": 2, "key_dim": 3, "use_bias": False},
])
def test_multi_head_equals_keras_multi_head_attention(kwargs):
    rng = np.random.default_rng(5)
    q, v, k = rand(rng, 2, 4, 6), rand(rng, 2, 5, 7), rand(rng, 2, 5, 8)
    ours, theirs = mha_pair(q, v, k, **kwargs)
    out, w = ours(q, v, k, return_attention_scores=True)
    ref_out, ref_w = theirs(q, v, k, return_attention_scores=True)
    assert tuple(w.shape) == (2, kwargs["num_heads"], 4, 5)
    np.testing.assert_allclose(to_numpy(out), to_numpy(ref_out), atol=1e-5)
    np.testing.assert_allclose(to_numpy(w), to_numpy(ref_w), atol=1e-5)


def test_multi_head_equals_keras_with_masks():
    rng = np.random.default_rng(6)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 5, 6)
    ours, theirs = mha_pair(q, v, num_heads=2, key_dim=3)
    value_mask = np.array([[True, True, True, False, False], [True, False, True, True, True]])
    attention_mask = rng.random((2, 4, 5)) < 0.7
    attention_mask[:, :, 0] = True
    for kwargs in [{"value_mask": value_mask}, {"attention_mask": attention_mask},
                   {"value_mask": value_mask, "attention_mask": attention_mask}]:
        out, w = ours(q, v, return_attention_scores=True, **kwargs)
        ref_out, ref_w = theirs(q, v, return_attention_scores=True, **kwargs)
        np.testing.assert_allclose(to_numpy(out), to_numpy(ref_out), atol=1e-5)
        np.testing.assert_allclose(to_numpy(w), to_numpy(ref_w), atol=1e-5)
    # Causal self-attention (Tq == Tv, where both layers align the causal mask alike).
    out, w = ours(q, q, use_causal_mask=True, return_attention_scores=True)
    ref_out, ref_w = theirs(q, q, use_causal_mask=True, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(out), to_numpy(ref_out), atol=1e-5)
    np.testing.assert_allclose(to_numpy(w), to_numpy(ref_w), atol=1e-5)


def test_multi_head_rows_with_nothing_to_attend_are_zero_unlike_keras():
    rng = np.random.default_rng(7)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 5, 6)
    ours, theirs = mha_pair(q, v, num_heads=2, key_dim=3)
    # All keys masked: ours gives 0, Keras a nonzero row (its fused path averages all values).
    value_mask = np.array([[True] * 5, [False] * 5])
    out, ref = to_numpy(ours(q, v, value_mask=value_mask)), to_numpy(theirs(q, v, value_mask=value_mask))
    np.testing.assert_allclose(out[0], ref[0], atol=1e-5)
    np.testing.assert_array_equal(out[1], 0.0)
    assert np.any(ref[1] != 0)
    # Masked query rows: ours gives 0, Keras computes them as if unmasked (and carries the mask).
    query_mask = np.array([[True, True, False, False], [True, True, True, True]])
    out, ref = to_numpy(ours(q, v, query_mask=query_mask)), to_numpy(theirs(q, v, query_mask=query_mask))
    np.testing.assert_allclose(out[query_mask], ref[query_mask], atol=1e-5)
    np.testing.assert_array_equal(out[~query_mask], 0.0)
    np.testing.assert_allclose(ref, to_numpy(ours(q, v)), atol=1e-5)


def test_multi_head_matches_the_formula_in_numpy():
    """``Concat(head_1..head_h) W^O``, ``head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k)) V W_i^V``."""
    rng = np.random.default_rng(18)
    q, v, k = rand(rng, 2, 4, 6), rand(rng, 2, 5, 7), rand(rng, 2, 5, 8)
    value_mask = np.array([[True] * 5, [True, True, False, True, False]])
    layer = zoo.attention.create("multi_head", num_heads=3, key_dim=2, value_dim=4, output_dim=5)
    layer(q, v, k)
    for w in layer.weights:  # nonzero biases too
        w.assign(rand(rng, *w.shape))
    out, w = layer(q, v, k, value_mask=value_mask, return_attention_scores=True)

    def project(dense, x):
        kernel, bias = (to_numpy(t) for t in dense.weights)
        return np.einsum("btd,dhk->bthk", x, kernel) + bias  # [B, T, H, d]

    scores = np.einsum("bqhd,bkhd->bhqk", project(layer.query_dense, q), project(layer.key_dense, k)) / np.sqrt(2)
    weights = softmax(np.where(value_mask[:, None, None, :], scores, -np.inf))
    heads = np.einsum("bhqk,bkhd->bqhd", weights, project(layer.value_dense, v))  # [B, Tq, H, d_v]
    w_o, b_o = (to_numpy(t) for t in layer.output_dense.weights)
    expected = np.einsum("bqhd,hde->bqe", heads, w_o) + b_o
    np.testing.assert_allclose(to_numpy(w), weights, atol=1e-5)
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-4)


def test_multi_head_dot_scoring_is_unscaled():
    rng = np.random.default_rng(8)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 5, 6)
    ours, theirs = mha_pair(q, v, num_heads=2, key_dim=3)
    dot = zoo.attention.create("multi_head", num_heads=2, key_dim=3, scoring="dot")
    dot(q, v)
    dot.set_weights(ours.get_weights())
    # Unscaled scores == keras' scaled scores with the query projection multiplied by sqrt(d_k).
    kernel, bias = theirs._query_dense.get_weights()
    theirs._query_dense.set_weights([kernel * math.sqrt(3), bias * math.sqrt(3)])
    np.testing.assert_allclose(to_numpy(dot(q, v)), to_numpy(theirs(q, v)), atol=1e-5)


def test_multi_head_default_key_dim_is_model_dim_over_heads():
    layer = zoo.attention.create("multi_head", num_heads=2)
    out = layer(np.ones((1, 3, 8)), np.ones((1, 4, 10)))
    assert layer.head_key_dim == 4 and layer.head_value_dim == 4 and tuple(out.shape) == (1, 3, 8)


# -- local attention --------------------------------------------------------------------------

def test_local_m_gives_zero_weight_outside_the_window():
    rng = np.random.default_rng(9)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 7, 6)
    layer = zoo.attention.create("local_m", window_size=1)
    _, w = layer(q, v, return_attention_scores=True)
    w = to_numpy(w)
    s, t = np.arange(7)[None, :], np.arange(4)[:, None]
    outside = np.abs(s - t) > 1
    assert np.all(w[:, outside] == 0) and np.all(w[:, ~outside] > 0)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    # Inside the window, it is the inner score's softmax (default: general).
    scores = np.einsum("bqd,bkd->bqk", q, to_numpy(layer.prepare_key(v)))
    expected = softmax(np.where(outside, -np.inf, scores))
    np.testing.assert_allclose(w, expected, atol=1e-6)


def test_local_m_positions_for_incremental_decoding():
    rng = np.random.default_rng(10)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 9, 6)
    layer = zoo.attention.create("local_m", window_size=2, scoring="dot")
    _, w_offset = layer(q, v, position_offset=3, return_attention_scores=True)
    _, w_explicit = layer(q, v, query_positions=np.arange(3, 7), return_attention_scores=True)
    np.testing.assert_array_equal(to_numpy(w_offset), to_numpy(w_explicit))
    w = to_numpy(w_offset)
    for t in range(4):
        centre = t + 3
        assert np.all(w[:, t, :centre - 2] == 0) and np.all(w[:, t, centre + 3:] == 0)
    # Per-example positions [B, Tq].
    positions = np.array([[0, 0, 0, 0], [8, 8, 8, 8]])
    w = to_numpy(layer(q, v, query_positions=positions, return_attention_scores=True)[1])
    assert np.all(w[0, :, 3:] == 0) and np.all(w[1, :, :6] == 0)


def test_local_m_gaussian_and_renormalize():
    rng = np.random.default_rng(11)
    q, v = rand(rng, 1, 3, 4), rand(rng, 1, 6, 4)
    plain = zoo.attention.create("local_m", window_size=2, scoring="dot")
    gauss = zoo.attention.create("local_m", window_size=2, scoring="dot", gaussian=True)
    renorm = zoo.attention.create("local_m", window_size=2, scoring="dot", gaussian=True, renormalize=True)
    w = to_numpy(plain(q, v, return_attention_scores=True)[1])
    w_g = to_numpy(gauss(q, v, return_attention_scores=True)[1])
    w_r = to_numpy(renorm(q, v, return_attention_scores=True)[1])
    distance = np.arange(6)[None, :] - np.arange(3)[:, None]
    sigma = 2 / 2.0
    np.testing.assert_allclose(w_g[0], w[0] * np.exp(-distance ** 2 / (2 * sigma ** 2)), atol=1e-6)
    assert np.all(w_g.sum(-1) < 1.0)  # the paper does not renormalize
    np.testing.assert_allclose(w_r[0], w_g[0] / w_g[0].sum(-1, keepdims=True), atol=1e-6)


def test_local_p_predicts_the_centre_and_zeroes_the_outside():
    rng = np.random.default_rng(12)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 9, 6)
    value_mask = np.array([[True] * 9, [True] * 6 + [False] * 3])
    layer = zoo.attention.create("local_p", window_size=2)
    _, w = layer(q, v, value_mask=value_mask, return_attention_scores=True)
    w = to_numpy(w)
    # p_t = S sigmoid(v_p^T tanh(W_p h_t)), S the unpadded length.
    w_p, v_p = to_numpy(layer.position_dense.kernel), to_numpy(layer.v_p)
    lengths = np.array([9.0, 6.0])[:, None]
    p = lengths / (1 + np.exp(-(np.tanh(q @ w_p) @ v_p)))
    mask = layer.combine_masks(q, v, value_mask=value_mask)
    np.testing.assert_allclose(to_numpy(layer.predict_positions(q, mask=mask)), p, atol=1e-5)
    distance = np.arange(9)[None, None, :] - p[..., None]
    inside = (np.abs(distance) <= 2) & value_mask[:, None, :]
    assert np.all(w[~inside] == 0)
    scores = np.einsum("bqd,bkd->bqk", q, to_numpy(layer.prepare_key(v)))
    expected = softmax(np.where(inside, scores, -np.inf)) * np.exp(-distance ** 2 / (2 * 1.0 ** 2))
    expected = np.where(inside, expected, 0.0)
    np.testing.assert_allclose(w, expected, atol=1e-5)
    assert np.all(w.sum(-1) <= 1.0 + 1e-6)


# -- location, key-value, hard ------------------------------------------------------------------

def test_location_is_a_softmax_of_w_a_h_t_over_the_real_length():
    rng = np.random.default_rng(13)
    q, v = rand(rng, 2, 3, 4), rand(rng, 2, 5, 6)
    value_mask = np.array([[True] * 5, [True, True, True, False, False]])
    layer = zoo.attention.create("location", max_length=8)
    out, w = layer(q, v, value_mask=value_mask, return_attention_scores=True)
    logits = q @ to_numpy(layer.query_dense.kernel)  # [B, Tq, 8]
    expected = softmax(np.where(value_mask[:, None, :], logits[..., :5], -np.inf))
    np.testing.assert_allclose(to_numpy(w), expected, atol=1e-6)
    np.testing.assert_allclose(to_numpy(out), expected @ v, atol=1e-5)


def test_location_positions_beyond_max_length_get_zero_weight():
    rng = np.random.default_rng(14)
    q, v = rand(rng, 2, 3, 4), rand(rng, 2, 7, 6)
    layer = zoo.attention.create("location", max_length=4)
    _, w = layer(q, v, return_attention_scores=True)
    w = to_numpy(w)
    assert np.all(w[..., 4:] == 0)
    np.testing.assert_allclose(w[..., :4], softmax(q @ to_numpy(layer.query_dense.kernel)), atol=1e-6)


@pytest.mark.parametrize("predict", [False, True])
def test_key_value_scores_key_parts_and_sums_value_parts(predict):
    rng = np.random.default_rng(15)
    q, v = rand(rng, 2, 3, 6), rand(rng, 2, 5, 12)
    n = 3 if predict else 2
    layer = zoo.attention.create("key_value", predict=predict)
    out, w = layer(q, v, return_attention_scores=True)
    k_q, k_s, v_s = q[..., :6 // n], v[..., :12 // n], v[..., 12 // n:2 * 12 // n]
    hidden = np.tanh((k_q @ to_numpy(layer.query_dense.kernel))[:, :, None]
                     + (k_s @ to_numpy(layer.key_dense.kernel))[:, None])  # M_t
    expected = softmax(hidden @ to_numpy(layer.w))  # alpha_t
    np.testing.assert_allclose(to_numpy(w), expected, atol=1e-5)
    np.testing.assert_allclose(to_numpy(out), expected @ v_s, atol=1e-5)  # r_t
    assert tuple(out.shape) == (2, 3, 12 // n)
    # The value parts of the query and the predict parts of the memory are not used.
    q2, v2 = q.copy(), v.copy()
    q2[..., 6 // n:] += 1.0
    if predict:
        v2[..., 8:] += 1.0
    np.testing.assert_allclose(to_numpy(layer(q2, v2)), to_numpy(out), atol=1e-6)


def test_key_value_needs_divisible_sizes():
    with pytest.raises(ValueError, match="divisible by 3"):
        zoo.attention.create("key_value", predict=True)(np.ones((1, 2, 6)), np.ones((1, 3, 4)))


def test_hard_is_one_hot_argmax_at_inference():
    rng = np.random.default_rng(16)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 5, 6)
    layer = zoo.attention.create("hard", scoring="dot")
    out, w = layer(q, v, return_attention_scores=True)
    out, w = to_numpy(out), to_numpy(w)
    np.testing.assert_allclose(w, softmax(q @ v.transpose(0, 2, 1)), atol=1e-6)  # soft weights returned
    index = w.argmax(-1)
    np.testing.assert_array_equal(out, np.take_along_axis(v, index[..., None], axis=1))
    np.testing.assert_array_equal(to_numpy(layer(q, v, training=False)), out)


def test_hard_samples_in_proportion_to_the_weights_and_gradients_flow():
    rng = np.random.default_rng(17)
    value = np.eye(3, dtype="float32")[None].repeat(4000, axis=0)  # one-hot values reveal the pick
    query = np.tile(rand(rng, 1, 1, 3), (4000, 1, 1))
    layer = zoo.attention.create("hard", scoring="general", seed=3)
    out, w = layer(query, value, return_attention_scores=True, training=True)
    out = to_numpy(out)[:, 0]
    assert np.all(np.sort(out, -1) == [0.0, 0.0, 1.0])  # exactly one value per sample
    np.testing.assert_allclose(out.mean(0), to_numpy(w)[0, 0], atol=0.03)  # Gumbel-max samples ~ alpha

    def loss_fn(call, query):
        return ops.sum(call(query, value[:8], training=True) * ops.convert_to_tensor([1.0, -2.0, 3.0]))

    _, grads = gradients(layer, loss_fn, [query[:8]])
    assert all(g is not None and np.all(np.isfinite(g)) for g in grads)
    assert all(np.any(g != 0) for g in grads)  # straight-through gradient reaches every weight of f_att


def test_every_alignment_layer_has_a_hand_computed_case():
    """Each name in ``alignment_names()`` has a ``test_<name>_...`` numeric test in this module."""
    tests = [n for n, f in globals().items() if n.startswith("test_") and callable(f)]
    missing = [name for name in ALIGNMENT_NAMES
               if not any(t.startswith(f"test_{name}_") and "reject" not in t and "needs" not in t for t in tests)]
    assert missing == []


def test_additive_scores_are_v_dot_tanh_of_the_sums():
    """``AdditiveAttention.score``: ``v^T tanh(W q + U k)`` as the einsum of the equation, for several queries."""
    layer = zoo.attention.create("additive", units=6)
    rng = np.random.default_rng(3)
    query, value = rand(rng, 2, 3, 5), rand(rng, 2, 4, 7)
    layer.build(query.shape, value.shape)
    keys = layer.prepare(value)
    hidden = ops.tanh(ops.expand_dims(layer.query_dense(query), -2) + ops.expand_dims(keys, -3))
    expected = ops.einsum("bqku,u->bqk", hidden, layer.v)
    np.testing.assert_allclose(to_numpy(layer.score(query, keys)), to_numpy(expected), rtol=1e-5, atol=1e-6)


def test_location_aware_by_hand_over_two_steps():
    """``e_ij = w^T tanh(W s + V h_j + U f_ij + b)``, ``F = Q * alpha_{i-1}`` (Chorowski et al. 2015, eqs.
    8-9) with one unit and one filter: ``W = 2``, ``V = U = w = 1``, ``b = 0``, ``Q = [0.5, 1, 2]`` (as
    Keras' cross-correlation: ``f_j = 0.5 a_{j-1} + a_j + 2 a_{j+1}``), ``s = 0.5``, ``h = [1, 0, -1]``.
    Step 1 from ``alpha_0 = [1, 0, 0]``: ``f = [1, 0.5, 0]``, ``e = tanh([3, 1.5, 0]) = [0.99505,
    0.90515, 0]``, ``alpha_1 = [0.43788, 0.40023, 0.16189]``. Step 2 from ``alpha_1``: ``f = [1.23835,
    0.94295, 0.36200]``, ``e = [0.99693, 0.95977, 0.34698]``, ``alpha_2 = [0.40232, 0.38764, 0.21004]``."""
    layer = zoo.attention.create("location_aware", units=1, filters=1, kernel_size=3)
    query, key = np.array([[[0.5]]], "float32"), np.array([[[1.0], [0.0], [-1.0]]], "float32")
    value = np.array([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]], "float32")
    layer(query, value, key)
    layer.query_dense.set_weights([np.array([[2.0]], "float32")])
    layer.key_dense.set_weights([np.array([[1.0]], "float32")])
    layer.location_conv.set_weights([np.array([0.5, 1.0, 2.0], "float32").reshape(3, 1, 1)])
    layer.location_dense.set_weights([np.array([[1.0]], "float32")])
    layer.v.assign(np.array([1.0], "float32"))
    prepared = layer.prepare(value, key)
    output, alpha_1 = layer.attend(query, value, prepared, previous_weights=np.array([[[1.0, 0.0, 0.0]]], "float32"),
                                   return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(alpha_1)[0, 0], [0.43788, 0.40023, 0.16189], atol=1e-5)
    np.testing.assert_allclose(to_numpy(output)[0, 0], [0.76165, 0.72400], atol=1e-5)  # alpha_1 [h_1; h_2; h_3]
    output, alpha_2 = layer.attend(query, value, prepared, previous_weights=alpha_1, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(alpha_2)[0, 0], [0.40232, 0.38764, 0.21004], atol=1e-5)
    np.testing.assert_allclose(to_numpy(output)[0, 0], [0.82240, 0.80772], atol=1e-5)
