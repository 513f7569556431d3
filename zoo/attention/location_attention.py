"""Luong location-based attention."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import BaseAttention, register_attention


@register_attention("location")
@keras.saving.register_keras_serializable(package="zoo")
class LocationAttention(BaseAttention):
    """Location-based attention of Luong et al. (2015): weights from the query alone.

    ``a_t = softmax(W_a h_t)`` (Luong et al. 2015, sec. 3.1, "location", shown with eq. 8),
    ``c_t = sum_s a_t(s) h_s``.

    ``W_a`` maps the query to one logit per source position ``0 .. max_length - 1``; the
    softmax runs over the first ``Tv`` of them, masked to the real (unpadded) length by the
    masks. Source positions at or beyond ``max_length`` get exactly 0 weight. The keys are not
    used (``key`` is accepted for the common signature).

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``L`` = ``max_length``.
    Cost: ``O(B Tq Dq L + B Tq Tv Dv)`` time, ``O(B Tq max(L, Tv))`` memory; ``Dq L``
    parameters.

    Args:
        max_length: positive int ``L``, the longest source the layer can attend over.
        dropout: float in [0, 1), dropout rate on the attention weights in training.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        See ``BaseAttention``: ``(query [B, Tq, Dq], value [B, Tv, Dv], key=None, *,
        query_mask, value_mask, attention_mask, use_causal_mask, return_attention_scores,
        training)``.

    Returns:
        ``output [B, Tq, Dv]``, or ``(output, weights [B, Tq, Tv])``.

    Example:
        >>> import numpy as np
        >>> layer = LocationAttention(max_length=3)
        >>> out, w = layer(np.ones((2, 4, 6)), np.ones((2, 5, 6)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape), float(keras.ops.max(w[..., 3:]))
        ((2, 4, 6), (2, 4, 5), 0.0)

    References:
        Luong, Pham, Manning. Effective Approaches to Attention-based Neural Machine
        Translation. EMNLP 2015, sec. 3.1. https://arxiv.org/abs/1508.04025
    """

    def __init__(self, max_length=50, dropout=0.0, **kwargs):
        super().__init__(dropout=dropout, **kwargs)
        self.max_length = checks.positive_int("max_length", max_length)

    def build_scoring(self, query_shape, key_shape):
        self.query_dense = keras.layers.Dense(self.max_length, use_bias=False, name="query_dense",
                                              dtype=self.dtype_policy)  # W_a
        self.query_dense.build(query_shape)

    def score(self, query, prepared_key):
        logits = self.query_dense(query)  # [B, Tq, L]
        positions = ops.arange(ops.shape(prepared_key)[-2])
        return ops.take(logits, ops.minimum(positions, self.max_length - 1), axis=-1)  # [B, Tq, Tv]

    def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None):
        in_range = (ops.arange(ops.shape(value)[-2]) < self.max_length)[None, None, :]
        mask = in_range if mask is None else ops.logical_and(ops.cast(mask, "bool"), in_range)
        return super().attend(query, value, prepared_key, mask=mask,
                              return_attention_scores=return_attention_scores, training=training)

    def get_config(self):
        config = super().get_config()
        config.update({"max_length": self.max_length})
        return config
