"""Luong "general" (bilinear) attention."""

import keras
from keras import ops

from zoo.attention.base_attention import BaseAttention, register_attention


@register_attention("general")
@keras.saving.register_keras_serializable(package="zoo")
class GeneralAttention(BaseAttention):
    """Bilinear ("general") attention of Luong et al. (2015).

    ``score(h_t, h_s) = h_t^T W_a h_s`` (Luong et al. 2015, eq. 8, "general"),
    ``a_t(s) = softmax_s(score(h_t, h_s))`` (eq. 7), ``c_t = sum_s a_t(s) h_s``.

    ``W_a h_s`` does not depend on the query: ``prepare_key`` computes it once per source
    sequence (``key_dense``, a ``Dense(Dq, use_bias=False)`` whose kernel is ``W_a^T``), and
    each decoder step costs one ``[Tq, Dq] x [Dq, Tv]`` product.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``Dq`` query features,
    ``Dk`` key features.
    Cost: ``O(B Tv Dk Dq)`` once per source plus ``O(B Tq Tv Dq)``; ``Dq Dk`` parameters.

    Args:
        dropout: float in [0, 1), dropout rate on the attention weights in training.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        See ``BaseAttention``: ``(query [B, Tq, Dq], value [B, Tv, Dv], key=None [B, Tv, Dk],
        *, query_mask, value_mask, attention_mask, use_causal_mask, return_attention_scores,
        training)``.

    Returns:
        ``output [B, Tq, Dv]``, or ``(output, weights [B, Tq, Tv])``.

    Example:
        >>> import numpy as np
        >>> layer = GeneralAttention()
        >>> out, w = layer(np.ones((2, 3, 4)), np.ones((2, 5, 6)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape)
        ((2, 3, 6), (2, 3, 5))

    References:
        Luong, Pham, Manning. Effective Approaches to Attention-based Neural Machine
        Translation. EMNLP 2015. https://arxiv.org/abs/1508.04025
    """

    def __init__(self, dropout=0.0, **kwargs):
        super().__init__(dropout=dropout, **kwargs)

    def build_scoring(self, query_shape, key_shape):
        self.key_dense = keras.layers.Dense(query_shape[-1], use_bias=False, name="key_dense",
                                            dtype=self.dtype_policy)
        self.key_dense.build(key_shape)

    def prepare_key(self, key):
        return self.key_dense(key)  # W_a h_s: [B, Tv, Dq]

    def score(self, query, prepared_key):
        return ops.matmul(query, ops.swapaxes(prepared_key, -1, -2))
