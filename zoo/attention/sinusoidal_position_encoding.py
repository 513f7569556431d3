"""Fixed sinusoidal position encoding (Vaswani et al.)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention


def _positions(start_index, length, dtype):
    """``[1 or B, T]`` positions ``start_index + t`` (``start_index`` a scalar or ``[B]``)."""
    start = ops.reshape(ops.cast(ops.convert_to_tensor(start_index), dtype), (-1, 1))
    return start + ops.cast(ops.arange(length), dtype)[None, :]


@register_attention("sinusoidal")
@keras.saving.register_keras_serializable(package="zoo")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Fixed sinusoidal position encoding of Vaswani et al. (2017), added to the input.

    ``PE(pos, 2i) = sin(pos / 10000^{2i / d_model})``,
    ``PE(pos, 2i+1) = cos(pos / 10000^{2i / d_model})`` (Vaswani et al. 2017, sec. 3.5), with
    ``max_wavelength`` in place of 10000. Sines and cosines interleave along the features as
    in the paper. The layer has no weights; the input's Keras mask passes through. Scaling the
    embeddings by ``sqrt(d_model)`` (sec. 3.4) is the model's job.

    Shapes: ``B`` batch, ``T`` steps, ``D`` = ``d_model`` features.
    Cost: ``O(B T D)`` time and memory.

    Args:
        max_wavelength: positive float, the base of the geometric progression of wavelengths.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: ``x [B, T, D]``.
        start_index: int, scalar or ``[B]`` tensor, the position of ``x[:, 0]`` (for
            incremental decoding, the number of steps already decoded). Default 0.

    Returns:
        ``x + PE[start_index : start_index + T]`` as ``[B, T, D]``.

    Example:
        >>> import numpy as np
        >>> layer = SinusoidalPositionEncoding()
        >>> out = layer(np.zeros((1, 2, 4)))
        >>> np.round(np.asarray(out[0], "float64"), 3).tolist()
        [[0.0, 1.0, 0.0, 1.0], [0.841, 0.54, 0.01, 1.0]]

    References:
        Vaswani et al. Attention Is All You Need. NeurIPS 2017, sec. 3.5.
        https://arxiv.org/abs/1706.03762
    """

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = checks.positive_float("max_wavelength", max_wavelength)
        self.supports_masking = True

    def encoding(self, length, depth, start_index=0, dtype="float32"):
        """``PE`` for positions ``start_index .. start_index + length - 1``: ``[1 or B, length, depth]``."""
        positions = _positions(start_index, length, dtype)  # [1 or B, T]
        features = ops.arange(depth)
        exponent = ops.cast(2 * (features // 2), dtype) / ops.cast(depth, dtype)
        inverse_frequency = ops.power(ops.cast(self.max_wavelength, dtype), -exponent)  # [D]
        angles = positions[..., None] * inverse_frequency  # [1 or B, T, D]
        return ops.where(features % 2 == 0, ops.sin(angles), ops.cos(angles))

    def call(self, inputs, start_index=0):
        inputs = ops.convert_to_tensor(inputs, self.compute_dtype)
        encoding = self.encoding(ops.shape(inputs)[-2], inputs.shape[-1], start_index, inputs.dtype)
        return inputs + encoding

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
