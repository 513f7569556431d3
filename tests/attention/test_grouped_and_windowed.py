"""``zoo.attention`` ``multi_head`` with shared key-value heads (GQA/MQA) and a sliding window: the same
numbers as ``keras.layers.GroupQueryAttention`` given the same weights, the same as full attention
under the equivalent mask, and cached decoding (a rolling cache of ``W`` slots) equal to the full call."""

import keras
import numpy as np
import pytest

import zoo.attention
from zoo.attention.multi_head_attention import MultiHeadAttention

from attention_helpers import fixed_seed, to_numpy  # noqa: F401 (fixed_seed: autouse fixture)

B, T, D, H = 2, 6, 8, 4


def _inputs(seed=0, length=T):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, length, D)).astype("float32")


def _pair(num_kv_heads, sliding_window=None):
    """Ours and Keras' ``GroupedQueryAttention`` with the same weights."""
    ours = MultiHeadAttention(num_heads=H, key_dim=2, num_kv_heads=num_kv_heads, sliding_window=sliding_window)
    theirs = keras.layers.GroupQueryAttention(head_dim=2, num_query_heads=H, num_key_value_heads=num_kv_heads,
                                                sliding_window=sliding_window)
    x = _inputs()
    ours(x, x)
    theirs(x, x)
    rng = np.random.default_rng(3)
    for mine, keras_dense in [(ours.query_dense, theirs._query_dense), (ours.key_dense, theirs._key_dense),
                              (ours.value_dense, theirs._value_dense), (ours.output_dense, theirs._output_dense)]:
        for a, b in zip(mine.weights, keras_dense.weights, strict=True):  # kernel, bias: nonzero biases too
            value = rng.normal(size=b.shape).astype("float32")
            a.assign(value)
            b.assign(value)
    return ours, theirs


@pytest.mark.parametrize("num_kv_heads, sliding_window, causal", [
    (2, None, False), (1, None, True), (4, None, False), (2, 3, False), (2, 3, True), (1, 2, True)])
def test_the_same_outputs_and_weights_as_keras_grouped_query_attention(num_kv_heads, sliding_window, causal):
    ours, theirs = _pair(num_kv_heads, sliding_window)
    assert ours.key_dense.kernel.shape == (D, num_kv_heads, 2)
    x, y = _inputs(1), _inputs(2)
    out, weights = ours(x, y, use_causal_mask=causal, return_attention_scores=True)
    expected, expected_weights = theirs(x, y, use_causal_mask=causal, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_numpy(weights), to_numpy(expected_weights), rtol=1e-5, atol=1e-5)


def test_num_kv_heads_equal_to_num_heads_is_todays_layer():
    layer = MultiHeadAttention(num_heads=H, key_dim=2)
    same = MultiHeadAttention(num_heads=H, key_dim=2, num_kv_heads=H)
    x = _inputs()
    layer(x, x)
    same(x, x)
    assert [w.shape for w in layer.weights] == [w.shape for w in same.weights]
    same.set_weights(layer.get_weights())
    np.testing.assert_array_equal(to_numpy(layer(x, x)), to_numpy(same(x, x)))


def test_num_kv_heads_must_divide_num_heads():
    with pytest.raises(ValueError, match=r"argument `num_kv_heads`, expected a divisor of num_heads=4. "
                                         r"Received: num_kv_heads=3"):
        zoo.attention.create("multi_head", num_heads=4, num_kv_heads=3)


@pytest.mark.parametrize("causal", [False, True])
def test_a_window_is_full_attention_under_the_band_mask(causal):
    """|i - j| < W (and i >= j when causal), written out by hand, on the layer without a window."""
    windowed = MultiHeadAttention(num_heads=H, key_dim=2, sliding_window=2)
    full = MultiHeadAttention(num_heads=H, key_dim=2)
    x = _inputs()
    windowed(x, x)
    full(x, x)
    full.set_weights(windowed.get_weights())
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    band = (np.abs(i - j) < 2) & ((i >= j) if causal else True)
    out, weights = windowed(x, x, use_causal_mask=causal, return_attention_scores=True)
    expected, expected_weights = full(x, x, attention_mask=np.broadcast_to(band, (B, T, T)),
                                      return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(to_numpy(weights), to_numpy(expected_weights), rtol=1e-6, atol=1e-6)
    assert np.all(to_numpy(weights)[:, :, ~band] == 0)


@pytest.mark.parametrize("num_kv_heads, sliding_window, chunks", [
    (1, None, (1,) * T), (2, 2, (1,) * T), (2, 3, (2, 1, 3)), (4, 1, (1,) * T)])
def test_cached_decoding_equals_the_full_causal_call(num_kv_heads, sliding_window, chunks):
    """One position (or a few) a step through ``initial_cache``: the cache holds ``H_kv`` heads, and ``W``
    slots (rolling) with a window, and gives what the full causal call gives."""
    layer = MultiHeadAttention(num_heads=H, key_dim=2, num_kv_heads=num_kv_heads, sliding_window=sliding_window)
    x = _inputs()
    full = to_numpy(layer(x, x, use_causal_mask=True))
    cache = layer.initial_cache(B, T)
    assert tuple(cache[0].shape) == (B, num_kv_heads, sliding_window or T, 2)
    outputs, start = [], 0
    for size in chunks:
        step = x[:, start:start + size]
        out, cache = layer(step, step, use_causal_mask=True, cache=cache, cache_update_index=start)
        assert tuple(cache[0].shape) == (B, num_kv_heads, sliding_window or T, 2)
        outputs.append(to_numpy(out))
        start += size
    np.testing.assert_allclose(np.concatenate(outputs, axis=1), full, rtol=1e-5, atol=1e-5)


def test_get_config_round_trip_keeps_the_options():
    layer = MultiHeadAttention(num_heads=H, num_kv_heads=2, sliding_window=3)
    clone = MultiHeadAttention.from_config(layer.get_config())
    assert (clone.num_kv_heads, clone.sliding_window) == (2, 3)
