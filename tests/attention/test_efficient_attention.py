"""The efficient self-attentions of zoo.attention (issue 42, item 4): ``memory_efficient`` equals
``multi_head`` in values and gradients; ``linear``, ``performer`` and ``differential`` decode with their
caches exactly as they compute all positions at once; ``performer`` approaches softmax attention as its
features grow; ``linformer`` projects along the sequence and refuses causal use; masked keys get weight 0."""

import numpy as np
import pytest
from keras import ops

import zoo.attention

from attention_helpers import fixed_seed, gradients, to_numpy  # noqa: F401 (fixed_seed: autouse fixture)

B, T, D = 2, 7, 8
PROJECTIONS = ("query_dense", "key_dense", "value_dense", "output_dense")
KEY_MASK = np.array([[1, 1, 0, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]], bool)
QUERY_MASK = np.array([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]], bool)
PAIR_MASK = np.random.default_rng(5).uniform(size=(B, T, T)) > 0.3
MASKS = {
    "none": {},
    "causal_and_key_mask": {"use_causal_mask": True, "attention_mask": KEY_MASK[:, None, :]},
    "pair_mask": {"attention_mask": PAIR_MASK, "value_mask": KEY_MASK},
    "causal_and_query_mask": {"query_mask": QUERY_MASK, "use_causal_mask": True},
}


def inputs(*shape, seed=0, scale=1.0):
    return (scale * np.random.default_rng(seed).normal(size=shape)).astype("float32")


X = inputs(B, T, D)


def built(name, x=X, **kwargs):
    layer = zoo.attention.create(name, **kwargs)
    layer(x, x)
    return layer


def copy_projections(source, target):
    """``multi_head``'s four projections into ``target`` (the efficient layers' own weights stay)."""
    for part in PROJECTIONS:
        for theirs, ours in zip(getattr(source, part).weights, getattr(target, part).weights):
            ours.assign(theirs)


def both(layer, x=X, **kwargs):
    return [to_numpy(o) for o in layer(x, x, return_attention_scores=True, **kwargs)]


def decode_step_by_step(layer, x, rotary=None, step=1):
    """Outputs of ``layer`` fed ``x`` ``step`` positions at a time with its ``initial_cache``."""
    cache, outputs = layer.initial_cache(ops.shape(x)[0], ops.shape(x)[1]), []
    for t in range(0, x.shape[1], step):
        out, _, cache = layer(x[:, t:t + step], x[:, t:t + step], use_causal_mask=True, cache=cache,
                              cache_update_index=t, rotary=rotary, return_attention_scores=True)
        outputs.append(to_numpy(out))
    return np.concatenate(outputs, axis=1)


# -- memory_efficient ------------------------------------------------------------------------------------
@pytest.mark.parametrize("masks", sorted(MASKS))
def test_memory_efficient_equals_multi_head_in_values_and_gradients(masks):
    reference = built("multi_head", num_heads=2, key_dim=4)
    blocked = built("memory_efficient", num_heads=2, key_dim=4, query_block=4, key_block=3)  # 7 = 4+3, 3+3+1
    copy_projections(reference, blocked)
    for ours, theirs in zip(both(blocked, **MASKS[masks]), both(reference, **MASKS[masks])):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)

    def loss(call, x):
        out, weights = call(x, x, return_attention_scores=True, **MASKS[masks])
        return ops.mean(out ** 2) + ops.mean(weights ** 2)

    ours, theirs = gradients(blocked, loss, [X]), gradients(reference, loss, [X])
    for mine, expected in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        np.testing.assert_allclose(mine, expected, rtol=1e-5, atol=1e-5)


def test_memory_efficient_equals_multi_head_across_sequences_with_shared_heads_and_a_score_bias():
    query = inputs(B, 5, D, seed=1)
    reference = built("multi_head", num_heads=4, key_dim=2, num_kv_heads=2)
    blocked = built("memory_efficient", num_heads=4, key_dim=2, num_kv_heads=2, query_block=2, key_block=3)
    copy_projections(reference, blocked)
    for ours, theirs in zip(blocked(query, X, value_mask=KEY_MASK, return_attention_scores=True),
                            reference(query, X, value_mask=KEY_MASK, return_attention_scores=True)):
        np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), atol=1e-5)
    bias = zoo.attention.create("t5", num_heads=4, bidirectional=False)  # learned: its gradient too
    for ours, theirs in zip(both(blocked, use_causal_mask=True, score_bias=bias),
                            both(reference, use_causal_mask=True, score_bias=bias)):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_memory_efficient_decodes_with_multi_heads_cache_as_it_computes_all_positions():
    layer = built("memory_efficient", num_heads=2, key_dim=4, query_block=4, key_block=4)
    rope = zoo.attention.create("rotary")
    full = to_numpy(layer(X, X, use_causal_mask=True, rotary=rope))
    np.testing.assert_allclose(decode_step_by_step(layer, X, rope), full, atol=1e-5)


def test_memory_efficient_refuses_dropout_it_could_not_redraw():
    with pytest.raises(ValueError, match="argument `dropout`, expected 0.0"):
        zoo.attention.create("memory_efficient", dropout=0.1)


# -- linear and performer --------------------------------------------------------------------------------
def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))  # elu(x) + 1


def heads_first(dense, x):
    return np.transpose(to_numpy(dense(x)), (0, 2, 1, 3))


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_is_katharopoulos_by_hand(causal):
    layer = built("linear", num_heads=2, key_dim=3)
    out, weights = layer(X, X, use_causal_mask=causal, value_mask=KEY_MASK, return_attention_scores=True)
    q, k, v = (heads_first(getattr(layer, f"{part}_dense"), X) for part in ("query", "key", "value"))
    similarity = phi(q) @ np.swapaxes(phi(k), -1, -2) * KEY_MASK[:, None, None, :]  # phi(Q_i)^T phi(K_j)
    if causal:
        similarity = np.tril(similarity)
    expected = similarity / similarity.sum(-1, keepdims=True)
    np.testing.assert_allclose(to_numpy(weights), expected, atol=1e-6)
    heads = np.transpose(expected @ v, (0, 2, 1, 3))  # the output by the explicit map, the layer's by the sums
    np.testing.assert_allclose(to_numpy(out), to_numpy(layer.output_dense(heads)), atol=1e-5)


@pytest.mark.parametrize("name, step", [("linear", 1), ("linear", 3), ("performer", 1), ("differential", 1),
                                        ("differential", 2)])
def test_cached_decoding_equals_all_positions_at_once(name, step):
    layer = built(name, num_heads=2, key_dim=4)
    rope = zoo.attention.create("rotary")
    full = to_numpy(layer(X, X, use_causal_mask=True, rotary=rope))
    np.testing.assert_allclose(decode_step_by_step(layer, X, rope, step), full, atol=1e-5)


def test_linear_state_has_a_constant_size():
    layer = built("linear", num_heads=2, key_dim=3, value_dim=5)
    short, long = layer.initial_cache(B, 4), layer.initial_cache(B, 4000)
    assert [tuple(s.shape) for s in short] == [tuple(s.shape) for s in long] == [(B, 2, 3, 5), (B, 2, 3)]
    assert [tuple(s.shape) for s in built("performer", num_features=16).initial_cache(B, 9)] == [
        (B, 2, 16, 4), (B, 2, 16)]


def test_performer_approaches_softmax_attention_as_its_features_grow():
    x = inputs(B, T, D, scale=0.5)
    reference = built("multi_head", x, num_heads=2, key_dim=4)
    expected = both(reference, x, use_causal_mask=True)
    errors = []
    for features in (4, 64, 1024):
        error = 0.0
        for seed in range(3):
            layer = built("performer", x, num_heads=2, key_dim=4, num_features=features, seed=seed)
            copy_projections(reference, layer)
            out, weights = both(layer, x, use_causal_mask=True)
            error += np.abs(weights - expected[1]).mean() / 3
            np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        errors.append(error)
    assert errors[0] > errors[1] > errors[2], errors
    assert errors[2] < 0.01, errors


def test_performer_redraws_its_features_on_its_schedule():
    layer = built("performer", num_heads=2, key_dim=4, num_features=8, redraw_interval=2, seed=3)
    drawn = to_numpy(layer.projection)
    layer(X, X, training=True)  # the first training call keeps them
    np.testing.assert_array_equal(to_numpy(layer.projection), drawn)
    layer(X, X, training=True)  # the second draws new ones
    redrawn = to_numpy(layer.projection)
    assert np.abs(redrawn - drawn).max() > 0.1
    layer(X, X, training=False)  # inference never redraws
    np.testing.assert_array_equal(to_numpy(layer.projection), redrawn)
    fixed = built("performer", num_heads=2, key_dim=4, num_features=8, seed=3)  # redraw_interval=0: never
    fixed(X, X, training=True)
    fixed(X, X, training=True)
    np.testing.assert_array_equal(to_numpy(fixed.projection), drawn)
    # Orthogonal blocks of d_k rows, each row as long as a Gaussian vector's: 8 features = 2 blocks of 4.
    rows = drawn / np.linalg.norm(drawn, axis=-1, keepdims=True)
    np.testing.assert_allclose(rows[:4] @ rows[:4].T, np.eye(4), atol=1e-5)


# -- differential ----------------------------------------------------------------------------------------
def rms_norm(x):
    return x / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + 1e-5)


def softmax(scores, mask):
    scores = np.where(mask, scores, -1e9)
    e = np.exp(scores - scores.max(-1, keepdims=True)) * mask
    return e / e.sum(-1, keepdims=True)


def test_differential_attention_is_ye_et_al_by_hand():
    layer = built("differential", num_heads=2, key_dim=4, layer_index=3)
    assert layer.lambda_init == pytest.approx(0.8 - 0.6 * np.exp(-0.6))
    out, weights = layer(X, X, use_causal_mask=True, value_mask=KEY_MASK, return_attention_scores=True)
    q, k, v = (heads_first(getattr(layer, f"{part}_dense"), X) for part in ("query", "key", "value"))
    mask = np.tril(np.ones((T, T), bool))[None, None] & KEY_MASK[:, None, None, :]
    maps = [softmax(q[..., h] @ np.swapaxes(k[..., h], -1, -2) / np.sqrt(2), mask) for h in (slice(0, 2), slice(2, 4))]
    lq1, lk1, lq2, lk2 = (to_numpy(getattr(layer, f"lambda_{n}")) for n in ("q1", "k1", "q2", "k2"))
    lam = np.exp(lq1 @ lk1) - np.exp(lq2 @ lk2) + layer.lambda_init  # eq. 2
    expected = maps[0] - lam * maps[1]  # eq. 1
    np.testing.assert_allclose(to_numpy(weights), expected, atol=1e-6)
    heads = (1 - layer.lambda_init) * rms_norm(expected @ v) * to_numpy(layer.norm_scale)  # eq. 3
    expected_out = to_numpy(layer.output_dense(np.transpose(heads, (0, 2, 1, 3)).astype("float32")))
    np.testing.assert_allclose(to_numpy(out), expected_out, atol=1e-5)


def test_differential_attention_with_odd_halves_rotates_whole_heads_and_decodes_as_it_computes():
    layer = built("differential", num_heads=4, key_dim=2)  # d = 1: no pair within a half (debug=smoke's size)
    rope = zoo.attention.create("rotary")
    full = to_numpy(layer(X, X, use_causal_mask=True, rotary=rope))
    np.testing.assert_allclose(decode_step_by_step(layer, X, rope), full, atol=1e-5)


# -- linformer -------------------------------------------------------------------------------------------
def test_linformer_projects_keys_and_values_along_the_sequence_with_the_first_columns():
    layer = built("linformer", num_heads=2, key_dim=4, projected_length=3, max_length=10)
    out, weights = layer(X, X, value_mask=KEY_MASK, return_attention_scores=True)
    q, k, v = (heads_first(getattr(layer, f"{part}_dense"), X) for part in ("query", "key", "value"))
    keep = KEY_MASK[:, None, :, None]
    e, f = to_numpy(layer.key_projection)[:, :T], to_numpy(layer.value_projection)[:, :T]  # the first T of 10
    scores = q @ np.swapaxes(e @ (k * keep), -1, -2) / 2.0  # Q (E K)^T / sqrt(d_k)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(to_numpy(weights), p @ f * KEY_MASK[:, None, None, :], atol=1e-6)
    heads = np.transpose(p @ (f @ (v * keep)), (0, 2, 1, 3))
    np.testing.assert_allclose(to_numpy(out), to_numpy(layer.output_dense(heads)), atol=1e-5)


def test_linformer_is_encoder_only_and_sized():
    layer = built("linformer", num_heads=2, key_dim=4, projected_length=3, max_length=10)
    with pytest.raises(ValueError, match="linformer is encoder only"):
        layer(X, X, use_causal_mask=True)
    with pytest.raises(ValueError, match="no decoding cache"):
        layer(X, X, cache=(X, X), cache_update_index=0)
    with pytest.raises(ValueError, match="max_length=10 positions. Received a sequence of 12"):
        layer(inputs(B, 12, D), inputs(B, 12, D))
    with pytest.raises(ValueError, match="argument `causal`, expected False"):
        zoo.attention.create("linformer", causal=True)


# -- all five --------------------------------------------------------------------------------------------
EFFICIENT = ("memory_efficient", "linear", "performer", "differential", "linformer")


@pytest.mark.parametrize("name", EFFICIENT)
def test_masked_keys_get_zero_weight_and_gradients_are_finite(name):
    causal = name != "linformer"
    layer = built(name, num_heads=2, key_dim=4)
    out, weights = layer(X, X, value_mask=KEY_MASK, use_causal_mask=causal, return_attention_scores=True)
    weights = to_numpy(weights)
    assert np.all(weights[0, :, :, ~KEY_MASK[0]] == 0.0)
    if name in ("memory_efficient", "linear", "performer"):  # exact or implied softmax-like rows
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    if causal:
        assert np.all(np.triu(weights, 1) == 0.0)

    def loss(call, x):
        return ops.mean(call(x, x, value_mask=KEY_MASK, use_causal_mask=causal) ** 2)

    input_grads, variable_grads = gradients(layer, loss, [X])
    assert all(g is not None and np.all(np.isfinite(g)) for g in input_grads + variable_grads)
    assert np.abs(input_grads[0]).max() > 0


@pytest.mark.parametrize("name", EFFICIENT)
def test_config_round_trip_gives_the_same_outputs(name):
    layer = built(name, num_heads=2, key_dim=4)
    clone = type(layer).from_config(layer.get_config())
    clone(X, X)
    clone.set_weights(layer.get_weights())  # performer's features included (a non-trainable weight)
    assert clone.get_config() == layer.get_config()
    np.testing.assert_array_equal(to_numpy(clone(X, X)), to_numpy(layer(X, X)))


@pytest.mark.parametrize("name", ("linear", "performer"))
def test_dropout_is_refused_where_no_weights_are_formed(name):
    with pytest.raises(ValueError, match="argument `dropout`, expected 0.0"):
        zoo.attention.create(name, dropout=0.1)
