"""``zoo.fast.layer_norm``: LayerNormalization's closed-form backward pass equals the reference (the
equation differentiated by the tape) in outputs and gradients, eager, compiled and under mixed
precision; other settings run the reference; and the backward graph is smaller."""

import numpy as np
import pytest
import tensorflow as tf

from zoo import kernels
from zoo.fast import layer_norm as fast_layer_norm
from zoo.models.self_attention.layer_norm import LayerNormalization

RNG = np.random.default_rng(0)


def built(shape, **kwargs):
    layer = LayerNormalization(**kwargs)
    layer.build(shape)
    layer.set_weights([RNG.normal(size=w.shape).astype("float32") for w in layer.get_weights()])
    return layer


def forward_and_gradients(mode, layer, x, upstream, compiled):
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            with kernels.using(mode):
                y = layer(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        return y, tape.gradient(loss, [x, *layer.trainable_variables])

    return (tf.function(run) if compiled else run)(x)


def both(layer, x, upstream, compiled):
    return (forward_and_gradients("reference", layer, x, upstream, compiled),
            forward_and_gradients("fast", layer, x, upstream, compiled))


def test_the_closed_form_is_registered_with_a_custom_gradient():
    with kernels.using("fast"):
        assert kernels.replacement(LayerNormalization.call.key) is fast_layer_norm.call
        with kernels.exporting():
            assert kernels.replacement(LayerNormalization.call.key) is None


@pytest.mark.parametrize("shape", [(5, 8), (3, 4, 8), (2, 3, 4, 6)])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("epsilon", [1e-5, 1e-3])
def test_fast_equals_reference_in_outputs_and_gradients(shape, compiled, epsilon):
    layer = built(shape, epsilon=epsilon)
    x = tf.constant(RNG.normal(loc=0.5, scale=2.0, size=shape).astype("float32"))
    upstream = tf.constant(RNG.normal(size=shape).astype("float32"))
    (y_want, g_want), (y_got, g_got) = both(layer, x, upstream, compiled)
    np.testing.assert_allclose(y_got.numpy(), y_want.numpy(), atol=2e-5)
    assert len(g_got) == 3  # x, gamma, beta
    for name, a, b in zip(("x", "gamma", "beta"), g_got, g_want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4, rtol=1e-4, err_msg=name)


def test_a_constant_row_normalizes_to_beta_and_passes_no_nan():
    layer = built((2, 8), epsilon=1e-5)
    x = tf.constant(np.stack([np.full(8, 3.0), RNG.normal(size=8)]).astype("float32"))
    (y_want, g_want), (y_got, g_got) = both(layer, x, tf.ones((2, 8)), compiled=True)
    np.testing.assert_allclose(y_got.numpy()[0], layer.beta.numpy(), atol=1e-6)
    for a, b in zip(g_got, g_want):
        assert np.all(np.isfinite(a.numpy()))
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4)


def test_mixed_precision_equals_reference():
    shape = (3, 4, 8)
    layer = built(shape, epsilon=1e-5, dtype="mixed_bfloat16")
    x = tf.cast(tf.constant(RNG.normal(size=shape).astype("float32")), tf.bfloat16)
    upstream = tf.constant(RNG.normal(size=shape).astype("float32"))
    (y_want, g_want), (y_got, g_got) = both(layer, x, upstream, compiled=True)
    assert y_got.dtype == tf.bfloat16
    np.testing.assert_allclose(y_got.numpy().astype("float32"), y_want.numpy().astype("float32"), rtol=1e-2,
                               atol=1e-2)
    for a, b in zip(g_got[1:], g_want[1:]):  # gamma, beta: float32 variables
        assert a.dtype == tf.float32
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("kwargs", [{"axis": [1, 2]}, {"center": False}, {"scale": False}, {"axis": 1}])
def test_other_settings_run_the_reference(kwargs):
    shape = (3, 4, 8)
    layer = built(shape, **kwargs)
    assert not fast_layer_norm._closed_form(layer, len(shape))
    x = tf.constant(RNG.normal(size=shape).astype("float32"))
    upstream = tf.constant(RNG.normal(size=shape).astype("float32"))
    (y_want, g_want), (y_got, g_got) = both(layer, x, upstream, compiled=False)
    np.testing.assert_array_equal(y_got.numpy(), y_want.numpy())
    for a, b in zip(g_got, g_want):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_the_backward_graph_is_smaller_than_the_reference():
    """What the replacement is for: fewer ops to run per step (the time: zoo/fast/layer_norm.py)."""
    layer = built((2, 3, 16), epsilon=1e-5)

    def graph_ops(mode):
        @tf.function(input_signature=[tf.TensorSpec([None, None, 16], tf.float32)])
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                with kernels.using(mode):
                    loss = tf.reduce_sum(layer(x))
            return tape.gradient(loss, [x, *layer.trainable_variables])

        return len(step.get_concrete_function().graph.get_operations())

    assert graph_ops("fast") < 0.6 * graph_ops("reference")
