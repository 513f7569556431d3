"""Scaled dot-product attention (Vaswani et al.)."""

import math

import keras
from keras import ops

from zoo.attention.base_attention import register_attention
from zoo.attention.dot_attention import DotAttention


@register_attention("scaled_dot")
@keras.saving.register_keras_serializable(package="zoo")
class ScaledDotAttention(DotAttention):
    """Scaled dot-product attention of Vaswani et al. (2017), single head.

    ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` (Vaswani et al. 2017, eq. 1).

    The ``1 / sqrt(d_k)`` factor does not depend on the query, so ``prepare_key`` applies it to
    the keys once; the score is then the plain dot product with the prepared keys.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``d_k`` query/key features.
    Cost: ``O(B Tq Tv d_k)`` time, ``O(B Tq Tv)`` memory.

    Args:
        dropout: float in [0, 1), dropout rate on the attention weights in training.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        See ``BaseAttention``: ``(query [B, Tq, d_k], value [B, Tv, Dv], key=None [B, Tv, d_k],
        *, query_mask, value_mask, attention_mask, use_causal_mask, return_attention_scores,
        training)``.

    Returns:
        ``output [B, Tq, Dv]``, or ``(output, weights [B, Tq, Tv])``.

    Example:
        >>> import numpy as np
        >>> layer = ScaledDotAttention()
        >>> out, w = layer(np.ones((2, 3, 4)), np.ones((2, 5, 4)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape)
        ((2, 3, 4), (2, 3, 5))

    References:
        Vaswani et al. Attention Is All You Need. NeurIPS 2017, sec. 3.2.1.
        https://arxiv.org/abs/1706.03762
    """

    def prepare_key(self, key):
        key = ops.convert_to_tensor(key)
        return key * ops.cast(1.0 / math.sqrt(key.shape[-1]), key.dtype)
