"""Multi-head attention (Vaswani et al. 2017), written on ``BaseAttention``, with a key/value cache."""

import math

import keras
from keras import ops

from zoo import checks, kernels
from zoo.attention.base_attention import BaseAttention, masked_softmax, register_attention

SCORINGS = ("scaled_dot", "dot")


def write_positions(cache, new, index):
    """``cache [B, H, L, d]`` with ``new [B, H, T, d]`` written at slots ``index, ..., index + T - 1``
    (keras-hub's ``slice_update``, as a select: plain ops, no XLA-only kernel in a SavedModel)."""
    slots = ops.arange(ops.shape(cache)[2])
    count = ops.shape(new)[2]
    written = ops.logical_and(slots >= index, slots < index + count)  # [L]
    spread = ops.take(ops.cast(new, cache.dtype), ops.clip(slots - index, 0, count - 1), axis=2)  # slot l: l - index
    return ops.where(ops.expand_dims(written, -1), spread, cache)


@register_attention("multi_head")
@keras.saving.register_keras_serializable(package="zoo")
class MultiHeadAttention(BaseAttention):
    """Multi-head attention of Vaswani et al. (2017) with per-head projections and a key/value cache.

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O``,
    ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)`` (Vaswani et al. 2017, sec. 3.2.2), with
    ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` (eq. 1) for ``scoring="scaled_dot"``
    or ``softmax(Q K^T) V`` for ``scoring="dot"``. ``attention`` is eq. 1, ``call`` the rest.

    The projections have the layout of ``keras.layers.MultiHeadAttention`` (kernels
    ``[D, H, d_k]``, ``[H, d_v, D_out]``, biases ``[H, d_k]``, ``[D_out]``), so weights copy
    across and the two layers give the same numbers.

    Decoding with a cache, as keras-hub's ``CachedMultiHeadAttention``: the projected keys and
    values are kept heads first, ``(K W^K, V W^V)`` each ``[B, H, L, d]``, so that a step projects
    one new position only. ``cache`` without ``cache_update_index`` is a memory projected once
    (``prepare``: a decoder's cross-attention over its source); with ``cache_update_index`` the
    keys and values of ``value``/``key`` are written into the cache at that position (a decoder's
    self-attention, one token a step) and the updated cache is returned.

    Shared key-value heads (``num_kv_heads``): ``H_kv`` key and value heads, each read by
    ``G = H / H_kv`` query heads (query head ``i`` by key-value head ``i // G``): grouped-query
    attention (GQA, Ainslie et al. 2023); ``num_kv_heads=1`` is multi-query attention (MQA,
    Shazeer 2019). The projections ``W^K``, ``W^V`` and the cache hold ``H_kv`` heads only, so the
    decoding cache is ``H / H_kv`` times smaller; ``num_kv_heads=None`` (= ``num_heads``) is
    Vaswani et al.'s attention with its weights unchanged. The layout and the head grouping are those
    of ``keras.layers.GroupQueryAttention`` (kernels ``[D, H_kv, d]``, keys repeated head by head).

    Sliding window (``sliding_window=W``, Beltagy et al. 2020, Longformer sec. 3.1): query ``i``
    attends to keys ``j`` with ``|i - j| < W`` (``W - 1`` on either side and itself; with the causal
    mask ``0 <= i - j < W``: itself and ``W - 1`` before it), as ``keras.layers.GroupQueryAttention``'s
    ``sliding_window``. Decoding keeps a rolling cache of the ``W`` most recent positions: with
    ``cache_update_index`` the cache's ``L`` slots hold positions ``t - L, ..., t - 1`` (``t`` the first
    query's; slots of negative positions are masked), the new keys and values are appended after them,
    attention reads the ``L + Tq`` keys, and the last ``L`` become the new cache.

    Score biases (``score_bias``): positions enter as a term added to the scaled scores before the
    mask and the softmax, ``e_ij = q_i k_j^T / sqrt(d_k) + b_ij``, the hook of Shaw et al. 2018
    (``relative``), T5 (``t5``) and ALiBi (``alibi``). ``score_bias(queries, keys, start_index=s,
    key_start_index=r)`` gets the projected queries as they enter the scores (times the scale)
    ``[B, H, Tq, d_k]`` and the keys ``[B, H, Tv, d_k]`` (heads repeated), query ``i`` at position
    ``s + i`` and key ``j`` at ``r + j`` (``s = cache_update_index`` or 0; ``r = 0``, or ``s - L`` with
    a rolling cache), and returns ``b`` ``[1 or B, H, Tq, Tv]``. If it also has a method
    ``value_term(weights, start_index=s, key_start_index=r)`` (Shaw's ``a^V``), the output of head
    ``h`` becomes ``z_i = sum_j alpha_ij (v_j + a^V_ij)``: that method returns the second sum,
    ``[B, H, Tq, d_v]``, from the weights after dropout.

    The decoding cache, for subclasses (the efficient attentions of ``zoo.attention`` keep this call
    signature): ``initial_cache(batch_size, max_length, dtype)`` returns the layer's empty decoding cache
    as a tuple of tensors with the batch first (here zero keys and values ``[B, H_kv, L, d]``,
    ``L = max_length``, or ``W`` with a window); ``call(..., cache=that tuple, cache_update_index=t)``
    returns the updated tuple last. A subclass may keep any state of fixed shape (a linear
    attention's running sums); the Transformer builds its decoder state from ``initial_cache`` and
    reorders it along the batch in beam search, never reading inside.

    Differences from ``keras.layers.MultiHeadAttention``: a query with nothing to attend to
    gives a 0 output row, where the Keras layer gives a nonzero row (all keys masked) or
    computes the row as if unmasked (``query_mask``); the causal mask is aligned bottom-right
    (``Tq < Tv`` means the queries are the last ``Tq`` positions), as Keras when ``Tq == Tv``;
    ``output_dim`` is Keras' ``output_shape`` for one feature axis.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``H`` heads, ``D`` model
    features, ``d_k``/``d_v`` per-head key/value sizes, ``L`` cache length.
    Cost: projections ``O(B (Tq + Tv) D H d_k)``, scores ``O(B H Tq Tv d_k)`` time and
    ``O(B H Tq Tv)`` memory.

    Args:
        num_heads: positive int, the number of heads ``H``.
        key_dim: positive int or None, per-head query/key size ``d_k``; None means
            ``max(1, Dq // num_heads)`` (``d_k = d_model / h`` in the paper).
        value_dim: positive int or None, per-head value size ``d_v``; None means ``key_dim``.
        output_dim: positive int or None, the output feature size; None means the query's.
        use_bias: bool, biases in the four projections.
        scoring: per-head score function, ``"scaled_dot"`` or ``"dot"``.
        dropout: float in [0, 1), dropout rate on the attention weights in training.
        num_kv_heads: positive int dividing ``num_heads``, or None (= ``num_heads``): the key and
            value heads ``H_kv`` (1: multi-query attention).
        sliding_window: positive int ``W`` or None (full attention): keys with ``|i - j| < W`` only.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        query: ``[B, Tq, Dq]``.
        value: ``[B, Tv, Dv]`` (ignored with a cache and no ``cache_update_index``).
        key: optional ``[B, Tv, Dk]``; defaults to ``value``.
        query_mask, value_mask, key_mask, attention_mask, use_causal_mask: as ``BaseAttention``;
            with a cache, the keys are its ``L`` slots, and with ``cache_update_index`` the causal
            mask places the queries at ``cache_update_index, cache_update_index + 1, ...``.
        cache: optional ``(keys, values)``, each ``[B, H_kv, L, d]`` (``initial_cache``).
        cache_update_index: optional int (or scalar int tensor), where the new keys/values go.
        rotary: optional position encoding of the projected queries and keys (the
            ``RotaryPositionEmbedding`` of RoFormer, Su et al. 2021), called as
            ``rotary(x, start_index=..., sequence_axis=2)``; positions count from
            ``cache_update_index`` (0 without one).
        score_bias: optional callable (a position layer: ``RelativePositionEmbedding``,
            ``T5PositionBias``, ``AlibiPositionBias``) giving a bias ``[1 or B, H, Tq, Tv]`` added to the
            scaled scores, and optionally a value term; see above.
        return_attention_scores: bool, also return the weights.
        training: bool, dropout on the weights when True.

    Returns:
        ``output [B, Tq, D_out]``; then ``weights [B, H, Tq, Tv]`` (after softmax, before dropout)
        with ``return_attention_scores=True``; then the cache when one is given: a tuple of those.

    Example:
        >>> import numpy as np
        >>> layer = MultiHeadAttention(num_heads=2, key_dim=3)
        >>> out, w = layer(np.ones((2, 4, 6)), np.ones((2, 5, 8)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape)
        ((2, 4, 6), (2, 2, 4, 5))

    References:
        Vaswani et al. Attention Is All You Need. NeurIPS 2017, sec. 3.2.
        https://arxiv.org/abs/1706.03762
        Ainslie et al. GQA: Training Generalized Multi-Query Transformer Models from Multi-Head
        Checkpoints. EMNLP 2023. https://arxiv.org/abs/2305.13245
        Shazeer. Fast Transformer Decoding: One Write-Head is All You Need. 2019.
        https://arxiv.org/abs/1911.02150
        Beltagy, Peters, Cohan. Longformer: The Long-Document Transformer. 2020, sec. 3.1.
        https://arxiv.org/abs/2004.05150
        Shaw, Uszkoreit, Vaswani. Self-Attention with Relative Position Representations. NAACL 2018
        (the score-bias and value-term hook).
        keras-hub's ``CachedMultiHeadAttention`` (the cache's call convention).
    """

    def __init__(self, num_heads=2, key_dim=None, value_dim=None, output_dim=None, use_bias=True,
                 scoring="scaled_dot", dropout=0.0, num_kv_heads=None, sliding_window=None, **kwargs):
        super().__init__(dropout=dropout, **kwargs)
        self.num_heads = checks.positive_int("num_heads", num_heads)
        self.num_kv_heads = checks.positive_int("num_kv_heads", num_kv_heads, allow_none=True)
        if num_kv_heads is not None and num_heads % num_kv_heads:
            raise checks.invalid("num_kv_heads", f"a divisor of num_heads={num_heads}", num_kv_heads)
        self.sliding_window = checks.positive_int("sliding_window", sliding_window, allow_none=True)
        self.key_dim = checks.positive_int("key_dim", key_dim, allow_none=True)
        self.value_dim = checks.positive_int("value_dim", value_dim, allow_none=True)
        self.output_dim = checks.positive_int("output_dim", output_dim, allow_none=True)
        self.use_bias = checks.boolean("use_bias", use_bias)
        self.scoring = checks.choice("scoring", scoring, SCORINGS)

    def _dense(self, equation, output_shape, bias_axes, name):
        dense = keras.layers.EinsumDense(equation, output_shape=output_shape,
                                         bias_axes=bias_axes if self.use_bias else None,
                                         name=name, dtype=self.dtype_policy)
        dense.supports_masking = True  # inputs may carry Keras masks; this layer applies them itself
        return dense

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        self.head_key_dim = self.key_dim or max(1, query_shape[-1] // self.num_heads)
        self.head_value_dim = self.value_dim or self.head_key_dim
        super().build(query_shape, value_shape, key_shape)  # build_scoring + weights dropout
        self.value_dense = self._dense("abc,cde->abde", (None, self.kv_heads, self.head_value_dim), "de",
                                       "value")
        self.value_dense.build(value_shape)
        self.output_dense = self._dense("abcd,cde->abe", (None, self.output_dim or query_shape[-1]), "e",
                                        "attention_output")
        self.output_dense.build((query_shape[0], query_shape[1], self.num_heads, self.head_value_dim))

    def build_scoring(self, query_shape, key_shape):
        self.query_dense = self._dense("abc,cde->abde", (None, self.num_heads, self.head_key_dim), "de", "query")
        self.query_dense.build(query_shape)
        self.key_dense = self._dense("abc,cde->abde", (None, self.kv_heads, self.head_key_dim), "de", "key")
        self.key_dense.build(key_shape)

    @property
    def kv_heads(self):
        """``H_kv``, the key and value heads (``num_kv_heads``, or ``num_heads``)."""
        return self.num_kv_heads or self.num_heads

    def share_heads(self, x):
        """``[B, H_kv, T, d]`` -> ``[B, H, T, d]``: each key/value head repeated for its ``G = H / H_kv``
        query heads (GQA's groups; the identity without shared heads)."""
        groups = self.num_heads // self.kv_heads
        return x if groups == 1 else ops.repeat(x, groups, axis=1)

    def initial_cache(self, batch_size, max_length, dtype=None):
        """The empty decoding cache: zero keys and values ``[B, H_kv, L, d]``, ``L = max_length``, or the
        rolling ``W`` slots with a sliding window. A subclass with another state overrides this."""
        length = max_length if self.sliding_window is None else self.sliding_window
        dtype = dtype or self.compute_dtype
        return (ops.zeros((batch_size, self.kv_heads, length, self.head_key_dim), dtype=dtype),
                ops.zeros((batch_size, self.kv_heads, length, self.head_value_dim), dtype=dtype))

    def split_heads(self, x):
        """``[B, T, H, d]`` (a projection) -> ``[B, H, T, d]``: each head's positions as one matrix."""
        return ops.transpose(x, (0, 2, 1, 3))

    def merge_heads(self, heads):
        """``[B, H, T, d]`` -> ``[B, T, H, d]``, what ``W^O`` (``output_dense``) takes: ``Concat(heads)``."""
        return ops.transpose(heads, (0, 2, 1, 3))

    def prepare_key(self, key):
        """``K W^K``, heads first ``[B, H, Tv, d_k]``."""
        return self.split_heads(self.key_dense(key))

    def prepare(self, value, key=None):
        """``(K W^K, V W^V)``, each heads first ``[B, H, Tv, d]``: the memory's projections, once per
        source (``key`` defaults to ``value``). It is what ``call`` takes as ``cache``."""
        return self.prepare_key(value if key is None else key), self.split_heads(self.value_dense(value))

    def score(self, query, prepared_key):
        """``Q W^Q (K W^K)^T / sqrt(d_k)`` of every head: ``[B, H, Tq, Tv]``."""
        scores = ops.matmul(self.split_heads(self.query_dense(query)), ops.swapaxes(prepared_key, -1, -2))
        return scores * ops.cast(self.scale, scores.dtype)

    @property
    def scale(self):
        """``1 / sqrt(d_k)`` for ``scaled_dot`` (sec. 3.2.1: keeps the dot products' variance at 1), 1 for ``dot``."""
        return 1.0 / math.sqrt(self.head_key_dim) if self.scoring == "scaled_dot" else 1.0

    @kernels.replaceable
    def attention(self, queries, keys, values, mask=None, training=None, bias=None, value_term=None):
        """Eq. 1 on every head at once: ``softmax(Q K^T / sqrt(d_k)) V``, with ``queries [B, H, Tq, d_k]``,
        ``keys [B, H, Tv, d_k]``, ``values [B, H, Tv, d_v]`` (projected), ``mask`` bool broadcastable to
        ``[B, Tq, Tv]`` (True = attend) or None; dropout on the weights in training. ``bias``: a score
        bias ``[1 or B, H, Tq, Tv]`` added before the mask; ``value_term(dropped weights)``: a term added
        to the heads (Shaw's ``sum_j alpha_ij a^V_ij``). Returns ``(heads [B, H, Tq, d_v], weights
        [B, H, Tq, Tv])``."""
        scores = ops.matmul(queries, ops.swapaxes(keys, -1, -2)) * ops.cast(self.scale, queries.dtype)
        if bias is not None:  # positions as a bias on the scores: e_ij + b_ij
            scores = scores + ops.cast(bias, scores.dtype)
        head_mask = None if mask is None else ops.expand_dims(ops.cast(mask, "bool"), 1)  # the same for every head
        weights = masked_softmax(scores, head_mask)
        dropped = self.dropout_layer(weights, training=training) if self.dropout > 0 else weights
        heads = ops.matmul(dropped, values)
        if value_term is not None:
            heads = heads + ops.cast(value_term(dropped), heads.dtype)
        return heads, weights

    def rotate(self, rotary, x, start):
        """Rotary positions on heads ``x [B, H, T, d]``, the first at position ``start``."""
        return rotary(x, start_index=start, sequence_axis=2)

    @staticmethod
    def refuse_value_term(layer_name, score_bias, why=""):
        """Raises, naming ``layer_name`` and ``why``, for a score bias with a value term (relative:
        Shaw's ``sum_j alpha_ij a^V_ij``), which a layer without one weight matrix to hand the term
        (differential's two maps, memory_efficient's blocks) cannot add."""
        if score_bias is not None and hasattr(score_bias, "value_term"):
            raise ValueError(f"{layer_name} takes a score bias (t5, alibi) but not one with a value term "
                             f"(relative){why}. Received: {score_bias}")

    def project_heads(self, query, value, key=None, cache=None, cache_update_index=None, rotary=None):
        """``Q W^Q``, ``K W^K``, ``V W^V``, heads first, positions applied: ``(queries [B, H, Tq, d_k],
        keys [B, H, Tv, d_k], values [B, H, Tv, d_v], cache, start, key_start)``. The keys and values
        are ``cache`` as it is (a memory projected once, ``prepare``), or projected here and, with a
        ``cache``, written into it at ``cache_update_index`` (with a sliding window, the rolling
        cache's ``L`` positions before); each key-value head then serves its query heads (GQA).
        ``start``, ``key_start``: the positions of the first query and of the first key."""
        if cache_update_index is not None and cache is None:
            raise ValueError("`cache_update_index` needs a `cache` to write into. "
                             f"Received: cache=None, cache_update_index={cache_update_index}")
        start = 0 if cache_update_index is None else cache_update_index  # the queries' first position
        key_start = 0  # the keys' first position
        queries = self.split_heads(self.query_dense(query))  # Q W^Q: [B, H, Tq, d_k]
        if cache is not None and cache_update_index is None:  # a memory projected once (``prepare``)
            keys, values = cache
        else:
            keys, values = self.prepare(value, key)  # K W^K, V W^V: [B, H_kv, Tv, d]
            if rotary is not None:
                keys = self.rotate(rotary, keys, start)
            if cache is not None and self.sliding_window is not None:  # rolling: the L positions before
                length = cache[0].shape[2]
                keys = ops.concatenate([ops.cast(cache[0], keys.dtype), keys], axis=2)
                values = ops.concatenate([ops.cast(cache[1], values.dtype), values], axis=2)
                cache = (keys[:, :, -length:], values[:, :, -length:])
                key_start = start - length
            elif cache is not None:  # written at their positions; the cache keeps its length L
                keys = write_positions(cache[0], keys, cache_update_index)
                values = write_positions(cache[1], values, cache_update_index)
                cache = (keys, values)
        if rotary is not None:
            queries = self.rotate(rotary, queries, start)
        keys, values = self.share_heads(keys), self.share_heads(values)  # [B, H, Tv, d]
        return queries, keys, values, cache, start, key_start

    @staticmethod
    def returned(output, weights, cache, return_attention_scores):
        """What ``call`` returns: ``output``, then the weights if asked for, then the cache if one was given."""
        results = (output,) + ((weights,) if return_attention_scores else ()) + ((cache,) if cache is not None else ())
        return results[0] if len(results) == 1 else results

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             use_causal_mask=False, cache=None, cache_update_index=None, rotary=None, score_bias=None,
             return_attention_scores=False, training=None):
        queries, keys, values, cache, start, key_start = self.project_heads(query, value, key, cache,
                                                                            cache_update_index, rotary)
        if self.sliding_window is not None:
            band = self.window_mask(ops.shape(queries)[2], ops.shape(keys)[2], start, key_start)
            attention_mask = band if attention_mask is None else ops.logical_and(
                ops.cast(attention_mask, "bool"), band)
        bias = value_term = None
        if score_bias is not None:
            positions = {"start_index": start, "key_start_index": key_start}
            bias = score_bias(queries * ops.cast(self.scale, queries.dtype), keys, **positions)
            if hasattr(score_bias, "value_term"):
                def value_term(weights):
                    return score_bias.value_term(weights, **positions)
        mask = self.combine_masks(query, keys, query_mask, value_mask, key_mask, attention_mask, use_causal_mask,
                                  query_start=None if cache_update_index is None else start - key_start)
        heads, weights = self.attention(queries, keys, values, mask, training=training, bias=bias,
                                        value_term=value_term)
        output = self.output_dense(self.merge_heads(heads))  # Concat(head_1, ..., head_h) W^O
        if mask is not None:  # nothing to attend to -> 0, not the output bias
            output = output * ops.cast(ops.expand_dims(ops.any(mask, axis=-1), -1), output.dtype)
        return self.returned(output, weights, cache, return_attention_scores)

    def window_mask(self, tq, tv, start=0, key_start=0):
        """``[1, Tq, Tv]`` bool: query ``i`` (position ``start + i``) sees key ``j`` (position
        ``key_start + j``) when ``|i - j| < W`` and the key's position is not negative (an empty slot of
        the rolling cache)."""
        rows = ops.expand_dims(ops.arange(tq) + start, 1)
        cols = ops.expand_dims(ops.arange(tv) + key_start, 0)
        return ops.expand_dims(ops.logical_and(ops.abs(rows - cols) < self.sliding_window, cols >= 0), 0)

    def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None):
        """``call`` over a memory prepared once: ``prepare``'s ``(keys, values)``, or ``prepare_key``'s keys
        (then the values are projected here); ``mask`` is ``[B, Tq, Tv]``."""
        if not isinstance(prepared_key, (tuple, list)):
            prepared_key = (prepared_key, self.split_heads(self.value_dense(value)))
        results = self.call(query, value, attention_mask=mask, cache=tuple(prepared_key),
                            return_attention_scores=return_attention_scores, training=training)
        return results[:2] if return_attention_scores else results[0]

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        return (*query_shape[:-1], self.output_dim or query_shape[-1])

    def compute_output_spec(self, query, value, key=None, *, return_attention_scores=False, **kwargs):
        output = keras.KerasTensor(self.compute_output_shape(query.shape, value.shape), dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        scores = (query.shape[0], self.num_heads, query.shape[-2], value.shape[-2])
        return output, keras.KerasTensor(scores, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "key_dim": self.key_dim, "value_dim": self.value_dim,
                       "output_dim": self.output_dim, "use_bias": self.use_bias, "scoring": self.scoring,
                       "num_kv_heads": self.num_kv_heads, "sliding_window": self.sliding_window})
        return config
