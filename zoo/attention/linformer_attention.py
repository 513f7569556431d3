"""Linformer attention (Wang et al. 2020): keys and values projected along the sequence to k rows."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention
from zoo.attention.linear_attention import key_mask_of
from zoo.attention.multi_head_attention import MultiHeadAttention


@register_attention("linformer")
@keras.saving.register_keras_serializable(package="zoo")
class LinformerAttention(MultiHeadAttention):
    """Linformer self-attention of Wang et al. (2020): attention over ``k`` learned mixtures of positions.

    The ``n`` projected keys and values are first projected along the sequence to ``k`` rows by
    learned ``E, F`` ``[k, n]`` (eq. 7):

    ``head_i = softmax(Q W_i^Q (E K W_i^K)^T / sqrt(d_k)) F V W_i^V``,

    so that the score matrix is ``[n, k]``, time and memory ``O(n k)`` instead of ``O(n^2)``; the paper
    shows the context mapping is approximately low rank (Theorem 1). ``E`` and ``F`` are shared by the
    heads (headwise sharing, sec. 4) and sized for ``max_length`` positions; a sequence of ``T <=
    max_length`` positions uses their first ``T`` columns ``E[:, :T]``, ``F[:, :T]``.

    Encoder only. Every projected row mixes all positions, so no mask can stop a query from seeing a
    later key: a causal mask (``use_causal_mask=True``) and a decoding cache are refused with an error
    here, and ``causal`` must be False (its YAML says so, and the config validator refuses a causal use
    before TensorFlow starts). A key mask (``value_mask``, ``key_mask``, an ``attention_mask``
    ``[B, 1, Tv]``: padding) zeroes the masked keys and values before the projection; a mask that
    differs per query cannot reach the mixtures and is refused, as is a score bias (``t5``, ``alibi``:
    there are no key positions after the projection). Rotary positions rotate the queries and keys
    before the projection (the mixtures then carry absolute rotations).

    The weights, when asked for, are the map the output implies over the ``Tv`` positions,
    ``P F[:, :T] diag(m)`` ``[B, H, Tq, Tv]`` (``P`` the ``[Tq, k]`` softmax, ``m`` the key mask): the
    coefficient of each value ``v_j`` in a head's output. They are exactly 0 on masked keys; with a
    learned ``F`` they need not be positive nor sum to 1. Dropout applies to ``P``.

    Shapes: ``B`` batch, ``Tq``/``Tv`` query/source steps (``Tv <= max_length``), ``H`` heads, ``k``
    ``projected_length``, ``d_k``/``d_v`` per-head sizes, ``D`` features.

    Args:
        num_heads, key_dim, value_dim, output_dim, use_bias, scoring, dropout, num_kv_heads: as
            ``multi_head``.
        projected_length: positive int, ``k``, the rows keys and values are projected to.
        max_length: positive int, ``n``, the longest sequence (the columns of ``E`` and ``F``).
        causal: must be False (encoder only); the declaration the config validator reads.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        As ``multi_head``, without ``cache``/``cache_update_index`` and ``use_causal_mask=True``.

    Returns:
        ``output [B, Tq, D_out]``; then ``weights [B, H, Tq, Tv]`` with ``return_attention_scores=True``.

    Example:
        >>> import numpy as np
        >>> layer = LinformerAttention(num_heads=2, key_dim=4, projected_length=3, max_length=10)
        >>> x = np.random.default_rng(0).normal(size=(2, 6, 8)).astype("float32")
        >>> out, w = layer(x, x, return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape), tuple(layer.key_projection.shape)
        ((2, 6, 8), (2, 2, 6, 6), (3, 10))

    References:
        Wang, Li, Khabsa, Fang, Ma. Linformer: Self-Attention with Linear Complexity. 2020, eq. 7, sec. 4.
        https://arxiv.org/abs/2006.04768
    """

    kind = "self"  # a Transformer self-attention (model.attention), not an RNN decoder's alignment

    def __init__(self, num_heads=2, key_dim=None, value_dim=None, output_dim=None, use_bias=True,
                 scoring="scaled_dot", dropout=0.0, num_kv_heads=None, projected_length=32, max_length=256,
                 causal=False, **kwargs):
        if causal is not False:
            raise checks.invalid("causal", "False (linformer is encoder only: each projected key mixes every "
                                 "position, later ones included)", causal)
        if kwargs.get("sliding_window") is not None:
            raise checks.invalid("sliding_window", "None (linformer has no sliding window; multi_head has)",
                                 kwargs["sliding_window"])
        super().__init__(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim, output_dim=output_dim,
                         use_bias=use_bias, scoring=scoring, dropout=dropout, num_kv_heads=num_kv_heads, **kwargs)
        self.projected_length = checks.positive_int("projected_length", projected_length)
        self.max_length = checks.positive_int("max_length", max_length)
        self.causal = False

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        shape = (self.projected_length, self.max_length)
        self.key_projection = self.add_weight(name="key_projection", shape=shape, initializer="glorot_uniform")  # E
        self.value_projection = self.add_weight(name="value_projection", shape=shape,
                                                initializer="glorot_uniform")  # F

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             use_causal_mask=False, cache=None, cache_update_index=None, rotary=None, score_bias=None,
             return_attention_scores=False, training=None):
        if use_causal_mask or cache is not None or cache_update_index is not None:
            raise ValueError("linformer is encoder only: its keys are mixtures of every position, so it has no "
                             "causal mask and no decoding cache. Received: "
                             f"use_causal_mask={use_causal_mask}, cache={'None' if cache is None else 'given'}, "
                             f"cache_update_index={cache_update_index}")
        if score_bias is not None:
            raise ValueError("linformer has no key positions after its projection to add a score bias to. "
                             f"Received: score_bias={score_bias}")
        key = value if key is None else key
        tv = key.shape[1]
        if tv is not None and tv > self.max_length:
            raise ValueError(f"linformer's E and F cover max_length={self.max_length} positions. "
                             f"Received a sequence of {tv}.")
        queries = self.split_heads(self.query_dense(query))  # Q W^Q: [B, H, Tq, d_k]
        keys, values = self.prepare(value, key)  # K W^K, V W^V: [B, H_kv, Tv, d]
        if rotary is not None:
            queries = rotary(queries, start_index=0, sequence_axis=2)
            keys = rotary(keys, start_index=0, sequence_axis=2)
        keys, values = self.share_heads(keys), self.share_heads(values)
        batch, tv = ops.shape(keys)[0], ops.shape(keys)[2]
        key_valid, pairs = key_mask_of(batch, tv, value_mask, key_mask, attention_mask)
        if pairs is not None:
            raise ValueError("linformer takes a key mask ([B, Tv] or an attention_mask [B, 1, Tv]); a mask that "
                             "differs per query cannot reach its mixtures of positions. Received: attention_mask "
                             f"of shape {tuple(attention_mask.shape)}")
        if key_valid is not None:  # masked keys and values take no part in the mixtures
            keep = ops.cast(key_valid[:, None, :, None], keys.dtype)
            keys, values = keys * keep, values * keep
        e = ops.convert_to_tensor(self.key_projection)[:, :tv]  # E[:, :T]: [k, T]
        f = ops.convert_to_tensor(self.value_projection)[:, :tv]  # F[:, :T]
        projected_keys = ops.einsum("rt,bhtd->bhrd", ops.cast(e, keys.dtype), keys)  # E K W^K: [B, H, k, d_k]
        projected_values = ops.einsum("rt,bhtd->bhrd", ops.cast(f, values.dtype), values)  # F V W^V
        scores = ops.matmul(queries, ops.swapaxes(projected_keys, -1, -2)) * ops.cast(self.scale, queries.dtype)
        p = ops.softmax(scores, axis=-1)  # [B, H, Tq, k]
        dropped = self.dropout_layer(p, training=training) if self.dropout > 0 else p
        heads = ops.matmul(dropped, projected_values)
        output = self.output_dense(self.merge_heads(heads))  # Concat(head_1, ..., head_h) W^O
        attended = None
        if key_valid is not None:  # nothing to attend to -> 0, not the output bias
            attended = ops.broadcast_to(ops.any(key_valid, axis=-1, keepdims=True), ops.shape(output)[:2])
        if query_mask is not None:
            mask = ops.cast(query_mask, "bool")
            attended = mask if attended is None else ops.logical_and(attended, mask)
        if attended is not None:
            output = output * ops.cast(ops.expand_dims(attended, -1), output.dtype)
        if not return_attention_scores:
            return output
        weights = ops.einsum("bhir,rt->bhit", p, ops.cast(f, p.dtype))  # P F[:, :T]: each value's coefficient
        if key_valid is not None:
            weights = weights * ops.cast(key_valid[:, None, None, :], weights.dtype)
        if attended is not None:
            weights = weights * ops.cast(attended[:, None, :, None], weights.dtype)
        return output, weights

    def get_config(self):
        config = super().get_config()
        config.update({"projected_length": self.projected_length, "max_length": self.max_length,
                       "causal": self.causal})
        return config
