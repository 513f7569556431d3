"""Rotary position embedding, RoPE (Su et al.)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention


def _check_axis(axis, shape):
    """``axis`` must lie after the batch and before the features of an input of ``shape``."""
    if not 0 < axis < len(shape) - 1:
        raise ValueError(f"`sequence_axis` must be an axis of the input after the batch and before the features. "
                         f"Received: sequence_axis={axis}, inputs_shape={tuple(shape)}")


@register_attention("rotary")
@keras.saving.register_keras_serializable(package="zoo")
class RotaryPositionEmbedding(keras.layers.Layer):
    """Rotary position embedding of Su et al. (2021), applied to queries and keys.

    ``f(x, m) = R^d_{Theta, m} x`` (Su et al. 2021, eq. 14-15, computed as in eq. 34): the
    feature pairs ``(x_{2i}, x_{2i+1})`` of the vector at position ``m`` are rotated by the
    angle ``m theta_i``,
    ``theta_i = max_wavelength^{-2i / d}`` (eq. 15), i.e.
    ``(x_{2i} cos m theta_i - x_{2i+1} sin m theta_i, x_{2i} sin m theta_i + x_{2i+1} cos m theta_i)``.
    Then ``f(q, m)^T f(k, n)`` depends on ``m - n`` only (eq. 16). Apply it to the queries and
    to the keys (not to the values) before the dot product: ``q = rope(q); k = rope(k)``.
    Pairs are interleaved as in the paper (not the half-split layout of GPT-NeoX).

    Shapes: ``B`` batch, ``T`` steps, ``H`` heads, ``d`` features (even).
    Cost: ``O(B T H d)`` time and memory; no weights.

    Args:
        max_wavelength: positive float, the base of ``theta_i`` (10000 in the paper).
        sequence_axis: int, the axis of the positions in the input (1 for ``[B, T, ...]``,
            2 for ``[B, H, T, d]``). The features are always the last axis.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: ``q`` or ``k``, ``[B, T, d]``, ``[B, T, H, d]`` or (``sequence_axis=2``)
            ``[B, H, T, d]``.
        start_index: int or scalar tensor, the position of the first step. Default 0.
        sequence_axis: int or None, this call's axis of the positions (``[B, H, T, d]`` for a layer
            built for ``[B, T, H, d]``); None: the layer's.

    Returns:
        The rotated input, same shape.

    Example:
        >>> import numpy as np
        >>> rope = RotaryPositionEmbedding()
        >>> q = rope(np.ones((1, 3, 2, 4)))  # [B, T, H, d]
        >>> np.round(np.asarray(q[0, 1, 0], "float64"), 3).tolist()
        [-0.301, 1.382, 0.99, 1.01]

    References:
        Su, Lu, Pan, Murtadha, Wen, Liu. RoFormer: Enhanced Transformer with Rotary Position
        Embedding. 2021, sec. 3.2-3.4. https://arxiv.org/abs/2104.09864
    """

    def __init__(self, max_wavelength=10000.0, sequence_axis=1, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = checks.positive_float("max_wavelength", max_wavelength)
        self.sequence_axis = checks.positive_int("sequence_axis", sequence_axis)
        self.supports_masking = True

    def build(self, inputs_shape):
        if inputs_shape[-1] is None or inputs_shape[-1] % 2:
            raise ValueError(
                "RotaryPositionEmbedding rotates pairs of features, so the last axis must have an "
                f"even size. Received: inputs_shape={tuple(inputs_shape)}"
            )
        _check_axis(self.sequence_axis, inputs_shape)

    def call(self, inputs, start_index=0, sequence_axis=None):
        inputs = ops.convert_to_tensor(inputs, self.compute_dtype)
        rank, depth = len(inputs.shape), inputs.shape[-1]
        axis = self.sequence_axis if sequence_axis is None else sequence_axis
        _check_axis(axis, inputs.shape)
        positions = ops.cast(start_index, inputs.dtype) + ops.cast(
            ops.arange(ops.shape(inputs)[axis]), inputs.dtype)
        theta = ops.power(ops.cast(self.max_wavelength, inputs.dtype),
                          -ops.cast(ops.arange(0, depth, 2), inputs.dtype) / depth)  # [d/2]
        angles = positions[:, None] * theta[None, :]  # [T, d/2]
        shape = [1] * (rank - 1) + [depth]
        shape[axis] = -1
        # RoFormer eq. 34: R x = x * (c0, c0, c1, c1, ...) + (x1, x0, x3, x2, ...) * (-s0, s0, -s1, s1, ...),
        # the swap of each pair a reverse of [..., d/2, 2].
        cos = ops.reshape(ops.repeat(ops.cos(angles), 2, axis=-1), shape)
        sin = ops.reshape(ops.stack([-ops.sin(angles), ops.sin(angles)], axis=-1), shape)
        size = ops.shape(inputs)
        swapped = ops.reshape(ops.flip(ops.reshape(inputs, (*size[:-1], depth // 2, 2)), axis=-1), size)
        return inputs * cos + swapped * sin

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength, "sequence_axis": self.sequence_axis})
        return config
