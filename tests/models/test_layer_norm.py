"""``zoo.models.self_attention.layer_norm.LayerNormalization``'s reference path: Ba et al.'s equation by hand, Keras'
layer's outputs and gradients (eager, compiled, mixed precision, other axes and settings), and its
config. (The closed-form gradient of the fast path: ``tests/fast/test_layer_norm.py``.)"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo import kernels
from zoo.models.self_attention.layer_norm import LayerNormalization

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _reference():
    with kernels.using("reference"):
        yield


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


def test_a_row_by_hand():
    """``[1, 2, 3, 6]``: mean 3, variance 3.5; with gamma 2 and beta 1, ``y = 2 (x - 3) / sqrt(3.5 + eps) + 1``."""
    layer = LayerNormalization(epsilon=0.5)
    layer.build((1, 4))
    layer.set_weights([np.full(4, 2.0, "float32"), np.ones(4, "float32")])
    got = np.asarray(layer(np.array([[1.0, 2.0, 3.0, 6.0]], "float32")))
    np.testing.assert_allclose(got, [[-1.0, 1 - 1 / 1.0, 1.0, 1 + 3.0]], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 4, 6)])
@pytest.mark.parametrize("compiled", [False, True])
def test_outputs_and_gradients_equal_keras(shape, compiled):
    ours, theirs = pair(shape, epsilon=1e-5)
    x = tf.constant(RNG.normal(loc=0.5, scale=2.0, size=shape).astype("float32"))
    upstream = tf.constant(RNG.normal(size=shape).astype("float32"))
    y_ours, g_ours = forward_and_gradients(ours, x, upstream, compiled)
    y_theirs, g_theirs = forward_and_gradients(theirs, x, upstream, compiled)
    np.testing.assert_allclose(y_ours.numpy(), y_theirs.numpy(), atol=2e-5)
    assert len(g_ours) == 3  # x, gamma, beta
    for name, a, b in zip(("x", "gamma", "beta"), g_ours, g_theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4, rtol=1e-4, err_msg=name)


def test_mixed_precision_normalizes_in_float32_and_returns_the_compute_dtype():
    shape = (3, 4, 8)
    ours, theirs = pair(shape, epsilon=1e-5, dtype="mixed_bfloat16")
    x = tf.cast(tf.constant(RNG.normal(size=shape).astype("float32")), tf.bfloat16)
    upstream = tf.constant(RNG.normal(size=shape).astype("float32"))
    y_ours, g_ours = forward_and_gradients(ours, x, upstream, compiled=True)
    y_theirs, g_theirs = forward_and_gradients(theirs, x, upstream, compiled=True)
    assert y_ours.dtype == tf.bfloat16 and ours.gamma.dtype == "float32"
    np.testing.assert_allclose(y_ours.numpy().astype("float32"), y_theirs.numpy().astype("float32"), rtol=1e-2,
                               atol=1e-2)  # bfloat16's last bit
    for a, b in zip(g_ours[1:], g_theirs[1:]):  # gamma, beta: float32 variables
        assert a.dtype == tf.float32
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("kwargs", [{"axis": [1, 2]}, {"center": False}, {"scale": False}, {"axis": 1}])
def test_other_settings_equal_keras(kwargs):
    shape = (3, 4, 8)
    ours, theirs = pair(shape, **kwargs)
    x = tf.constant(RNG.normal(size=shape).astype("float32"))
    upstream = tf.constant(RNG.normal(size=shape).astype("float32"))
    y_ours, g_ours = forward_and_gradients(ours, x, upstream, compiled=False)
    y_theirs, g_theirs = forward_and_gradients(theirs, x, upstream, compiled=False)
    np.testing.assert_allclose(y_ours.numpy(), y_theirs.numpy(), atol=1e-5)
    for a, b in zip(g_ours, g_theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4)


def test_the_config_and_weights_round_trip_to_this_class():
    layer = LayerNormalization(epsilon=1e-5, name="norm")
    layer.build((2, 4))
    assert [w.path for w in layer.weights] == ["norm/gamma", "norm/beta"]  # the names in saved files
    copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(copy) is LayerNormalization and copy.epsilon == 1e-5 and copy.name == "norm"
