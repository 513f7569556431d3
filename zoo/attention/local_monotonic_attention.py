"""Luong local attention with monotonic alignment (local-m)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention import _scorers
from zoo.attention.base_attention import register_attention

# The rule of window_size, declared once: the constructor's check and the config validator's
# (zoo.catalog.attention_constraints, before TensorFlow starts) say the same.
CONSTRAINTS = ({"rule": "at_least", "key": "window_size", "min": 1, "integer": True,
                "why": "the window spans 2D + 1 source positions"},)


@register_attention("local_m")
@keras.saving.register_keras_serializable(package="zoo")
class LocalMonotonicAttention(_scorers.ScoredByScorer):
    """Local attention of Luong et al. (2015) with monotonic alignment ``p_t = t`` (local-m).

    Each query step ``t`` attends only to the source window ``[p_t - D, p_t + D]``
    (Luong et al. 2015, sec. 3.2), with ``p_t = t`` (local-m) and
    ``a_t(s) = softmax_s(score(h_t, h_s))`` over the window (eq. 7); positions outside the
    window (or masked) get exactly 0 weight. ``score`` is Luong's ``dot``, ``general`` or
    ``concat`` (eq. 8), or ``scaled_dot`` / ``additive``, chosen by ``scoring``.

    The paper uses the Gaussian only for local-p (eq. 10); ``gaussian=True`` also applies it
    here: ``a_t(s) <- a_t(s) exp(-(s - p_t)^2 / (2 sigma^2))`` with ``sigma = D / 2``, which
    multiplies the softmax-normalized weights, so rows then sum to less than 1, as in the paper.
    ``renormalize=True`` divides each row by its sum afterwards (not in the paper).

    Positions are 0-based: query ``t`` is at ``position_offset + t`` unless ``query_positions``
    are given; a decoder stepping one query at a time passes ``position_offset=step`` (or
    ``query_positions``). The scorer's key work (e.g. ``W_a h_s``) is in ``prepare_key``.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``D`` = ``window_size``.
    Cost: as the inner score, ``O(B Tq Tv Dq)`` time and ``O(B Tq Tv)`` memory (the window is
    applied as a mask, not gathered: simple and exact, not cheaper for short sources).

    Args:
        window_size: positive int ``D``; the window spans ``2D + 1`` source positions.
        scoring: inner score, one of ``"general"`` (default, as in the paper's best local
            models), ``"dot"``, ``"concat"``, ``"scaled_dot"``, ``"additive"``.
        gaussian: bool, multiply the weights by the Gaussian centred on ``p_t``.
        renormalize: bool, rescale each row of weights to sum to 1 after the Gaussian.
        dropout: float in [0, 1), dropout rate on the attention weights in training.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        query, value, key, query_mask, value_mask, attention_mask, use_causal_mask,
            return_attention_scores, training: as in ``BaseAttention``.
        query_positions: optional int or float ``[B, Tq]`` or ``[Tq]``, the source position
            ``p_t`` of each query step; overrides ``position_offset``.
        position_offset: int, scalar or ``[B]`` tensor added to the query index ``t``
            (default 0).

    Returns:
        ``output [B, Tq, Dv]``, or ``(output, weights [B, Tq, Tv])``.

    Example:
        >>> import numpy as np
        >>> layer = LocalMonotonicAttention(window_size=1, scoring="dot")
        >>> out, w = layer(np.ones((1, 3, 4)), np.ones((1, 5, 4)), return_attention_scores=True)
        >>> np.round(np.asarray(w[0], "float64"), 2).tolist()
        [[0.5, 0.5, 0.0, 0.0, 0.0], [0.33, 0.33, 0.33, 0.0, 0.0], [0.0, 0.33, 0.33, 0.33, 0.0]]

    References:
        Luong, Pham, Manning. Effective Approaches to Attention-based Neural Machine
        Translation. EMNLP 2015, sec. 3.2. https://arxiv.org/abs/1508.04025
    """

    def __init__(self, window_size=10, scoring="general", gaussian=False, renormalize=False, dropout=0.0,
                 **kwargs):
        super().__init__(dropout=dropout, **kwargs)
        self.window_size = checks.positive_int("window_size", window_size)
        self.scoring = checks.choice("scoring", scoring, tuple(_scorers.SCORERS))
        self.gaussian = checks.boolean("gaussian", gaussian)
        self.renormalize = checks.boolean("renormalize", renormalize)
        self.scorer = _scorers.make_scorer(self.scoring, self.dtype_policy)

    def local_attend(self, query, value, prepared_key, positions, mask=None, return_attention_scores=False,
                     training=None):
        """Attention restricted to ``|s - p_t| <= D``, with ``positions`` ``p_t`` as ``[B, Tq]``."""
        scores = self.score(query, prepared_key)  # [B, Tq, Tv]
        source = ops.cast(ops.arange(ops.shape(scores)[-1]), scores.dtype)
        distance = source[None, None, :] - ops.expand_dims(ops.cast(positions, scores.dtype), -1)
        window = ops.abs(distance) <= ops.cast(self.window_size, scores.dtype)
        mask = window if mask is None else ops.logical_and(ops.cast(mask, "bool"), window)
        weights = self.normalize_scores(scores, mask)  # a_t(s), eq. 7 (softmax or the layer's normalizer)
        if self.gaussian:
            sigma = self.window_size / 2.0
            weights = weights * ops.exp(-ops.square(distance) / ops.cast(2.0 * sigma * sigma, scores.dtype))
        if self.renormalize:
            total = ops.sum(weights, axis=-1, keepdims=True)
            weights = ops.where(total > 0, weights / ops.where(total > 0, total, ops.ones_like(total)), 0.0)
        dropped = self.dropout_layer(weights, training=training) if self.dropout > 0 else weights
        output = ops.matmul(ops.cast(dropped, value.dtype), value)
        if return_attention_scores:
            return output, weights
        return output

    def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None,
               query_positions=None, position_offset=0):
        if query_positions is None:
            offset = ops.reshape(ops.convert_to_tensor(position_offset), (-1, 1))
            positions = ops.cast(offset, "int32") + ops.arange(ops.shape(query)[-2], dtype="int32")[None, :]
        else:
            positions = ops.convert_to_tensor(query_positions)
            positions = positions if len(positions.shape) == 2 else positions[None, :]
        positions = ops.broadcast_to(positions, (ops.shape(query)[0], ops.shape(query)[-2]))
        return self.local_attend(query, value, prepared_key, positions, mask=mask,
                                 return_attention_scores=return_attention_scores, training=training)

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None,
             attention_mask=None, use_causal_mask=False, return_attention_scores=False, training=None,
             query_positions=None, position_offset=0):
        key = value if key is None else key
        mask = self.combine_masks(query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask)
        return self.attend(query, value, self.prepare(value, key), mask=mask,
                           return_attention_scores=return_attention_scores, training=training,
                           query_positions=query_positions, position_offset=position_offset)

    def get_config(self):
        config = super().get_config()
        config.update({"window_size": self.window_size, "scoring": self.scoring, "gaussian": self.gaussian,
                       "renormalize": self.renormalize})
        return config
