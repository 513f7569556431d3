"""Multi-head attention's key/value cache (keras-hub's ``CachedMultiHeadAttention`` convention): a
decoder's cached self-attention, one token at a time, equals the one-shot causal call; a memory
projected once (``prepare``) equals attending to the memory itself."""

import numpy as np
import pytest
from keras import ops

import zoo.attention

from attention_helpers import fixed_seed, to_numpy  # noqa: F401 (autouse fixture)

B, T, D, L = 2, 5, 6, 7  # the cache holds more slots (L) than the positions written (T)


@pytest.mark.parametrize("rotary", [False, True], ids=["plain", "rotary"])
def test_cached_decoding_one_token_at_a_time_equals_the_one_shot_causal_call(rotary):
    layer = zoo.attention.create("multi_head", num_heads=2, key_dim=4)
    rope = zoo.attention.create("rotary") if rotary else None
    x = np.random.default_rng(0).normal(size=(B, T, D)).astype("float32")
    full, full_weights = layer(x, x, use_causal_mask=True, rotary=rope, return_attention_scores=True)
    empty = ops.zeros((B, 2, L, 4))
    cache = (empty, empty)
    for t in range(T):
        step, weights, cache = layer(x[:, t:t + 1], x[:, t:t + 1], use_causal_mask=True, cache=cache,
                                     cache_update_index=t, rotary=rope, return_attention_scores=True)
        np.testing.assert_allclose(to_numpy(step)[:, 0], to_numpy(full)[:, t], atol=1e-5)
        np.testing.assert_allclose(to_numpy(weights)[:, :, 0, :T], to_numpy(full_weights)[:, :, t], atol=1e-6)
        assert not np.any(to_numpy(weights)[:, :, 0, t + 1:])  # the slots not written yet
    assert tuple(cache[0].shape) == (B, 2, L, 4) and not np.any(to_numpy(cache[0])[:, :, T:])


def test_a_memory_projected_once_equals_attending_to_it():
    layer = zoo.attention.create("multi_head", num_heads=3, key_dim=2, value_dim=5)
    rng = np.random.default_rng(1)
    query, memory = rng.normal(size=(B, 3, D)).astype("float32"), rng.normal(size=(B, T, 4)).astype("float32")
    mask = np.array([[True] * T, [True, True, False, False, False]])
    want = layer(query, memory, value_mask=mask)
    got, cache = layer(query, None, value_mask=mask, cache=layer.prepare(memory))
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), atol=1e-6)
    assert [tuple(part.shape) for part in cache] == [(B, 3, T, 2), (B, 3, T, 5)]


def test_one_query_equals_the_last_row_of_the_causal_call():
    layer = zoo.attention.create("multi_head", num_heads=2, key_dim=8)
    x = np.random.default_rng(1).normal(size=(2, 40, 16)).astype("float32")
    full = to_numpy(layer(x, x, use_causal_mask=True))
    one = to_numpy(layer(x[:, 39:40], x))  # one query: bottom-right aligned, it sees every key
    np.testing.assert_allclose(one[:, 0], full[:, 39], rtol=1e-5, atol=1e-5)


def test_a_cache_update_index_needs_a_cache():
    layer = zoo.attention.create("multi_head", num_heads=2, key_dim=2)
    x = np.ones((1, 2, 4), "float32")
    with pytest.raises(ValueError, match="`cache_update_index` needs a `cache`"):
        layer(x, x, cache_update_index=0)
