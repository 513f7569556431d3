"""Differential attention (Ye et al. 2025, DIFF Transformer): the difference of two softmax maps."""

import math

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import masked_softmax, register_attention
from zoo.attention.multi_head_attention import MultiHeadAttention


@register_attention("differential")
@keras.saving.register_keras_serializable(package="zoo")
class DifferentialAttention(MultiHeadAttention):
    """Differential attention of Ye et al. (2025): two softmax maps, one subtracted from the other.

    Each head splits its query and key projections into halves and subtracts the second half's map,
    scaled by a learned ``lambda``, from the first's, so that attention both maps give to irrelevant
    context (noise) cancels (eq. 1):

    ``[Q_1; Q_2] = X W^Q``, ``[K_1; K_2] = X W^K``, ``V = X W^V``,
    ``DiffAttn(X) = (softmax(Q_1 K_1^T / sqrt(d)) - lambda softmax(Q_2 K_2^T / sqrt(d))) V``,

    with ``d = d_k / 2`` the size of a half, the scalar (eq. 2)
    ``lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init``
    (``lambda_q1, lambda_k1, lambda_q2, lambda_k2`` learned vectors of size ``d``, shared by the heads,
    drawn from ``N(0, 0.1^2)``) and ``lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1))`` for the layer at
    depth ``l`` (``layer_index``, from 1). Each head is normalised on its own and rescaled (eq. 3):
    ``head_i' = (1 - lambda_init) RMSNorm(head_i)`` (the paper's GroupNorm: an RMS norm per head,
    ``x / sqrt(mean(x^2) + 1e-5) * g``, ``g`` learned, size ``d_v``, shared by the heads), then
    ``MultiHead(X) = Concat(head_1', ..., head_h') W^O``. The values keep the whole head size
    (``d_v = 2d`` by default, as in the paper, where ``h`` heads of ``2d`` replace a Transformer's).

    The weights returned (``return_attention_scores=True``) are the differential map
    ``A_1 - lambda A_2`` ``[B, H, Tq, Tv]`` (rows sum to ``1 - lambda``; entries may be negative),
    before dropout; masked keys are 0 in both maps. Dropout (``dropout``) is applied to that map.
    Rotary positions rotate each half on its own (the paper's code treats the ``2h`` halves as heads
    of size ``d``); an odd ``d`` has no feature pairs, so then the whole head of ``2d`` is rotated, and
    the middle pair spans both halves (each half's scores then depend on more than the distance); a
    score bias (``t5``, ``alibi``) is added to both maps' scores. Cache, masks and shared key-value heads are ``multi_head``'s: the cache holds keys
    (both halves) and values ``[B, H_kv, L, d_k]``. No sliding window, no bias with a value term.

    Shapes: ``B`` batch, ``Tq``/``Tv`` query/source steps, ``H`` heads, ``d_k = 2d`` per-head
    query/key size (even), ``d_v`` per-head value size, ``D`` features.

    Args:
        num_heads, value_dim, output_dim, use_bias, scoring, dropout, num_kv_heads: as ``multi_head``.
        key_dim: even positive int or None, ``d_k = 2d`` (the two halves); None means
            ``2 max(1, Dq // (2 num_heads))``.
        layer_index: positive int, ``l``, the layer's depth (1 for the first), which sets ``lambda_init``.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        As ``multi_head``.

    Returns:
        As ``multi_head``, the weights being ``A_1 - lambda A_2``.

    Example:
        >>> import numpy as np
        >>> layer = DifferentialAttention(num_heads=2, key_dim=4, layer_index=1)
        >>> x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
        >>> out, w = layer(x, x, use_causal_mask=True, return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape), round(layer.lambda_init, 2)
        ((2, 5, 8), (2, 2, 5, 5), 0.2)

    References:
        Ye, Dong, Xia, Sun, Zhu, Huang, Wei. Differential Transformer. ICLR 2025, eqs. 1-3, sec. 2.1.
        https://arxiv.org/abs/2410.05258
    """

    kind = "self"  # a Transformer self-attention (model.attention), not an RNN decoder's alignment

    def __init__(self, num_heads=2, key_dim=None, value_dim=None, output_dim=None, use_bias=True,
                 scoring="scaled_dot", dropout=0.0, num_kv_heads=None, layer_index=1, **kwargs):
        if kwargs.get("sliding_window") is not None:
            raise checks.invalid("sliding_window", "None (differential attention has no sliding window; "
                                 "multi_head has)", kwargs["sliding_window"])
        if key_dim is not None and key_dim % 2:
            raise checks.invalid("key_dim", "an even integer or None (two halves, Q_1 and Q_2)", key_dim)
        super().__init__(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim, output_dim=output_dim,
                         use_bias=use_bias, scoring=scoring, dropout=dropout, num_kv_heads=num_kv_heads, **kwargs)
        self.layer_index = checks.positive_int("layer_index", layer_index)

    @property
    def lambda_init(self):
        """``lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1))`` (sec. 2.1)."""
        return 0.8 - 0.6 * math.exp(-0.3 * (self.layer_index - 1))

    @property
    def scale(self):
        """``1 / sqrt(d)``, ``d = d_k / 2`` the size of a half, for ``scaled_dot``; 1 for ``dot``."""
        return 1.0 / math.sqrt(self.head_key_dim // 2) if self.scoring == "scaled_dot" else 1.0

    def build(self, query_shape, value_shape, key_shape=None):
        requested = self.key_dim  # None: d_k = 2d with d = max(1, D // 2h) (the paper's d = d_model / 2h)
        self.key_dim = requested or 2 * max(1, query_shape[-1] // (2 * self.num_heads))
        try:
            super().build(query_shape, value_shape, key_shape)
        finally:
            self.key_dim = requested
        half = self.head_key_dim // 2
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (  # N(0, 0.1^2), each its own draw
            self.add_weight(name=name, shape=(half,), initializer=keras.initializers.RandomNormal(stddev=0.1))
            for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"))
        self.norm_scale = self.add_weight(name="norm_scale", shape=(self.head_value_dim,), initializer="ones")

    def halves(self, x):
        """``[B, H, T, 2d]`` -> ``(x_1, x_2)``, each ``[B, H, T, d]``."""
        half = self.head_key_dim // 2
        return x[..., :half], x[..., half:]

    def rotate(self, rotary, x, start):
        """Rotary positions on each half of ``x [B, H, T, 2d]`` on its own (the paper's code); with an odd
        ``d``, which has no pairs to rotate (``debug=smoke``'s 2-feature heads), on the whole head."""
        if (self.head_key_dim // 2) % 2:
            return rotary(x, start_index=start, sequence_axis=2)
        return ops.concatenate([rotary(h, start_index=start, sequence_axis=2) for h in self.halves(x)], axis=-1)

    def lambda_value(self):
        """``lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init`` (eq. 2)."""
        return (ops.exp(ops.sum(self.lambda_q1 * self.lambda_k1)) - ops.exp(ops.sum(self.lambda_q2 * self.lambda_k2))
                + self.lambda_init)

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             use_causal_mask=False, cache=None, cache_update_index=None, rotary=None, score_bias=None,
             return_attention_scores=False, training=None):
        self.refuse_value_term("differential attention", score_bias)
        # [Q_1; Q_2], [K_1; K_2], V: [B, H, T, 2d], [B, H, T, 2d], [B, H, T, d_v], positions applied (``rotate``)
        queries, keys, values, cache, start, _ = self.project_heads(query, value, key, cache, cache_update_index,
                                                                    rotary)
        mask = self.combine_masks(query, keys, query_mask, value_mask, key_mask, attention_mask, use_causal_mask,
                                  query_start=cache_update_index)
        head_mask = None if mask is None else ops.expand_dims(mask, 1)
        scale = ops.cast(self.scale, queries.dtype)
        bias = None
        if score_bias is not None:
            bias = score_bias(queries * scale, keys, start_index=start, key_start_index=0)
        (q1, q2), (k1, k2) = self.halves(queries), self.halves(keys)
        maps = []
        for q, k in ((q1, k1), (q2, k2)):  # softmax(Q_n K_n^T / sqrt(d)) over the allowed keys
            scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) * scale
            if bias is not None:
                scores = scores + ops.cast(bias, scores.dtype)
            maps.append(masked_softmax(scores, head_mask))
        weights = maps[0] - ops.cast(self.lambda_value(), maps[1].dtype) * maps[1]  # eq. 1
        dropped = self.dropout_layer(weights, training=training) if self.dropout > 0 else weights
        heads = ops.matmul(dropped, values)  # [B, H, Tq, d_v]
        rms = ops.sqrt(ops.mean(ops.square(heads), axis=-1, keepdims=True) + 1e-5)
        heads = heads / rms * ops.cast(self.norm_scale, heads.dtype) * (1.0 - self.lambda_init)  # eq. 3
        output = self.output_dense(self.merge_heads(heads))  # Concat(head_1', ..., head_h') W^O
        if mask is not None:  # nothing to attend to -> 0, not the output bias
            output = output * ops.cast(ops.expand_dims(ops.any(mask, axis=-1), -1), output.dtype)
        return self.returned(output, weights, cache, return_attention_scores)

    def get_config(self):
        config = super().get_config()
        config.update({"layer_index": self.layer_index})
        return config
