"""The fast path of ``zoo.models.self_attention.layer_norm.LayerNormalization.call``: the backward pass in closed form.

The reference builds the normalization from generic ops (moments, a reshape of ``gamma`` and
``beta``, products with broadcasting) and the tape differentiates each with its own shape
bookkeeping: about 80 graph ops per layer forward and backward. Here the backward pass is the closed
form, with ``x_hat = (x - mean) r``, ``r = 1 / sqrt(var + epsilon)`` and ``g = dy * gamma``::

    dx = r (g - mean(g) - x_hat mean(g x_hat)),   dgamma = sum(dy x_hat),   dbeta = sum(dy)

(means over the normalized axis, sums over every other). Measured on the 2-core Zen 4 (float32, ten
layers forward and backward, ``docs/performance.md``): ``[1280, 256]`` 24.5 -> 13.6 ms, ``[640, 32]``
2.6 -> 2.1 ms; the small Transformer against ``keras_transformer`` 1.04x -> 1.10x.

Used for one normalized axis, the last, with ``center`` and ``scale`` (the defaults); anything else
(``axis=[1, 2]``, ``center=False``, ``rms_scaling``) runs the reference. Equal to it in values and
gradients: ``tests/fast/test_layer_norm.py``.
"""

import keras
from keras import ops

from zoo import kernels
from zoo.models.self_attention.layer_norm import LayerNormalization


def _closed_form(layer, rank):
    return (layer.center and layer.scale and not layer.rms_scaling and len(layer.axis) == 1
            and layer.axis[0] % rank == rank - 1)


@kernels.replaces("zoo.models.self_attention.layer_norm.LayerNormalization.call", own_gradient=True)
def call(self, inputs):
    if not _closed_form(self, len(inputs.shape)):
        return LayerNormalization.call.reference(self, inputs)
    epsilon = float(self.epsilon)
    width = int(self.gamma.shape[0])
    x = ops.cast(inputs, keras.backend.result_type(inputs.dtype, "float32"))

    @ops.custom_gradient
    def normalize(x, gamma, beta):
        centered = x - ops.mean(x, axis=-1, keepdims=True)
        scale = ops.rsqrt(ops.mean(ops.square(centered), axis=-1, keepdims=True) + epsilon)
        x_hat = centered * scale

        def grad(*args, upstream=None):
            dy = args[0] if upstream is None else upstream
            rows_dy = ops.reshape(dy, (-1, width))
            d_gamma = ops.sum(rows_dy * ops.reshape(x_hat, (-1, width)), axis=0)
            d_beta = ops.sum(rows_dy, axis=0)
            g = dy * gamma
            dx = scale * (g - ops.mean(g, axis=-1, keepdims=True)
                          - x_hat * ops.mean(g * x_hat, axis=-1, keepdims=True))
            return dx, d_gamma, d_beta

        return x_hat * gamma + beta, grad

    outputs = normalize(x, ops.cast(self.gamma, x.dtype), ops.cast(self.beta, x.dtype))
    return ops.cast(outputs, self.compute_dtype)
