"""The alignment-attention contract (DESIGN.md), checked for every ``alignment_names()`` layer.

Documented exceptions to ``output == weights @ value``:

- ``multi_head``: projections before and after the weighted sum (its numbers are checked
  against ``keras.layers.MultiHeadAttention`` in ``test_attention_alignment_numeric.py``);
- ``key_value``: the output is ``weights @ value_part`` (the value half of each vector);
- ``hard``: the output is ``one_hot(argmax(weights)) @ value`` (the scores are the soft weights).

Rows of weights sum to 1 where anything may be attended, except ``local_p``: the Gaussian of
eq. 10 multiplies the softmax and is not renormalized, so its rows sum to a value in (0, 1].
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo.attention
from attention_helpers import (  # noqa: F401 (fixed_seed: autouse fixture)
    ALIGNMENT_NAMES, B, D, TQ, TV, fixed_seed, sample_inputs, to_numpy)

CONTENT_BASED = ["dot", "scaled_dot", "general", "concat", "additive", "multi_head", "key_value", "hard"]
VALUE_MASK = np.array([[True, True, True, False, False], [True, False, True, True, True]])


def expected_output(name, layer, weights, value):
    """What the output must be, given the returned weights (None: not a function of them)."""
    if name == "multi_head":
        return None
    if name == "key_value":
        return weights @ layer.split(value)[1].numpy()
    if name == "hard":
        one_hot = (weights == weights.max(-1, keepdims=True)) & (weights.sum(-1, keepdims=True) > 0)
        return one_hot.astype("float32") @ value
    return weights @ value


def check_rows(name, weights, attendable):
    """Rows with something to attend to sum to 1 (local_p: to (0, 1]); others are all 0."""
    sums = weights.sum(-1)
    attendable = np.broadcast_to(attendable, sums.shape)
    if name == "local_p":
        assert np.all(sums[attendable] > 0) and np.all(sums[attendable] <= 1 + 1e-6)
    else:
        np.testing.assert_allclose(sums[attendable], 1.0, atol=1e-5)
    assert np.all(weights[~attendable] == 0)


def per_head(weights):
    """``[B, Tq, Tv]`` -> ``[B, 1, Tq, Tv]`` so single- and multi-head weights index alike."""
    return weights if weights.ndim == 4 else weights[:, None]


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_masked_keys_get_exactly_zero_weight_and_rows_sum_to_one(name):
    query, value = sample_inputs(name)
    layer = zoo.attention.create(name)
    output, weights = layer(query, value, value_mask=VALUE_MASK, return_attention_scores=True)
    output, weights = to_numpy(output), to_numpy(weights)
    assert output.shape[:2] == (B, TQ)
    assert weights.shape in ((B, TQ, TV), (B, layer.num_heads if name == "multi_head" else 1, TQ, TV))
    w = per_head(weights)
    assert np.all(w[~np.broadcast_to(VALUE_MASK[:, None, None, :], w.shape)] == 0)
    check_rows(name, w, np.ones(w.shape[:-1], bool))
    expected = expected_output(name, layer, weights, value)
    if expected is not None:
        np.testing.assert_allclose(output, expected, atol=1e-5)


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_attention_and_query_masks(name):
    query, value = sample_inputs(name)
    rng = np.random.default_rng(1)
    attention_mask = rng.random((B, TQ, TV)) < 0.6
    attention_mask[:, :, 0] = True  # every row can attend to something
    query_mask = np.array([[True, True, True, False], [True, True, True, True]])
    layer = zoo.attention.create(name)
    output, weights = layer(query, value, attention_mask=attention_mask, query_mask=query_mask,
                            return_attention_scores=True)
    output, w = to_numpy(output), per_head(to_numpy(weights))
    allowed = attention_mask & query_mask[:, :, None]
    assert np.all(w[~np.broadcast_to(allowed[:, None], w.shape)] == 0)
    check_rows(name, w, np.broadcast_to(query_mask[:, None, :], w.shape[:-1]))
    np.testing.assert_array_equal(output[0, 3], 0.0)  # a masked query row is 0


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_fully_masked_row_gives_zero_output_not_nan(name):
    query, value = sample_inputs(name)
    value_mask = np.array([[True] * TV, [False] * TV])
    layer = zoo.attention.create(name)
    output, weights = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    output, weights = to_numpy(output), to_numpy(weights)
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    np.testing.assert_array_equal(output[1], 0.0)
    np.testing.assert_array_equal(weights[1], 0.0)
    assert np.any(output[0] != 0)


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_keras_mask_on_the_value_is_honoured(name):
    query, value = sample_inputs(name)
    layer = zoo.attention.create(name)
    explicit = to_numpy(layer(query, value, value_mask=VALUE_MASK, return_attention_scores=True)[1])
    masked_value = keras.layers.Masking(mask_value=0.0)(np.where(VALUE_MASK[..., None], value, 0.0))
    implicit = to_numpy(layer(query, masked_value, return_attention_scores=True)[1])
    np.testing.assert_allclose(implicit, explicit, atol=1e-6)


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_use_causal_mask(name):
    x = sample_inputs(name)[1][:, :TQ]  # self-attention, Tq == Tv
    layer = zoo.attention.create(name)
    output, weights = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    w = per_head(to_numpy(weights))
    future = np.triu(np.ones((TQ, TQ), bool), k=1)
    assert np.all(w[..., future] == 0)
    check_rows(name, w, np.ones(w.shape[:-1], bool))
    # Changing a future step does not change earlier outputs.
    changed = x.copy()
    changed[:, -1] += 1.0
    again = to_numpy(layer(changed, changed, use_causal_mask=True))
    np.testing.assert_allclose(again[:, :-1], to_numpy(output)[:, :-1], atol=1e-5)


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_prepared_keys_then_one_step_at_a_time_equals_one_call(name):
    """How an RNN decoder uses the layer: ``prepare_key`` once, ``attend`` per query step."""
    query, value = sample_inputs(name)
    layer = zoo.attention.create(name)
    output, weights = layer(query, value, value_mask=VALUE_MASK, return_attention_scores=True)
    prepared = layer.prepare_key(value)
    for t in range(TQ):
        step_query = query[:, t:t + 1]
        mask = layer.combine_masks(step_query, value, value_mask=VALUE_MASK)
        extra = {"position_offset": t} if name == "local_m" else {}
        step_out, step_w = layer.attend(step_query, value, prepared, mask=mask, return_attention_scores=True, **extra)
        np.testing.assert_allclose(to_numpy(step_out)[:, 0], to_numpy(output)[:, t], atol=1e-5)
        np.testing.assert_allclose(to_numpy(step_w)[..., 0, :], to_numpy(weights)[..., t, :], atol=1e-6)


@pytest.mark.parametrize("name", [n for n in CONTENT_BASED if n in ALIGNMENT_NAMES])
def test_content_based_attention_is_permutation_equivariant(name):
    query, value = sample_inputs(name)
    layer = zoo.attention.create(name)
    output, weights = layer(query, value, return_attention_scores=True)
    perm = np.array([3, 0, 4, 1, 2])
    output_p, weights_p = layer(query, value[:, perm], return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(output_p), to_numpy(output), atol=1e-5)
    np.testing.assert_allclose(to_numpy(weights_p), to_numpy(weights)[..., perm], atol=1e-6)


def symbolic_outputs(name, layer):
    query = keras.Input((TQ, D), name="query")
    value = keras.Input((TV, D), name="value")
    output, weights = layer(query, value, return_attention_scores=True)
    return query, value, output, weights


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_symbolic_shapes_match_eager_shapes(name):
    layer = zoo.attention.create(name)
    _, _, output, weights = symbolic_outputs(name, layer)
    eager_output, eager_weights = layer(*sample_inputs(name), return_attention_scores=True)
    assert tuple(output.shape) == (None, *eager_output.shape[1:])
    assert tuple(weights.shape) == (None, *eager_weights.shape[1:])


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_keras_file_round_trip(name, tmp_path):
    query, value, output, weights = symbolic_outputs(name, zoo.attention.create(name))
    model = keras.Model([query, value], [output, weights])
    inputs = sample_inputs(name)
    expected = model.predict(inputs, verbose=0)
    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)  # no custom_objects: the layers are registered
    for a, b in zip(loaded.predict(inputs, verbose=0), expected):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_one_gradient_step_changes_the_weights(name):
    query, value = sample_inputs(name)
    value_mask = np.array([[True, True, True, False, False], [False] * TV])  # incl. a fully masked row
    layer = zoo.attention.create(name)
    layer(query, value)
    query_t, value_t = tf.constant(query), tf.constant(value)
    with tf.GradientTape() as tape:
        tape.watch([query_t, value_t])
        output, weights = layer(query_t, value_t, value_mask=value_mask, return_attention_scores=True,
                                training=True)
        loss = tf.reduce_mean(tf.square(output - 1.0))
    variables = layer.trainable_variables
    grads = tape.gradient(loss, [query_t, value_t] + list(variables))
    for g in grads:
        assert g is not None and np.all(np.isfinite(g.numpy()))
    assert np.any(grads[1].numpy() != 0)
    if variables:
        before = [v.numpy().copy() for v in variables]
        keras.optimizers.SGD(learning_rate=0.5).apply_gradients(zip(grads[2:], variables))
        assert any(np.any(v.numpy() != b) for v, b in zip(variables, before))


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_mixed_float16_masks_without_nan(name):
    query, value = sample_inputs(name)
    value_mask = np.array([[True, True, True, False, False], [False] * TV])
    layer = zoo.attention.create(name, dtype="mixed_float16")
    output, weights = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    output, weights = to_numpy(output).astype("float32"), to_numpy(weights).astype("float32")
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    np.testing.assert_array_equal(output[1], 0.0)
    assert np.all(per_head(weights)[0, ..., 3:] == 0)
