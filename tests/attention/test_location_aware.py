"""``location_aware`` (zoo.attention.location_aware_attention, Chorowski et al. 2015): with ``U = 0`` the
additive score, the previous weights in the score, ``alpha_0``, padding and the option checks. Its
hand-computed case is ``test_location_aware_...`` in test_attention_alignment_numeric.py; the
contract tests run it with the other alignment attentions."""

import numpy as np
import pytest
from keras import ops

import zoo.attention

from attention_helpers import fixed_seed, to_numpy  # noqa: F401 (fixed_seed: autouse fixture)

MASK = np.array([[True, True, True, True, False], [True, True, True, True, True]])


def inputs(seed=0, tq=4, tv=5):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(2, tq, 6)).astype("float32"), rng.normal(size=(2, tv, 7)).astype("float32")


def test_location_aware_with_u_zero_is_the_additive_score_with_the_same_weights():
    """``e_ij = w^T tanh(W s + V h_j + U f_ij + b)`` with ``U = 0``, ``b = 0`` is Bahdanau's
    ``v_a^T tanh(W_a s + U_a h_j)``: the same weights and outputs, whatever the previous weights."""
    query, value = inputs()
    additive = zoo.attention.create("additive", units=5)
    located = zoo.attention.create("location_aware", units=5, filters=3, kernel_size=3)
    expected_output, expected_weights = additive(query, value, value_mask=MASK, return_attention_scores=True)
    located(query, value)
    located.query_dense.set_weights(additive.query_dense.get_weights())
    located.key_dense.set_weights(additive.key_dense.get_weights())
    located.v.assign(additive.v)
    located.location_dense.set_weights([np.zeros((3, 5), "float32")])
    assert not np.all(to_numpy(located.location_conv.kernel) == 0)  # the features are there, U drops them
    output, weights = located(query, value, value_mask=MASK, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(weights), to_numpy(expected_weights), atol=1e-6)
    np.testing.assert_allclose(to_numpy(output), to_numpy(expected_output), atol=1e-5)
    # With U != 0 the previous weights move the scores: the layer is not additive any more.
    located.location_dense.set_weights([np.ones((3, 5), "float32")])
    _, moved = located(query, value, value_mask=MASK, return_attention_scores=True)
    assert np.abs(to_numpy(moved) - to_numpy(expected_weights)).max() > 1e-3


def test_each_query_sees_the_weights_the_layer_gave_the_query_before():
    """One call over ``Tq`` queries is the decoder's recurrence: query ``i``'s weights are ``attend``'s with
    ``previous_weights`` = query ``i - 1``'s weights, query 0's from ``alpha_0`` (uniform over the real
    positions); other previous weights give other weights."""
    query, value = inputs(1)
    layer = zoo.attention.create("location_aware", units=8, filters=4, kernel_size=3)
    output, weights = layer(query, value, value_mask=MASK, return_attention_scores=True)
    output, weights = to_numpy(output), to_numpy(weights)
    alpha_0 = to_numpy(layer.initial_weights(MASK))
    np.testing.assert_allclose(alpha_0, [[0.25] * 4 + [0.0], [0.2] * 5], atol=1e-7)
    prepared, mask = layer.prepare(value), ops.expand_dims(MASK, 1)
    previous = alpha_0[:, None]
    for t in range(4):
        step_output, step_weights = layer.attend(query[:, t:t + 1], value, prepared, mask=mask,
                                                 previous_weights=previous, return_attention_scores=True)
        np.testing.assert_allclose(to_numpy(step_weights)[:, 0], weights[:, t], atol=1e-6)
        np.testing.assert_allclose(to_numpy(step_output)[:, 0], output[:, t], atol=1e-5)
        previous = to_numpy(step_weights)
    _, elsewhere = layer.attend(query[:, :1], value, prepared, mask=mask, return_attention_scores=True,
                                previous_weights=np.eye(5, dtype="float32")[[3, 0]][:, None])
    assert np.abs(to_numpy(elsewhere)[:, 0] - weights[:, 0]).max() > 1e-4


def test_location_features_are_a_convolution_of_the_previous_weights_over_the_source():
    """``locate``: ``V h_j + b + U (Q * alpha)_j``, the convolution zero-padded at the source's ends."""
    _, value = inputs(2)
    layer = zoo.attention.create("location_aware", units=3, filters=2, kernel_size=3)
    layer(np.zeros((2, 1, 6), "float32"), value)
    layer.b.assign(np.array([0.1, -0.2, 0.3], "float32"))
    previous = np.random.default_rng(3).random((2, 1, 5)).astype("float32")
    located = to_numpy(layer.locate(layer.prepare(value), previous))  # [B, 1, Tv, U]
    kernel = to_numpy(layer.location_conv.kernel)[:, 0, :]  # [r, k]: Q
    padded = np.pad(previous[:, 0], ((0, 0), (1, 1)))
    features = np.stack([padded[:, j:j + 3] @ kernel for j in range(5)], axis=1)  # [B, Tv, k]
    expected = value @ to_numpy(layer.key_dense.kernel) + to_numpy(layer.b) + features @ to_numpy(
        layer.location_dense.kernel)
    np.testing.assert_allclose(located[:, 0], expected, atol=1e-5)


def test_padding_the_source_changes_nothing():
    """Masked positions hold weight 0 and the convolution pads with zeros: two more padded source
    positions leave every weight and output of the real ones as they were."""
    query, value = inputs(4)
    layer = zoo.attention.create("location_aware", units=8, filters=3, kernel_size=5)
    output, weights = layer(query, value, value_mask=MASK, return_attention_scores=True)
    padded_value = np.concatenate([value, np.random.default_rng(5).normal(size=(2, 2, 7)).astype("float32")], 1)
    padded_mask = np.concatenate([MASK, np.zeros((2, 2), bool)], 1)
    padded_output, padded_weights = layer(query, padded_value, value_mask=padded_mask, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(padded_weights)[..., :5], to_numpy(weights), atol=1e-6)
    assert np.all(to_numpy(padded_weights)[..., 5:] == 0)
    np.testing.assert_allclose(to_numpy(padded_output), to_numpy(output), atol=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    ({"units": 0}, "argument `units`, expected an integer >= 1: the width of W s"),
    ({"filters": 2.5}, "argument `filters`, expected an integer >= 1"),
    ({"kernel_size": -1}, "Received: kernel_size=-1"),
])
def test_bad_options_are_refused_naming_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        zoo.attention.create("location_aware", **kwargs)
