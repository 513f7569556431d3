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
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        query: ``[B, Tq, Dq]``.
        value: ``[B, Tv, Dv]`` (ignored with a cache and no ``cache_update_index``).
        key: optional ``[B, Tv, Dk]``; defaults to ``value``.
        query_mask, value_mask, key_mask, attention_mask, use_causal_mask: as ``BaseAttention``;
            with a cache, the keys are its ``L`` slots, and with ``cache_update_index`` the causal
            mask places the queries at ``cache_update_index, cache_update_index + 1, ...``.
        cache: optional ``(keys, values)``, each ``[B, H, L, d]``.
        cache_update_index: optional int (or scalar int tensor), where the new keys/values go.
        rotary: optional position encoding of the projected queries and keys (the
            ``RotaryPositionEmbedding`` of RoFormer, Su et al. 2021), called as
            ``rotary(x, start_index=..., sequence_axis=2)``; positions count from
            ``cache_update_index`` (0 without one).
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
        keras-hub's ``CachedMultiHeadAttention`` (the cache's call convention).
    """

    def __init__(self, num_heads=2, key_dim=None, value_dim=None, output_dim=None, use_bias=True,
                 scoring="scaled_dot", dropout=0.0, **kwargs):
        super().__init__(dropout=dropout, **kwargs)
        self.num_heads = checks.positive_int("num_heads", num_heads)
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
        self.value_dense = self._dense("abc,cde->abde", (None, self.num_heads, self.head_value_dim), "de",
                                       "value")
        self.value_dense.build(value_shape)
        self.output_dense = self._dense("abcd,cde->abe", (None, self.output_dim or query_shape[-1]), "e",
                                        "attention_output")
        self.output_dense.build((query_shape[0], query_shape[1], self.num_heads, self.head_value_dim))

    def build_scoring(self, query_shape, key_shape):
        shape = (None, self.num_heads, self.head_key_dim)
        self.query_dense = self._dense("abc,cde->abde", shape, "de", "query")
        self.query_dense.build(query_shape)
        self.key_dense = self._dense("abc,cde->abde", shape, "de", "key")
        self.key_dense.build(key_shape)

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
    def attention(self, queries, keys, values, mask=None, training=None):
        """Eq. 1 on every head at once: ``softmax(Q K^T / sqrt(d_k)) V``, with ``queries [B, H, Tq, d_k]``,
        ``keys [B, H, Tv, d_k]``, ``values [B, H, Tv, d_v]`` (projected), ``mask`` bool broadcastable to
        ``[B, Tq, Tv]`` (True = attend) or None; dropout on the weights in training. Returns
        ``(heads [B, H, Tq, d_v], weights [B, H, Tq, Tv])``."""
        scores = ops.matmul(queries, ops.swapaxes(keys, -1, -2)) * ops.cast(self.scale, queries.dtype)
        head_mask = None if mask is None else ops.expand_dims(ops.cast(mask, "bool"), 1)  # the same for every head
        weights = masked_softmax(scores, head_mask)
        dropped = self.dropout_layer(weights, training=training) if self.dropout > 0 else weights
        return ops.matmul(dropped, values), weights

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             use_causal_mask=False, cache=None, cache_update_index=None, rotary=None, return_attention_scores=False,
             training=None):
        if cache_update_index is not None and cache is None:
            raise ValueError("`cache_update_index` needs a `cache` to write into. "
                             f"Received: cache=None, cache_update_index={cache_update_index}")
        start = 0 if cache_update_index is None else cache_update_index  # the queries' first position
        queries = self.split_heads(self.query_dense(query))  # Q W^Q: [B, H, Tq, d_k]
        if cache is not None and cache_update_index is None:  # a memory projected once (``prepare``)
            keys, values = cache
        else:
            keys, values = self.prepare(value, key)  # K W^K, V W^V: [B, H, Tv, d]
            if rotary is not None:
                keys = rotary(keys, start_index=start, sequence_axis=2)
            if cache is not None:  # written at their positions; the cache keeps its length L
                keys = write_positions(cache[0], keys, cache_update_index)
                values = write_positions(cache[1], values, cache_update_index)
                cache = (keys, values)
        if rotary is not None:
            queries = rotary(queries, start_index=start, sequence_axis=2)
        mask = self.combine_masks(query, keys, query_mask, value_mask, key_mask, attention_mask, use_causal_mask,
                                  query_start=cache_update_index)
        heads, weights = self.attention(queries, keys, values, mask, training=training)
        output = self.output_dense(self.merge_heads(heads))  # Concat(head_1, ..., head_h) W^O
        if mask is not None:  # nothing to attend to -> 0, not the output bias
            output = output * ops.cast(ops.expand_dims(ops.any(mask, axis=-1), -1), output.dtype)
        results = (output,) + ((weights,) if return_attention_scores else ()) + ((cache,) if cache is not None else ())
        return results[0] if len(results) == 1 else results

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
                       "output_dim": self.output_dim, "use_bias": self.use_bias, "scoring": self.scoring})
        return config
