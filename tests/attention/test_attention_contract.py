"""The alignment-attention contract (docs/design.md), checked for every ``alignment_names()`` layer.

Documented exceptions to ``output == weights @ value``:

- ``multi_head``: projections before and after the weighted sum (its numbers are checked
  against ``keras.layers.MultiHeadAttention`` in ``test_attention_alignment_numeric.py``);
- ``key_value``: the output is ``weights @ value_part`` (the value half of each vector);
- ``hard``: the output is ``one_hot(argmax(weights)) @ value`` (the scores are the soft weights).

Rows of weights sum to 1 where anything may be attended, except ``local_p``: the Gaussian of
eq. 10 multiplies the softmax and is not renormalized, so its rows sum to a value in (0, 1].
"""

import inspect

import keras
import numpy as np
import pytest
from keras import ops

import zoo.attention

from attention_helpers import ALIGNMENT_NAMES, TQ, TV, B, D, fixed_seed, gradients, sample_inputs, to_numpy  # noqa: F401 (fixed_seed: autouse fixture)

CONTENT_BASED = ["dot", "scaled_dot", "general", "concat", "additive", "multi_head", "key_value", "hard"]
VALUE_MASK = np.array([[True, True, True, False, False], [True, False, True, True, True]])


def expected_output(name, layer, weights, value):
    """What the output must be, given the returned weights (None: not a function of them)."""
    if name == "multi_head":
        return None
    if name == "key_value":
        return weights @ to_numpy(layer.split(value)[1])
    if name == "hard":
        one_hot = (weights == weights.max(-1, keepdims=True)) & (weights.sum(-1, keepdims=True) > 0)
        return one_hot.astype("float32") @ value
    return weights @ value


def check_rows(name, weights, attendable, atol=1e-5):
    """Rows with something to attend to sum to 1 (local_p: to (0, 1]); others are all 0."""
    sums = weights.astype("float64").sum(-1)
    attendable = np.broadcast_to(attendable, sums.shape)
    if name == "local_p":
        assert np.all(sums[attendable] > 0) and np.all(sums[attendable] <= 1 + max(atol, 1e-6))
    else:
        np.testing.assert_allclose(sums[attendable], 1.0, atol=atol)
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


def padded_ids(rng, mask):
    """Token ids in 1..9 where ``mask`` is True and 0 (padding, masked by ``mask_zero``) elsewhere."""
    return np.where(mask, rng.integers(1, 10, mask.shape), 0).astype("int32")


QUERY_MASK = np.array([[True, True, True, False], [True, True, True, True]])


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_keras_masks_from_embedding_mask_zero_are_honoured(name):
    """``Embedding(mask_zero=True)`` outputs fed as query and value: their masks are the explicit masks."""
    rng = np.random.default_rng(3)
    query_ids, value_ids = padded_ids(rng, QUERY_MASK), padded_ids(rng, VALUE_MASK)
    embedding = keras.layers.Embedding(10, D, mask_zero=True)
    layer = zoo.attention.create(name)
    # Eager: the masks ride on the embedding outputs.
    query, value = embedding(query_ids), embedding(value_ids)
    output, weights = layer(query, value, return_attention_scores=True)
    expected_output, expected_weights = layer(to_numpy(query), to_numpy(value), query_mask=QUERY_MASK,
                                              value_mask=VALUE_MASK, return_attention_scores=True)
    output, w = to_numpy(output), per_head(to_numpy(weights))
    np.testing.assert_allclose(output, to_numpy(expected_output), atol=1e-6)
    np.testing.assert_allclose(w, per_head(to_numpy(expected_weights)), atol=1e-6)
    allowed = QUERY_MASK[:, None, :, None] & VALUE_MASK[:, None, None, :]
    assert np.all(w[~np.broadcast_to(allowed, w.shape)] == 0)
    check_rows(name, w, np.broadcast_to(QUERY_MASK[:, None, :], w.shape[:-1]))
    np.testing.assert_array_equal(output[0, 3], 0.0)  # the padded query step
    # Functional model: the masks propagate through the graph the same way.
    query_in = keras.Input((TQ,), dtype="int32")
    value_in = keras.Input((TV,), dtype="int32")
    model = keras.Model([query_in, value_in],
                        list(layer(embedding(query_in), embedding(value_in), return_attention_scores=True)))
    model_output, model_weights = model.predict([query_ids, value_ids], verbose=0)
    np.testing.assert_allclose(model_output, to_numpy(expected_output), atol=1e-5)
    np.testing.assert_allclose(model_weights, to_numpy(expected_weights), atol=1e-6)


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
    """How an RNN decoder uses the layer: ``prepare_key`` once, ``attend`` per query step (with the step's
    position where ``attend`` takes it, local-m; with the previous step's weights where it takes them,
    location-aware, from its ``initial_weights``)."""
    query, value = sample_inputs(name)
    layer = zoo.attention.create(name)
    output, weights = layer(query, value, value_mask=VALUE_MASK, return_attention_scores=True)
    prepared = layer.prepare_key(value)
    feeds_back = "previous_weights" in inspect.signature(layer.attend).parameters
    previous = layer.initial_weights(VALUE_MASK)[:, None] if feeds_back else None
    for t in range(TQ):
        step_query = query[:, t:t + 1]
        mask = layer.combine_masks(step_query, value, value_mask=VALUE_MASK)
        extra = {"position_offset": t} if name == "local_m" else {}
        if feeds_back:
            extra["previous_weights"] = previous
        step_out, step_w = layer.attend(step_query, value, prepared, mask=mask, return_attention_scores=True, **extra)
        previous = step_w
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


# Trainable weights whose gradient is 0 by construction, with the reason; every other one must get a
# nonzero gradient. The key bias of multi-head attention adds q_h . b_k to every score of query q in
# head h, the same for all keys, and softmax is invariant to that shift (Keras' layer alike).
ZERO_GRADIENT_BY_DESIGN = {"multi_head": ("key/bias",)}

GRADIENT_CASES = [(name, {}) for name in ALIGNMENT_NAMES] + [("additive", {"normalize": True})]


@pytest.mark.parametrize("name, kwargs", GRADIENT_CASES,
                         ids=[n + "".join(f"-{k}" for k in kw) for n, kw in GRADIENT_CASES])
def test_gradient_reaches_every_trainable_weight(name, kwargs):
    query, value = sample_inputs(name)
    value_mask = np.array([[True, True, True, False, False], [False] * TV])  # incl. a fully masked row
    layer = zoo.attention.create(name, **kwargs)
    layer(query, value)
    variables = list(layer.trainable_variables)

    def loss_fn(call, query, value):
        output = call(query, value, value_mask=value_mask, training=True)
        return ops.mean(ops.square(output - 1.0))

    (grad_query, grad_value), grads = gradients(layer, loss_fn, [query, value])
    for g in [grad_query, grad_value, *grads]:
        assert g is not None and np.all(np.isfinite(g))
    assert np.any(grad_value != 0)
    zero_by_design = ZERO_GRADIENT_BY_DESIGN.get(name, ())
    for variable, g in zip(variables, grads):
        if variable.path.endswith(zero_by_design):
            np.testing.assert_allclose(g, 0.0, atol=1e-6, err_msg=variable.path)
        else:
            assert np.any(g != 0), f"{variable.path} gets an all-zero gradient"
    if variables:  # one SGD step moves every weight that has a nonzero gradient
        before = [to_numpy(v).copy() for v in variables]
        keras.optimizers.SGD(learning_rate=0.5).apply_gradients(zip(grads, variables))
        for variable, b, g in zip(variables, before, grads):
            assert np.any(to_numpy(variable) != b) or not np.any(g != 0), variable.path


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


@pytest.fixture
def restore_dtype_policy():
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.mark.parametrize("how", ["layer_dtype", "global_policy"])
@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_mixed_bfloat16(name, how, restore_dtype_policy):
    query, value = sample_inputs(name)
    value_mask = np.array([[True, True, True, False, False], [False] * TV])
    if how == "global_policy":
        keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
        layer = zoo.attention.create(name)
    else:
        layer = zoo.attention.create(name, dtype="mixed_bfloat16")
    output, weights = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    assert layer.compute_dtype == "bfloat16" and layer.variable_dtype == "float32"
    assert all(v.dtype == "float32" for v in layer.weights if v.trainable)
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    output, weights = to_numpy(output).astype("float32"), to_numpy(weights).astype("float32")
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    w = per_head(weights)
    assert np.all(w[0, ..., 3:] == 0)  # masked keys
    np.testing.assert_array_equal(output[1], 0.0)  # fully masked row
    np.testing.assert_array_equal(w[1], 0.0)
    check_rows(name, w[:1], np.ones(w[:1].shape[:-1], bool), atol=2e-2)  # bfloat16: ~3 significant digits
