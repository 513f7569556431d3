"""Layer normalization (Ba, Kiros and Hinton 2016), the Transformer's ``LayerNorm``.

Backend-neutral (``keras.ops``), like the rest of ``zoo.models``.
"""

import keras
from keras import ops

from zoo import kernels


@keras.saving.register_keras_serializable(package="zoo")
class LayerNormalization(keras.layers.LayerNormalization):
    """Normalizes each position over its features, then scales and shifts them.

    ``keras.layers.LayerNormalization`` (same constructor, config and weights ``gamma``, ``beta``)
    with ``call`` written as the paper's equation. For one position's features ``x_1 .. x_H`` (the
    ``axis``, by default the last)::

        mu      = 1/H sum_i x_i                 sigma^2 = 1/H sum_i (x_i - mu)^2      (eq. 3)
        y_i     = gamma_i (x_i - mu) / sqrt(sigma^2 + epsilon) + beta_i              (eq. 4's g, b)

    Unlike batch normalization the statistics are those of one example, so training and inference
    compute the same thing and a sequence of any length normalizes position by position (Vaswani et
    al. 2017 put one after every sub-layer: ``LayerNorm(x + Sublayer(x))``). Half-precision inputs
    are normalized in float32 and the result cast back, as Keras does. ``rms_scaling=True`` (RMSNorm,
    not this equation) runs Keras' own ``call``.

    Args:
        As ``keras.layers.LayerNormalization``: ``axis=-1``, ``epsilon=1e-3``, ``center=True``
        (``beta``), ``scale=True`` (``gamma``).

    Example:
        >>> import numpy as np
        >>> x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
        >>> ours, theirs = LayerNormalization(), keras.layers.LayerNormalization()
        >>> bool(np.allclose(ours(x), theirs(x), atol=1e-5))
        True

    References:
        Ba, Kiros, Hinton. Layer Normalization. 2016, sec. 3. https://arxiv.org/abs/1607.06450
    """

    @kernels.replaceable
    def call(self, inputs):
        if self.rms_scaling:
            return super().call(inputs)
        x = ops.cast(inputs, keras.backend.result_type(inputs.dtype, "float32"))
        mean, variance = ops.moments(x, axes=self.axis, keepdims=True)  # mu, sigma^2 over the features
        y = (x - mean) * ops.rsqrt(variance + self.epsilon)
        shape = [1] * len(x.shape)  # gamma and beta along the normalized axes
        for axis in self.axis:
            shape[axis] = x.shape[axis]
        if self.scale:
            y = y * ops.reshape(ops.cast(self.gamma, x.dtype), shape)
        if self.center:
            y = y + ops.reshape(ops.cast(self.beta, x.dtype), shape)
        return ops.cast(y, self.compute_dtype)
