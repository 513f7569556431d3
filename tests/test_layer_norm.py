"""zoo.models.layer_norm.LayerNormalization against keras.layers.LayerNormalization: the same outputs
and gradients (eager, compiled, mixed precision), Keras' own path where the closed form does not
apply, and a smaller backward graph."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.models.layer_norm import LayerNormalization

RNG = np.random.default_rng(0)


def pair(shape, **kwargs):
    """Ours and Keras', built on ``shape`` with the same random weights."""
    ours, theirs = LayerNormalization(**kwargs), keras.layers.LayerNormalization(**kwargs)
    ours.build(shape)
    theirs.build(shape)
    weights = [RNG.normal(size=w.shape).astype("float32") for w in theirs.get_weights()]
    ours.set_weights(weights)
    theirs.set_weights(weights)
    return ours, theirs


def forward_and_gradients(layer, x, upstream, compiled):
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        return y, tape.gradient(loss, [x, *layer.trainable_variables])

    return (tf.function(run) if compiled else run)(x)


@pytest.mark.parametrize("shape", [(5, 8), (3, 4, 8), (2, 3, 4, 6)])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("epsilon", [1e-5, 1e-3])
def test_outputs_and_gradients_equal_keras(shape, compiled, epsilon):
    ours, theirs = pair(shape, epsilon=epsilon)
    x = tf.constant(RNG.normal(loc=0.5, scale=2.0, size=shape).astype("float32"))
    upstream = tf.constant(RNG.normal(size=shape).astype("float32"))
    y_ours, g_ours = forward_and_gradients(ours, x, upstream, compiled)
    y_theirs, g_theirs = forward_and_gradients(theirs, x, upstream, compiled)
    np.testing.assert_allclose(y_ours.numpy(), y_theirs.numpy(), atol=2e-5)
    assert len(g_ours) == 3  # x, gamma, beta
    for name, a, b in zip(("x", "gamma", "beta"), g_ours, g_theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4, rtol=1e-4, err_msg=name)


def test_a_constant_row_normalizes_to_beta_and_passes_no_nan():
    ours, theirs = pair((2, 8), epsilon=1e-5)
    x = tf.constant(np.stack([np.full(8, 3.0), RNG.normal(size=8)]).astype("float32"))
    upstream = tf.ones((2, 8))
    y_ours, g_ours = forward_and_gradients(ours, x, upstream, compiled=True)
    y_theirs, g_theirs = forward_and_gradients(theirs, x, upstream, compiled=True)
    np.testing.assert_allclose(y_ours.numpy()[0], theirs.beta.numpy(), atol=1e-6)
    for a, b in zip(g_ours, g_theirs):
        assert np.all(np.isfinite(a.numpy()))
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4)


def test_mixed_precision_normalizes_in_float32_and_returns_the_compute_dtype():
    shape = (3, 4, 8)
    ours, theirs = pair(shape, epsilon=1e-5, dtype="mixed_bfloat16")
    x = tf.cast(tf.constant(RNG.normal(size=shape).astype("float32")), tf.bfloat16)
    upstream = tf.constant(RNG.normal(size=shape).astype("float32"))
    y_ours, g_ours = forward_and_gradients(ours, x, upstream, compiled=True)
    y_theirs, g_theirs = forward_and_gradients(theirs, x, upstream, compiled=True)
    assert y_ours.dtype == tf.bfloat16 and ours.gamma.dtype == "float32"
    np.testing.assert_array_equal(y_ours.numpy().astype("float32"), y_theirs.numpy().astype("float32"))
    for a, b in zip(g_ours[1:], g_theirs[1:]):  # gamma, beta: float32 variables
        assert a.dtype == tf.float32
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("kwargs", [{"axis": [1, 2]}, {"center": False}, {"scale": False}, {"axis": 1}])
def test_other_settings_run_keras_own_normalization(kwargs):
    shape = (3, 4, 8)
    ours, theirs = pair(shape, **kwargs)
    x = tf.constant(RNG.normal(size=shape).astype("float32"))
    upstream = tf.constant(RNG.normal(size=shape).astype("float32"))
    y_ours, g_ours = forward_and_gradients(ours, x, upstream, compiled=False)
    y_theirs, g_theirs = forward_and_gradients(theirs, x, upstream, compiled=False)
    np.testing.assert_allclose(y_ours.numpy(), y_theirs.numpy(), atol=1e-5)
    for a, b in zip(g_ours, g_theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4)


def test_the_config_round_trips_to_this_class():
    layer = LayerNormalization(epsilon=1e-5, name="norm")
    copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(copy) is LayerNormalization and copy.epsilon == 1e-5 and copy.name == "norm"


def test_the_backward_graph_is_smaller_than_keras():
    """What the layer is for: fewer ops to run per step (the time is in README "Speed", not here)."""
    def graph_ops(layer):
        spec = tf.TensorSpec([None, None, 16], tf.float32)

        @tf.function(input_signature=[spec])
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(layer(x))
            return tape.gradient(loss, [x, *layer.trainable_variables])

        return len(step.get_concrete_function().graph.get_operations())

    ours, theirs = pair((2, 3, 16), epsilon=1e-5)
    assert graph_ops(ours) < 0.6 * graph_ops(theirs)
