"""Linear attention (Katharopoulos et al. 2020): a kernel feature map in place of the softmax."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention
from zoo.attention.multi_head_attention import MultiHeadAttention


def key_mask_of(batch, tv, value_mask=None, key_mask=None, attention_mask=None):
    """``(keys [B, Tv] or None, pairs [B, Tq, Tv] or None)``: the masks that say which keys every query
    may see (``value_mask``, ``key_mask``, an ``attention_mask`` of shape ``[B, 1, Tv]``), and a mask
    that differs per query (an ``attention_mask`` ``[B, Tq, Tv]``)."""
    keys = pairs = None
    for m in (value_mask, key_mask):
        if m is not None:
            m = ops.cast(m, "bool")
            keys = m if keys is None else ops.logical_and(keys, m)
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        if attention_mask.shape[-2] == 1:
            m = ops.broadcast_to(attention_mask[..., 0, :], (batch, tv))
            keys = m if keys is None else ops.logical_and(keys, m)
        else:
            pairs = attention_mask
    return keys, pairs


@register_attention("linear")
@keras.saving.register_keras_serializable(package="zoo")
class LinearAttention(MultiHeadAttention):
    """Linear attention of Katharopoulos et al. (2020): softmax replaced by a feature map.

    With the similarity ``sim(q, k) = phi(q)^T phi(k)`` in place of ``exp(q^T k / sqrt(d))``, a head's
    output regroups so that the keys and values are summed once for all queries (eq. 5):

    ``V'_i = phi(Q_i)^T (sum_j phi(K_j) V_j^T) / (phi(Q_i)^T sum_j phi(K_j))``,
    ``phi(x) = elu(x) + 1`` (eq. 7),

    ``O(T d_k d_v)`` per head instead of ``O(T^2 d)``. Causal (eqs. 8-10): query ``i`` sums keys
    ``j <= i`` only, ``S_i = sum_{j<=i} phi(K_j) V_j^T``, ``Z_i = sum_{j<=i} phi(K_j)``,
    ``V'_i = phi(Q_i)^T S_i / phi(Q_i)^T Z_i``, computed here as prefix sums (``keras.ops.cumsum``;
    memory ``O(B H T d_k d_v)``). Decoding is an RNN (sec. 3.4): the cache is the state ``(S, Z)``,
    ``[B, H, d_k, d_v]`` and ``[B, H, d_k]``, whatever the length (``initial_cache``); a call with
    ``cache`` and ``cache_update_index`` reads ``S, Z`` as the sums over the earlier positions, adds
    its own positions (causally) and returns the new sums. Each position must be written once, in
    order (a sum cannot be overwritten the way ``multi_head`` rewrites a slot).

    The attention weights are never formed; with ``return_attention_scores=True`` the implied ones
    are computed explicitly, ``A_ij = phi(Q_i)^T phi(K_j) / sum_j' phi(Q_i)^T phi(K_j')`` over the
    allowed keys (``[B, H, Tq, Tv]``, rows summing to 1), for plots. With a decoding cache the earlier
    keys are not kept, so there are no weights to give: ``None`` stands in their place.

    Masks: a key mask (``value_mask``, ``key_mask``, an ``attention_mask`` ``[B, 1, Tv]``) sets
    ``phi(K_j) = 0`` for the masked keys, which keeps the cost linear; an ``attention_mask`` that
    differs per query (``[B, Tq, Tv]``) is applied to the explicit ``[Tq, Tv]`` map, at quadratic
    cost. Rotary positions (``rotary``) rotate the projected queries and keys before the feature map
    (the ordering RoFormer sec. 3.3 suggests for linear attention; ``phi`` of a rotated vector is no
    longer a function of the distance alone). There is no dropout (``dropout`` must be 0: there are
    no weights to drop), no score bias and no sliding window. ``scoring`` is not an argument: the
    feature map replaces the scaled dot product. Projections are ``multi_head``'s (weights copy).

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``H`` heads, ``d_k``/``d_v``
    per-head sizes, ``D`` features.

    Args:
        num_heads, key_dim, value_dim, output_dim, use_bias, num_kv_heads: as ``multi_head``.
        dropout: must be 0.0 (kept so the layer takes ``multi_head``'s arguments).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        As ``multi_head`` (``query [B, Tq, Dq]``, ``value [B, Tv, Dv]``, ``key``, the masks,
        ``use_causal_mask``, ``rotary``, ``return_attention_scores``, ``training``), with ``cache`` the
        state ``(S, Z)`` of ``initial_cache`` and ``cache_update_index`` the first query's position.

    Returns:
        ``output [B, Tq, D_out]``; then ``weights [B, H, Tq, Tv]`` (None with a cache) with
        ``return_attention_scores=True``; then the new state when a cache is given.

    Example:
        >>> import numpy as np
        >>> layer = LinearAttention(num_heads=2, key_dim=3)
        >>> x = np.random.default_rng(0).normal(size=(2, 4, 6)).astype("float32")
        >>> out, w = layer(x, x, use_causal_mask=True, return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape)
        ((2, 4, 6), (2, 2, 4, 4))
        >>> state = layer.initial_cache(2, 4)  # (S, Z): [B, H, d_k, d_v], [B, H, d_k]
        >>> tuple(state[0].shape), tuple(state[1].shape)
        ((2, 2, 3, 3), (2, 2, 3))
        >>> step, _, state = layer(x[:, :1], x[:, :1], cache=state, cache_update_index=0,
        ...                        return_attention_scores=True)
        >>> np.allclose(keras.ops.convert_to_numpy(step), keras.ops.convert_to_numpy(out[:, :1]), atol=1e-6)
        True

    References:
        Katharopoulos, Vyas, Pappas, Fleuret. Transformers are RNNs: Fast Autoregressive Transformers
        with Linear Attention. ICML 2020, eqs. 5-10, sec. 3.4. https://arxiv.org/abs/2006.16236
    """

    kind = "self"  # a Transformer self-attention (model.attention), not an RNN decoder's alignment

    def __init__(self, num_heads=2, key_dim=None, value_dim=None, output_dim=None, use_bias=True, dropout=0.0,
                 num_kv_heads=None, **kwargs):
        name = type(self).__name__
        if dropout != 0.0:
            raise checks.invalid("dropout", f"0.0 ({name} forms no attention weights to drop)", dropout)
        if kwargs.get("sliding_window") is not None:
            raise checks.invalid("sliding_window", f"None ({name} sums over all the keys it may see)",
                                 kwargs["sliding_window"])
        kwargs.pop("scoring", None)  # the feature map replaces the scaled dot product
        super().__init__(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim, output_dim=output_dim,
                         use_bias=use_bias, dropout=dropout, num_kv_heads=num_kv_heads, **kwargs)

    @property
    def feature_dim(self):
        """The size of ``phi(x)``: ``d_k`` for ``elu + 1``."""
        return self.head_key_dim

    def feature_map(self, x, is_query):
        """``phi(x) = elu(x) + 1`` (eq. 7) of ``x [B, H, T, d_k]``, positive: ``[B, H, T, d_k]``."""
        return ops.elu(x) + 1.0

    def initial_cache(self, batch_size, max_length=None, dtype=None):
        """The empty decoding state ``(S, Z)``: zeros ``[B, H, F, d_v]`` and ``[B, H, F]`` (``F`` the
        feature size), the same whatever ``max_length``."""
        if not self.built:
            raise ValueError(f"{type(self).__name__}.initial_cache needs the layer built (its head sizes).")
        dtype = dtype or self.compute_dtype
        return (ops.zeros((batch_size, self.num_heads, self.feature_dim, self.head_value_dim), dtype=dtype),
                ops.zeros((batch_size, self.num_heads, self.feature_dim), dtype=dtype))

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             use_causal_mask=False, cache=None, cache_update_index=None, rotary=None, score_bias=None,
             return_attention_scores=False, training=None):
        name = type(self).__name__
        if (cache is None) != (cache_update_index is None):
            raise ValueError(f"{name}'s cache is its running state (S, Z): pass both `cache` (initial_cache) and "
                             f"`cache_update_index`. Received: cache={'None' if cache is None else 'given'}, "
                             f"cache_update_index={cache_update_index}")
        if score_bias is not None:
            raise ValueError(f"{name} has no score matrix to add a bias to; use rotary positions or position "
                             f"embeddings. Received: score_bias={score_bias}")
        start = 0 if cache_update_index is None else cache_update_index
        queries = self.split_heads(self.query_dense(query))  # Q W^Q: [B, H, Tq, d_k]
        keys, values = self.prepare(value, key)  # K W^K, V W^V: [B, H_kv, Tv, d]
        if rotary is not None:
            queries = rotary(queries, start_index=start, sequence_axis=2)
            keys = rotary(keys, start_index=start, sequence_axis=2)
        keys, values = self.share_heads(keys), self.share_heads(values)  # [B, H, Tv, d]
        phi_q, phi_k = self.feature_map(queries, True), self.feature_map(keys, False)  # [B, H, T, F]
        batch, tq, tv = ops.shape(queries)[0], ops.shape(queries)[2], ops.shape(keys)[2]
        key_valid, pairs = key_mask_of(batch, tv, value_mask, key_mask, attention_mask)
        if key_valid is not None:  # a masked key adds nothing to the sums
            phi_k = phi_k * ops.cast(key_valid[:, None, :, None], phi_k.dtype)
        causal = use_causal_mask or cache is not None
        if pairs is not None and cache is not None:
            raise ValueError(f"{name} decodes with a running state, which a per-query attention_mask cannot reach; "
                             f"pass a key mask ([B, 1, Tv]) or none. Received: attention_mask of shape "
                             f"{tuple(attention_mask.shape)}")
        weights = None
        if pairs is not None or (return_attention_scores and cache is None):
            weights = self.implied_weights(phi_q, phi_k, pairs, causal)
        if pairs is not None:  # a mask per query: the explicit map
            heads = ops.matmul(weights, values)
            attended = ops.any(weights[:, 0] > 0, axis=-1)
        elif causal:  # eqs. 8-10: prefix sums S_i, Z_i
            kv = ops.einsum("bhjf,bhjd->bhjfd", phi_k, values)  # phi(K_j) V_j^T
            s = ops.cumsum(kv, axis=2)
            z = ops.cumsum(phi_k, axis=2)
            if cache is not None:  # the sums over the positions before this call
                s = s + ops.expand_dims(ops.cast(cache[0], s.dtype), 2)
                z = z + ops.expand_dims(ops.cast(cache[1], z.dtype), 2)
                cache = (s[:, :, -1], z[:, :, -1])
            s, z = s[:, :, tv - tq:], z[:, :, tv - tq:]  # query i at position Tv - Tq + i (bottom-right)
            numerator = ops.einsum("bhif,bhifd->bhid", phi_q, s)
            denominator = ops.einsum("bhif,bhif->bhi", phi_q, z)
            heads, attended = self.normalize(numerator, denominator)
        else:  # eq. 5: (phi(K)^T V) once for all queries
            numerator = ops.matmul(phi_q, ops.einsum("bhjf,bhjd->bhfd", phi_k, values))
            denominator = ops.einsum("bhif,bhf->bhi", phi_q, ops.sum(phi_k, axis=2))
            heads, attended = self.normalize(numerator, denominator)
        output = self.output_dense(self.merge_heads(heads))  # Concat(head_1, ..., head_h) W^O
        if query_mask is not None:
            attended = ops.logical_and(attended, ops.cast(query_mask, "bool"))
            if weights is not None:
                weights = weights * ops.cast(attended[:, None, :, None], weights.dtype)
        output = output * ops.cast(ops.expand_dims(attended, -1), output.dtype)  # nothing to attend to -> 0
        results = (output,) + ((weights,) if return_attention_scores else ()) + ((cache,) if cache is not None else ())
        return results[0] if len(results) == 1 else results

    def normalize(self, numerator, denominator):
        """``(numerator / denominator, attended [B, Tq])``, 0 where a query had no key to attend to
        (``denominator`` 0: ``phi`` is positive, so only when every key is masked)."""
        seen = denominator > 0
        safe = ops.where(seen, denominator, ops.ones_like(denominator))
        heads = ops.where(ops.expand_dims(seen, -1), numerator / ops.expand_dims(safe, -1), 0.0)
        return heads, seen[:, 0]

    def implied_weights(self, phi_q, phi_k, pairs=None, causal=False):
        """``A_ij = phi(Q_i)^T phi(K_j) / sum_j' phi(Q_i)^T phi(K_j')`` over the allowed keys:
        ``[B, H, Tq, Tv]`` (masked keys are already 0 in ``phi_k``)."""
        similarity = ops.matmul(phi_q, ops.swapaxes(phi_k, -1, -2))  # [B, H, Tq, Tv]
        tq, tv = ops.shape(phi_q)[2], ops.shape(phi_k)[2]
        mask = None
        if causal:
            rows = ops.expand_dims(ops.arange(tq) + tv - tq, 1)
            mask = ops.expand_dims(rows >= ops.expand_dims(ops.arange(tv), 0), 0)
        if pairs is not None:
            mask = pairs if mask is None else ops.logical_and(mask, pairs)
        if mask is not None:
            similarity = similarity * ops.cast(ops.expand_dims(mask, 1), similarity.dtype)
        total = ops.sum(similarity, axis=-1, keepdims=True)
        return similarity / ops.where(total > 0, total, ops.ones_like(total))

    def get_config(self):
        config = super().get_config()
        config.pop("scoring", None)
        return config
