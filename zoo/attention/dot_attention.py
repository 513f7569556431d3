"""Dot-product (Luong "dot") attention."""

import keras
from keras import ops

from zoo.attention.base_attention import BaseAttention, register_attention


@register_attention("dot")
@keras.saving.register_keras_serializable(package="zoo")
class DotAttention(BaseAttention):
    """Dot-product attention of Luong et al. (2015), the parameter-free score.

    ``score(h_t, h_s) = h_t^T h_s`` (Luong et al. 2015, eq. 8, "dot"),
    ``a_t(s) = softmax_s(score(h_t, h_s))`` (eq. 7), ``c_t = sum_s a_t(s) h_s``.

    ``h_t`` is the query (the decoder state), ``h_s`` the keys (the encoder states). The
    query and the keys must have the same feature size ``D``.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``D`` features.
    Cost: ``O(B Tq Tv D)`` time, ``O(B Tq Tv)`` memory for the weights.

    Args:
        dropout: float in [0, 1), dropout rate on the attention weights in training.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        See ``BaseAttention``: ``(query [B, Tq, D], value [B, Tv, Dv], key=None [B, Tv, D], *,
        query_mask, value_mask, attention_mask, use_causal_mask, return_attention_scores,
        training)``.

    Returns:
        ``output [B, Tq, Dv]``, or ``(output, weights [B, Tq, Tv])`` with
        ``return_attention_scores=True``.

    Example:
        >>> import numpy as np
        >>> layer = DotAttention()
        >>> out, w = layer(np.ones((2, 3, 4)), np.ones((2, 5, 4)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape)
        ((2, 3, 4), (2, 3, 5))

    References:
        Luong, Pham, Manning. Effective Approaches to Attention-based Neural Machine
        Translation. EMNLP 2015. https://arxiv.org/abs/1508.04025
    """

    def __init__(self, dropout=0.0, **kwargs):
        super().__init__(dropout=dropout, **kwargs)

    def build_scoring(self, query_shape, key_shape):
        dq, dk = query_shape[-1], key_shape[-1]
        if dq is not None and dk is not None and dq != dk:
            raise ValueError(
                f"{type(self).__name__} needs the query and the key to have the same feature size. "
                f"Received: query_shape={tuple(query_shape)}, key_shape={tuple(key_shape)}"
            )

    def score(self, query, prepared_key):
        return ops.matmul(query, ops.swapaxes(ops.cast(prepared_key, query.dtype), -1, -2))
