"""``zoo.attention``'s score biases through ``MultiHeadAttention(score_bias=...)``: Shaw et al.'s relative
positions against the paper's equations in numpy, T5's buckets against its reference function, ALiBi's
slopes and biases by hand, and cached decoding (positions from ``cache_update_index``) equal to the
full causal call for each."""

import math

import numpy as np
import pytest

import zoo.attention
from zoo.attention.alibi_position_bias import alibi_slopes
from zoo.attention.multi_head_attention import MultiHeadAttention
from zoo.attention.t5_position_bias import relative_position_bucket

from attention_helpers import fixed_seed, to_numpy  # noqa: F401 (fixed_seed: autouse fixture)

B, T, D, H, K = 2, 5, 8, 2, 4


def _inputs(seed=0):
    return np.random.default_rng(seed).normal(size=(B, T, D)).astype("float32")


def _bias(name, **kwargs):
    return zoo.attention.create(name, **({"num_heads": H} if name != "relative" else {}), **kwargs)


def test_relative_positions_are_shaws_equations():
    """e_ij = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_z), z_i = sum_j alpha_ij (x_j W^V + a^V_ij), by numpy."""
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    relative = _bias("relative", max_distance=2)
    x = _inputs()
    out, weights = layer(x, x, score_bias=relative, return_attention_scores=True)
    w = {v.path.split("/")[-2] + "/" + v.path.split("/")[-1]: to_numpy(v) for v in layer.weights}
    q = np.einsum("btd,dhk->bhtk", x, w["query/kernel"]) + w["query/bias"][None, :, None]
    k = np.einsum("btd,dhk->bhtk", x, w["key/kernel"]) + w["key/bias"][None, :, None]
    v = np.einsum("btd,dhk->bhtk", x, w["value/kernel"]) + w["value/bias"][None, :, None]
    distance = np.clip(np.arange(T)[None, :] - np.arange(T)[:, None], -2, 2) + 2  # clip(j - i, k)
    a_k, a_v = to_numpy(relative.key_embeddings)[distance], to_numpy(relative.value_embeddings)[distance]
    e = (np.einsum("bhid,bhjd->bhij", q, k) + np.einsum("bhid,ijd->bhij", q, a_k)) / math.sqrt(K)
    alpha = np.exp(e - e.max(-1, keepdims=True))
    alpha /= alpha.sum(-1, keepdims=True)
    z = np.einsum("bhij,bhjd->bhid", alpha, v) + np.einsum("bhij,ijd->bhid", alpha, a_v)
    expected = np.einsum("bhtd,hdo->bto", z, w["attention_output/kernel"]) + w["attention_output/bias"]
    np.testing.assert_allclose(to_numpy(weights), alpha, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(out), expected, rtol=1e-5, atol=1e-5)


def _t5_reference_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """Hugging Face's ``T5Attention._relative_position_bucket`` (from Mesh TensorFlow), in numpy."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).astype(np.int64) * num_buckets
        relative_position = np.abs(relative_position)
    else:
        relative_position = -np.minimum(relative_position, np.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    with np.errstate(divide="ignore", invalid="ignore"):
        large = max_exact + (np.log(relative_position.astype(np.float32) / max_exact)
                             / math.log(max_distance / max_exact) * (num_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, np.full_like(large, num_buckets - 1))
    return relative_buckets + np.where(is_small, relative_position, large)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 20)])
def test_t5_buckets_are_the_reference_buckets(bidirectional, num_buckets, max_distance):
    distance = np.arange(-300, 301)
    ours = to_numpy(relative_position_bucket(distance, bidirectional, num_buckets, max_distance))
    np.testing.assert_array_equal(ours, _t5_reference_bucket(distance, bidirectional, num_buckets, max_distance))


def test_t5_bias_is_one_scalar_per_head_and_bucket():
    t5 = _bias("t5", num_buckets=8, max_distance=16, bidirectional=False)
    bias = to_numpy(t5(np.zeros((1, H, 3, K)), np.zeros((1, H, 4, K)), start_index=2))  # queries at 2, 3, 4
    table = to_numpy(t5.bias)  # [buckets, H]
    distance = np.arange(4)[None, :] - np.arange(2, 5)[:, None]
    np.testing.assert_array_equal(bias[0], table[_t5_reference_bucket(distance, False, 8, 16)].transpose(2, 0, 1))


def test_alibi_slopes_and_bias_follow_the_paper():
    assert alibi_slopes(8) == [2.0 ** -i for i in range(1, 9)]  # 1/2, 1/4, ..., 1/256 (sec. 3)
    assert alibi_slopes(3) == [2.0 ** -4, 2.0 ** -8, 2.0 ** -2]  # 2 of 2 heads, then every other of 4
    bias = to_numpy(_bias("alibi")(np.zeros((1, H, 2, K)), np.zeros((1, H, 3, K)), start_index=1))
    np.testing.assert_allclose(bias[0, 1], -(2.0 ** -8) * np.array([[1, 0, 1], [2, 1, 0]]))


@pytest.mark.parametrize("name", ["relative", "t5", "alibi"])
def test_a_score_bias_changes_the_scores_only_as_added(name):
    """Without ``value_term`` (t5, alibi): the weights are softmax(e + b), b the layer's bias."""
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    bias_layer = _bias(name)
    x = _inputs()
    _, plain = layer(x, x, return_attention_scores=True)
    _, biased = layer(x, x, score_bias=bias_layer, return_attention_scores=True)
    assert not np.allclose(to_numpy(plain), to_numpy(biased))
    if name != "relative":
        scores = np.log(to_numpy(plain)) + to_numpy(bias_layer(np.zeros((1, H, T, K))))
        expected = np.exp(scores - scores.max(-1, keepdims=True))
        np.testing.assert_allclose(to_numpy(biased), expected / expected.sum(-1, keepdims=True), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("name", ["relative", "t5", "alibi"])
@pytest.mark.parametrize("sliding_window", [None, 2])
def test_cached_decoding_with_a_score_bias_equals_the_full_call(name, sliding_window):
    """The step's offset reaches the bias: one position a step through the cache (rolling with a window)."""
    layer = MultiHeadAttention(num_heads=H, key_dim=K, num_kv_heads=1, sliding_window=sliding_window)
    bias_layer = _bias(name, **({"bidirectional": False} if name == "t5" else {}))
    x = _inputs()
    full = to_numpy(layer(x, x, use_causal_mask=True, score_bias=bias_layer))
    cache, outputs = layer.initial_cache(B, T), []
    for t in range(T):
        out, cache = layer(x[:, t:t + 1], x[:, t:t + 1], use_causal_mask=True, cache=cache, cache_update_index=t,
                           score_bias=bias_layer)
        outputs.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(outputs, axis=1), full, rtol=1e-5, atol=1e-5)
