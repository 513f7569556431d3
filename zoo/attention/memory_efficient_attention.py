"""Memory-efficient exact attention (Rabe & Staats 2021; the algorithm inside FlashAttention, Dao et al. 2022)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import large_negative, register_attention
from zoo.attention.multi_head_attention import MultiHeadAttention


def blocks(x, size, axis):
    """``x`` padded with zeros along ``axis`` to a multiple of ``size`` and cut into blocks, the block
    index first: ``[..., T, ...] -> [n, ..., size, ...]`` with ``n = ceil(T / size)``."""
    length = ops.shape(x)[axis]
    count = (length + size - 1) // size
    pad = [[0, 0] for _ in x.shape]
    pad[axis] = [0, count * size - length]
    x = ops.pad(x, pad)
    shape = ops.shape(x)
    x = ops.reshape(x, (*shape[:axis], count, size, *shape[axis + 1:]))
    return ops.moveaxis(x, axis, 0)


@register_attention("memory_efficient")
@keras.saving.register_keras_serializable(package="zoo")
class MemoryEfficientAttention(MultiHeadAttention):
    """Exact multi-head softmax attention computed over blocks, in memory linear in the length.

    The same function as ``multi_head`` (``softmax(Q K^T / sqrt(d_k)) V`` per head, Vaswani et al.
    2017, eq. 1) and the same weights, computed the way Rabe & Staats (2021) and FlashAttention (Dao
    et al. 2022, Algorithm 1) compute it: the queries in blocks of ``B_r`` (``query_block``) rows, and
    for each query block the keys and values in blocks of ``B_c`` (``key_block``) rows, keeping per
    query a running maximum ``m``, a running sum ``l`` and a running output ``o``:

    ``S_j = Q_i K_j^T / sqrt(d_k)``,  ``m_j = rowmax(S_j)``,  ``P_j = exp(S_j - m_j)``,
    ``m' = max(m, m_j)``,  ``l' = e^{m - m'} l + e^{m_j - m'} rowsum(P_j)``,
    ``o' = e^{m - m'} o + e^{m_j - m'} P_j V_j``,  and at the end ``O_i = o / l``

    (Rabe & Staats 2021, sec. 3; Dao et al. 2022, Algorithm 1, lines 9-12). No ``[Tq, Tv]`` score
    matrix is ever held: a block's scores ``[B_r, B_c]`` exist only inside its step.

    Memory. Each query block and each key block step is wrapped in ``keras.remat`` (TensorFlow's
    ``recompute_grad``, JAX's ``checkpoint``), so the backward pass recomputes a block's scores
    instead of keeping them, as both papers do: what is kept for the gradient is the projected
    ``Q, K, V`` and one ``[B_r, d_v]`` output per query block, ``O(B H (Tq + Tv) d)``; what one
    step holds on top is ``O(B H B_r B_c)`` (forward) or ``O(B H B_r Tv / B_c * d_v)`` (the
    recomputed query block in the backward). The blocks are visited with ``keras.ops.map`` (queries)
    and ``keras.ops.fori_loop`` (keys), so the lengths may be unknown when a function is traced; the number
    of ops does not grow with the length. Masks are made per block from their parts (key padding,
    the causal positions, a ``[B, Tq, Tv]`` ``attention_mask`` when one is passed) rather than as
    one ``[B, Tq, Tv]`` tensor.

    The weights, when asked for (``return_attention_scores=True``), are a second pass over the query
    blocks with the final ``m`` and ``l``: ``softmax(S)_ij = exp(S_ij - m_i) / l_i``, which makes
    the ``[B, H, Tq, Tv]`` output itself (the only quadratic tensor, there because it was asked for).

    Dropout on the weights is not offered (``dropout`` must be 0): the recomputed backward would
    have to draw the same random mask again, which FlashAttention does with a counter-based
    generator keyed by the block and ``keras.random`` cannot do from a tensor seed.

    Everything else is ``multi_head``'s: the projections (weights copy across), the cache
    (``(keys, values)`` each ``[B, H, L, d]``, written at ``cache_update_index``), rotary positions,
    masks, a 0 output row for a query with nothing to attend to.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``H`` heads, ``D`` features,
    ``d_k``/``d_v`` per-head sizes, ``B_r``/``B_c`` the query/key block sizes.

    Args:
        num_heads, key_dim, value_dim, output_dim, use_bias, scoring: as ``multi_head``.
        dropout: must be 0.0 (see above); kept so the layer takes ``multi_head``'s arguments.
        query_block: positive int, ``B_r``, query rows per block.
        key_block: positive int, ``B_c``, key rows per block.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        As ``multi_head``: ``query [B, Tq, Dq]``, ``value [B, Tv, Dv]``, ``key``, ``query_mask``,
        ``value_mask``, ``key_mask``, ``attention_mask``, ``use_causal_mask``, ``cache``,
        ``cache_update_index``, ``rotary``, ``return_attention_scores``, ``training``.

    Returns:
        As ``multi_head``: ``output [B, Tq, D_out]``; then ``weights [B, H, Tq, Tv]`` with
        ``return_attention_scores=True``; then the cache when one is given.

    Example:
        >>> import numpy as np
        >>> layer = MemoryEfficientAttention(num_heads=2, key_dim=3, query_block=2, key_block=2)
        >>> x = np.random.default_rng(0).normal(size=(2, 5, 6)).astype("float32")
        >>> out, w = layer(x, x, use_causal_mask=True, return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape)
        ((2, 5, 6), (2, 2, 5, 5))
        >>> np.allclose(keras.ops.convert_to_numpy(keras.ops.sum(w, axis=-1)), 1.0, atol=1e-6)
        True

    References:
        Rabe & Staats. Self-attention Does Not Need O(n^2) Memory. 2021. https://arxiv.org/abs/2112.05682
        Dao, Fu, Ermon, Rudra, Re. FlashAttention: Fast and Memory-Efficient Exact Attention with
        IO-Awareness. NeurIPS 2022, Algorithm 1. https://arxiv.org/abs/2205.14135
    """

    kind = "self"  # a Transformer self-attention (model.attention), not an RNN decoder's alignment

    def __init__(self, num_heads=2, key_dim=None, value_dim=None, output_dim=None, use_bias=True,
                 scoring="scaled_dot", dropout=0.0, num_kv_heads=None, query_block=64, key_block=64, **kwargs):
        if dropout != 0.0:
            raise checks.invalid("dropout", "0.0 (memory_efficient attention has no dropout on its weights: "
                                 "the recomputed backward pass could not draw the same mask)", dropout)
        if kwargs.get("sliding_window") is not None:
            raise checks.invalid("sliding_window", "None (memory_efficient attention has no sliding window; "
                                 "multi_head has)", kwargs["sliding_window"])
        super().__init__(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim, output_dim=output_dim,
                         use_bias=use_bias, scoring=scoring, dropout=dropout, num_kv_heads=num_kv_heads, **kwargs)
        self.query_block = checks.positive_int("query_block", query_block)
        self.key_block = checks.positive_int("key_block", key_block)

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             use_causal_mask=False, cache=None, cache_update_index=None, rotary=None, score_bias=None,
             return_attention_scores=False, training=None):
        self.refuse_value_term("memory_efficient attention", score_bias, ": the value term needs every weight at once")
        # Q W^Q, K W^K, V W^V: [B, H, T, d], positions applied, the keys and values cached
        queries, keys, values, cache, start, _ = self.project_heads(query, value, key, cache, cache_update_index,
                                                                    rotary)
        tq, tv = ops.shape(queries)[2], ops.shape(keys)[2]
        key_valid = None  # [B, Tv]: the keys every query may see
        for m in (value_mask, key_mask):
            if m is not None:
                m = ops.cast(m, "bool")
                key_valid = m if key_valid is None else ops.logical_and(key_valid, m)
        pair_mask = None  # [B, Tq, Tv]
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            if attention_mask.shape[-2] == 1:  # [B, 1, Tv]: a key mask
                m = attention_mask[..., 0, :]
                key_valid = m if key_valid is None else ops.logical_and(key_valid, m)
            else:
                pair_mask = ops.broadcast_to(attention_mask, (ops.shape(queries)[0], tq, tv))
        causal_start = None
        if use_causal_mask:  # query i sits at position causal_start + i (causal_mask's alignment)
            causal_start = tv - tq if cache_update_index is None else cache_update_index
        bias = None
        if score_bias is not None:  # the bias of a block: queries from ``start + i``, keys from ``j``
            if not getattr(score_bias, "built", True):  # its weights made here, not inside the block loops
                score_bias(queries[:, :, :1], keys[:, :, :1])
            def bias(q, k, query_start, key_start):
                return score_bias(q * ops.cast(self.scale, q.dtype), k, start_index=start + query_start,
                                  key_start_index=key_start)
        heads, weights, attended = self.blockwise(queries, keys, values, key_valid, pair_mask, causal_start,
                                                  return_attention_scores, bias)
        output = self.output_dense(self.merge_heads(heads))  # Concat(head_1, ..., head_h) W^O
        if query_mask is not None:
            attended = ops.logical_and(attended, ops.cast(query_mask, "bool"))
        keep = ops.cast(ops.expand_dims(attended, -1), output.dtype)  # nothing to attend to -> 0
        output = output * keep
        if weights is not None and query_mask is not None:
            weights = weights * ops.cast(ops.expand_dims(keep, 1), weights.dtype)
        return self.returned(output, weights, cache, return_attention_scores)

    def blockwise(self, queries, keys, values, key_valid=None, pair_mask=None, causal_start=None,
                  return_weights=False, bias=None):
        """Exact attention of ``queries [B, H, Tq, d_k]`` over ``keys [B, H, Tv, d_k]``, ``values
        [B, H, Tv, d_v]`` block by block. ``key_valid`` bool ``[B, Tv]``, ``pair_mask`` bool ``[B, Tq, Tv]``
        (True = attend), ``causal_start``: query ``i`` sees keys ``j <= causal_start + i`` (None: no
        causal mask). ``bias(queries, keys, query_start, key_start)``: the score bias of a block whose first
        query and key are at ``query_start``, ``key_start``, or None. Returns ``(heads [B, H, Tq, d_v],
        weights [B, H, Tq, Tv] or None, attended [B, Tq])``, ``attended`` False for a query with no key to
        attend to."""
        bq, bk = self.query_block, self.key_block
        batch, tq, tv = ops.shape(queries)[0], ops.shape(queries)[2], ops.shape(keys)[2]
        dtype = queries.dtype
        scale = ops.cast(self.scale, dtype)
        negative = ops.cast(large_negative(dtype), dtype)
        if key_valid is None:
            key_valid = ops.ones((batch, tv), "bool")
        key_valid = ops.cast(key_valid, "bool")
        key_positions = ops.arange(tv)
        # Blocks, the block index first: keys [nk, B, H, B_c, d], their mask [nk, B, B_c] (padding = False).
        key_blocks, value_blocks = blocks(keys, bk, 2), blocks(values, bk, 2)
        valid_blocks = blocks(key_valid, bk, 1)
        nk = ops.shape(key_blocks)[0]
        query_blocks = blocks(queries, bq, 2)  # [nq, B, H, B_r, d_k]
        nq = ops.shape(query_blocks)[0]
        pair_blocks = None
        if pair_mask is not None:  # [nq, nk, B, B_r, B_c]
            pair_blocks = ops.moveaxis(blocks(blocks(pair_mask, bq, 1), bk, 3), 0, 1)

        def allowed(i, j, valid, pair):
            """Bool ``[B, 1, B_r, B_c]``: query block ``i`` may see key block ``j``."""
            mask = ops.expand_dims(ops.expand_dims(valid, 1), 1)  # [B, 1, 1, B_c]
            if causal_start is not None:
                rows = causal_start + i * bq + ops.arange(bq)
                cols = j * bk + ops.arange(bk)
                mask = ops.logical_and(mask, ops.expand_dims(rows, 1) >= ops.expand_dims(cols, 0))
            if pair is not None:
                mask = ops.logical_and(mask, ops.expand_dims(pair, 1))
            return mask

        def summarize(q, k, v, mask, *block_bias):
            """One block: ``(P_j V_j, rowsum(P_j), m_j)`` with ``P_j = exp(S_j - m_j)`` over the allowed keys
            (``mask``); recomputed in the backward pass (``keras.remat`` of the differentiable inputs)."""
            return keras.remat(lambda *args: summary(*args[:3], mask, *args[3:]))(q, k, v, *block_bias)

        def summary(q, k, v, mask, *block_bias):
            scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) * scale  # S_j
            if block_bias:
                scores = scores + ops.cast(block_bias[0], dtype)
            scores = ops.where(mask, scores, negative)
            block_max = ops.max(scores, axis=-1)
            p = ops.exp(scores - ops.expand_dims(block_max, -1)) * ops.cast(mask, dtype)
            return ops.matmul(p, v), ops.sum(p, axis=-1), block_max

        def query_block(q, i, keys, values, *pairs):
            def step(j, carry):
                o, total, m = carry
                block = [ops.take(x, j, axis=0) for x in (keys, values, valid_blocks) + pairs]
                block_bias = () if bias is None else (bias(q, block[0], i * bq, j * bk),)
                pv, rowsum, block_max = summarize(q, block[0], block[1],
                                                  allowed(i, j, block[2], block[3] if pairs else None), *block_bias)
                new_max = ops.maximum(m, block_max)
                a, b = ops.exp(m - new_max), ops.exp(block_max - new_max)
                o = o * ops.expand_dims(a, -1) + pv * ops.expand_dims(b, -1)
                return o, total * a + rowsum * b, new_max

            shape = ops.shape(q)
            init = (ops.zeros((*shape[:3], ops.shape(values)[-1]), dtype), ops.zeros(shape[:3], dtype),
                    ops.full(shape[:3], negative, dtype))
            o, total, m = ops.fori_loop(0, nk, step, init)  # o, l, m at the end
            seen = total > 0
            heads = ops.where(ops.expand_dims(seen, -1), o / ops.expand_dims(ops.where(seen, total, 1.0), -1), 0.0)
            return heads, total, m

        def per_query_block(x):  # recomputed in the backward pass, its key loop included
            return keras.remat(lambda q, k, v: query_block(q, x[0], k, v, *x[2:]))(x[1], key_blocks, value_blocks)

        xs = (ops.arange(nq), query_blocks) + (() if pair_blocks is None else (pair_blocks,))
        heads, sums, maxima = ops.map(per_query_block, xs)  # [nq, B, H, B_r, d_v], [nq, B, H, B_r] x 2

        def unblock(x):  # [n, B, H, size, ...] -> [B, H, n * size, ...] cut to Tq
            x = ops.moveaxis(x, 0, 2)
            shape = ops.shape(x)
            return ops.reshape(x, (*shape[:2], shape[2] * shape[3], *shape[4:]))[:, :, :tq]

        sum_blocks, heads, sums = sums, unblock(heads), unblock(sums)
        attended = sums[:, 0] > 0  # [B, Tq]: the same keys for every head
        weights = None
        if return_weights:  # the second pass: exp(S - m) / l, one query block at a time
            def block_weights(x):
                i, q, m, total = x[:4]
                mask = ops.expand_dims(ops.expand_dims(key_valid, 1), 1)  # [B, 1, 1, Tv]
                if causal_start is not None:
                    rows = causal_start + i * bq + ops.arange(bq)
                    mask = ops.logical_and(mask, ops.expand_dims(rows, 1) >= ops.expand_dims(key_positions, 0))
                if len(x) > 4:
                    mask = ops.logical_and(mask, ops.expand_dims(x[4], 1))
                scores = ops.matmul(q, ops.swapaxes(keys, -1, -2)) * scale
                if bias is not None:
                    scores = scores + ops.cast(bias(q, keys, i * bq, 0), dtype)
                p = ops.exp(ops.where(mask, scores, negative) - ops.expand_dims(m, -1)) * ops.cast(mask, dtype)
                return p / ops.expand_dims(ops.where(total > 0, total, 1.0), -1)

            pair_rows = () if pair_mask is None else (blocks(pair_mask, bq, 1),)  # [nq, B, B_r, Tv]
            weights = unblock(ops.map(block_weights, (ops.arange(nq), query_blocks, maxima,
                                                      sum_blocks) + pair_rows))
        return heads, weights, attended

    def get_config(self):
        config = super().get_config()
        config.update({"query_block": self.query_block, "key_block": self.key_block})
        return config
