"""Luong local attention with predictive alignment (local-p)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import BaseAttention, register_attention
from zoo.attention.local_monotonic_attention import CONSTRAINTS, LocalMonotonicAttention  # noqa: F401 (the window rule)


@register_attention("local_p")
@keras.saving.register_keras_serializable(package="zoo")
class LocalPredictiveAttention(LocalMonotonicAttention):
    """Local attention of Luong et al. (2015) with predictive alignment (local-p).

    The centre of the window is predicted from the query:
    ``p_t = S * sigmoid(v_p^T tanh(W_p h_t))`` (Luong et al. 2015, eq. 9), ``S`` the source
    length; the weights are ``a_t(s) = align(h_t, h_s) exp(-(s - p_t)^2 / (2 sigma^2))``
    (eq. 10) with ``sigma = D / 2``, ``align`` the softmax of ``score`` over the window
    ``[p_t - D, p_t + D]`` (eq. 7) and 0 outside it.

    As in the paper, the Gaussian multiplies the softmax-normalized alignment and the result is
    not renormalized, so rows sum to at most 1 (``renormalize=True`` rescales them to 1).
    ``p_t`` is real-valued; the window holds the positions with ``|s - p_t| <= D``, and the
    gradient reaches ``W_p``, ``v_p`` through the Gaussian only (as in the paper).

    ``S`` is the unpadded source length: per batch row, the number of source positions that
    any query may attend under the mask (the length from ``value_mask``), else ``Tv``.
    Positions are 0-based, so ``p_t`` lies in ``[0, S]``.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``D`` = ``window_size``,
    ``U`` = ``units``.
    Cost: the inner score plus ``O(B Tq Dq U)`` for ``p_t``; ``O(B Tq Tv)`` memory.

    Args:
        window_size: positive int ``D``; the window spans ``2D + 1`` source positions.
        units: positive int or None, the size of ``W_p``'s output; None means the query's
            feature size.
        scoring: inner score, one of ``"general"`` (default), ``"dot"``, ``"concat"``,
            ``"scaled_dot"``, ``"additive"``.
        gaussian: bool, multiply the weights by the Gaussian (eq. 10); default True.
        renormalize: bool, rescale each row of weights to sum to 1 after the Gaussian.
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
        >>> layer = LocalPredictiveAttention(window_size=2)
        >>> out, w = layer(np.ones((2, 3, 4)), np.ones((2, 7, 6)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape), tuple(layer.predict_positions(np.ones((2, 3, 4)), source_length=7).shape)
        ((2, 3, 6), (2, 3, 7), (2, 3))

    References:
        Luong, Pham, Manning. Effective Approaches to Attention-based Neural Machine
        Translation. EMNLP 2015, sec. 3.2. https://arxiv.org/abs/1508.04025
    """

    def __init__(self, window_size=10, units=None, scoring="general", gaussian=True, renormalize=False,
                 dropout=0.0, **kwargs):
        super().__init__(window_size=window_size, scoring=scoring, gaussian=gaussian, renormalize=renormalize,
                         dropout=dropout, **kwargs)
        self.units = checks.positive_int("units", units, allow_none=True)

    def build_scoring(self, query_shape, key_shape):
        super().build_scoring(query_shape, key_shape)
        self.position_dense = keras.layers.Dense(self.units or query_shape[-1], use_bias=False,
                                                 name="position_dense", dtype=self.dtype_policy)  # W_p
        self.position_dense.build(query_shape)
        self.v_p = self.add_weight(name="v_p", shape=(self.units or query_shape[-1],),
                                   initializer="glorot_uniform")

    def predict_positions(self, query, mask=None, source_length=None):
        """``p_t = S sigmoid(v_p^T tanh(W_p h_t))`` as ``[B, Tq]``.

        ``source_length`` (``[B]`` or scalar) is ``S``; if None it comes from ``mask``
        (``[B, Tq, Tv]``, the positions any query may attend); one of the two is needed.
        """
        hidden = ops.tanh(self.position_dense(query))
        fraction = ops.sigmoid(ops.einsum("bqu,u->bq", hidden, ops.cast(self.v_p, hidden.dtype)))
        if source_length is None:
            if mask is None:
                raise ValueError("predict_positions needs `mask` or `source_length` to know S.")
            source_length = ops.sum(ops.cast(ops.any(ops.cast(mask, "bool"), axis=1), fraction.dtype), axis=-1)
        source_length = ops.reshape(ops.cast(source_length, fraction.dtype), (-1, 1))
        return source_length * fraction

    def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None):
        length = ops.shape(value)[-2] if mask is None else None
        positions = self.predict_positions(query, mask=mask, source_length=length)
        return self.local_attend(query, value, prepared_key, positions, mask=mask,
                                 return_attention_scores=return_attention_scores, training=training)

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None,
             attention_mask=None, use_causal_mask=False, return_attention_scores=False, training=None):
        return BaseAttention.call(self, query, value, key, query_mask=query_mask, value_mask=value_mask,
                                  key_mask=key_mask, attention_mask=attention_mask,
                                  use_causal_mask=use_causal_mask,
                                  return_attention_scores=return_attention_scores, training=training)

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units})
        return config
