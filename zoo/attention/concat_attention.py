"""Luong "concat" attention."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import BaseAttention, register_attention


@register_attention("concat")
@keras.saving.register_keras_serializable(package="zoo")
class ConcatAttention(BaseAttention):
    """Concat attention of Luong et al. (2015): a one-layer MLP on ``[h_t; h_s]``.

    ``score(h_t, h_s) = v_a^T tanh(W_a [h_t; h_s])`` (Luong et al. 2015, eq. 8, "concat"),
    ``a_t(s) = softmax_s(score(h_t, h_s))`` (eq. 7), ``c_t = sum_s a_t(s) h_s``.

    ``W_a`` is one ``[Dq + Dk, units]`` kernel as in the paper. Because
    ``W_a [h_t; h_s] = W_a[:Dq] h_t + W_a[Dq:] h_s``, the key half is applied once per source
    in ``prepare_key`` and each decoder step pays only for the query half and the ``tanh``.
    There is no bias, as in eq. 8.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``Dq``/``Dk`` query/key
    features, ``U`` = ``units``.
    Cost: ``O(B Tv Dk U)`` once per source plus ``O(B Tq (Dq + Tv) U)``; memory
    ``O(B Tq Tv U)`` for the ``tanh`` activations.

    Args:
        units: positive int or None, the hidden size ``U`` of the score; None means the key's
            feature size.
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
        >>> layer = ConcatAttention(units=8)
        >>> out, w = layer(np.ones((2, 3, 4)), np.ones((2, 5, 6)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape), tuple(layer.kernel.shape)
        ((2, 3, 6), (2, 3, 5), (10, 8))

    References:
        Luong, Pham, Manning. Effective Approaches to Attention-based Neural Machine
        Translation. EMNLP 2015. https://arxiv.org/abs/1508.04025
    """

    def __init__(self, units=None, dropout=0.0, **kwargs):
        super().__init__(dropout=dropout, **kwargs)
        self.units = checks.positive_int("units", units, allow_none=True)

    def build_scoring(self, query_shape, key_shape):
        units = self.units or key_shape[-1]
        self.query_dim = query_shape[-1]
        self.kernel = self.add_weight(name="kernel", shape=(query_shape[-1] + key_shape[-1], units),
                                      initializer="glorot_uniform")
        self.v = self.add_weight(name="v", shape=(units,), initializer="glorot_uniform")

    def prepare_key(self, key):
        key = ops.convert_to_tensor(key)
        return ops.matmul(key, ops.cast(self.kernel[self.query_dim:], key.dtype))  # W_a[Dq:] h_s

    def score(self, query, prepared_key):
        q = ops.matmul(query, ops.cast(self.kernel[: self.query_dim], query.dtype))  # [B, Tq, U]
        hidden = ops.tanh(ops.expand_dims(q, -2) + ops.expand_dims(prepared_key, -3))  # [B, Tq, Tv, U]
        return ops.einsum("bqku,u->bqk", hidden, ops.cast(self.v, hidden.dtype))

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units})
        return config
