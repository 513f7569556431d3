"""Learned absolute position embedding."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention


@register_attention("learned")
@keras.saving.register_keras_serializable(package="zoo")
class LearnedPositionEmbedding(keras.layers.Layer):
    """Learned absolute position embeddings, added to the input (Gehring et al. 2017).

    ``e = (w_1 + p_1, ..., w_m + p_m)`` (Gehring et al. 2017, sec. 3.1): one trainable vector
    ``p_pos`` per position, ``pos < max_length``; Vaswani et al. (2017, sec. 3.5) found it on a
    par with the sinusoidal encoding. Positions at or beyond ``max_length`` reuse the last
    row (a static length longer than ``max_length`` is an error at build time). The input's
    Keras mask passes through.

    Shapes: ``B`` batch, ``T`` steps, ``D`` features, ``L`` = ``max_length``.
    Cost: ``O(B T D)`` time; ``L D`` parameters.

    Args:
        max_length: positive int ``L``, the number of positions with an embedding.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: ``x [B, T, D]``.
        start_index: int, scalar or ``[B]`` tensor, the position of ``x[:, 0]``. Default 0.

    Returns:
        ``x + P[start_index : start_index + T]`` as ``[B, T, D]``.

    Example:
        >>> import numpy as np
        >>> layer = LearnedPositionEmbedding(max_length=8)
        >>> out = layer(np.zeros((2, 5, 4)), start_index=3)
        >>> tuple(out.shape), bool(np.allclose(out[0, 0], layer.embeddings[3]))
        ((2, 5, 4), True)

    References:
        Gehring, Auli, Grangier, Yarats, Dauphin. Convolutional Sequence to Sequence Learning.
        ICML 2017, sec. 3.1. https://arxiv.org/abs/1705.03122
    """

    def __init__(self, max_length=512, **kwargs):
        super().__init__(**kwargs)
        self.max_length = checks.positive_int("max_length", max_length)
        self.supports_masking = True

    def build(self, inputs_shape):
        if inputs_shape[-2] is not None and inputs_shape[-2] > self.max_length:
            raise ValueError(
                f"LearnedPositionEmbedding(max_length={self.max_length}) cannot embed "
                f"{inputs_shape[-2]} positions. Received: inputs_shape={tuple(inputs_shape)}"
            )
        self.embeddings = self.add_weight(name="embeddings", shape=(self.max_length, inputs_shape[-1]),
                                          initializer="glorot_uniform")

    def call(self, inputs, start_index=0):
        inputs = ops.convert_to_tensor(inputs, self.compute_dtype)
        start = ops.reshape(ops.cast(ops.convert_to_tensor(start_index), "int32"), (-1, 1))
        positions = start + ops.arange(ops.shape(inputs)[-2], dtype="int32")[None, :]  # [1 or B, T]
        positions = ops.minimum(positions, self.max_length - 1)
        return inputs + ops.cast(ops.take(self.embeddings, positions, axis=0), inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_length": self.max_length})
        return config
