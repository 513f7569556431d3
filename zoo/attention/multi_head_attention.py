"""Multi-head attention, written on ``BaseAttention``."""

import math

import keras
from keras import ops

from zoo import checks
from zoo.attention import _products
from zoo.attention.base_attention import BaseAttention, move_axes, register_attention

SCORINGS = ("scaled_dot", "dot")


def heads_major(x, narrow=False):
    """``[B, T, H, d]`` <-> ``[B, H, T, d]`` (the swap is its own inverse). With one step (or one
    head) the swap moves no data, so it is a reshape, not a transpose: a decoder's every step.
    ``narrow``: TensorFlow's own transpose (``move_axes``)."""
    if x.shape[1] == 1 or x.shape[2] == 1:
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[2], shape[1], shape[3]))
    return move_axes(x, (0, 2, 1, 3), narrow)


@register_attention("multi_head")
@keras.saving.register_keras_serializable(package="zoo")
class MultiHeadAttention(BaseAttention):
    """Multi-head attention of Vaswani et al. (2017) with per-head projections.

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O``,
    ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)`` (Vaswani et al. 2017, sec. 3.2.2), with
    ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` (eq. 1) for ``scoring="scaled_dot"``
    or ``softmax(Q K^T) V`` for ``scoring="dot"``.

    The projections have the layout of ``keras.layers.MultiHeadAttention`` (kernels
    ``[D, H, d_k]``, ``[H, d_v, D_out]``, biases ``[H, d_k]``, ``[D_out]``), so weights copy
    across and the two layers give the same numbers. ``prepare`` computes ``K W^K`` (and
    the ``1/sqrt(d_k)`` factor) and ``V W^V`` once per source sequence, so a decoder's ``attend``
    per step projects only its query; ``attend_heads`` and ``write_cache`` serve a decoder that
    projects (and rotates) its own queries and keys and caches them (the Transformer).

    Differences from ``keras.layers.MultiHeadAttention``: a query with nothing to attend to
    gives a 0 output row, where the Keras layer gives a nonzero row (all keys masked) or
    computes the row as if unmasked (``query_mask``); the causal mask is aligned bottom-right
    (``Tq < Tv`` means the queries are the last ``Tq`` positions), as Keras when ``Tq == Tv``;
    ``output_dim`` is Keras' ``output_shape`` for one feature axis.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``H`` heads, ``D`` model
    features, ``d_k``/``d_v`` per-head key/value sizes.
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
        See ``BaseAttention``: ``(query [B, Tq, Dq], value [B, Tv, Dv], key=None [B, Tv, Dk],
        *, query_mask, value_mask, attention_mask, use_causal_mask, return_attention_scores,
        training)``.

    Returns:
        ``output [B, Tq, D_out]``, or ``(output, weights [B, H, Tq, Tv])`` with
        ``return_attention_scores=True`` (after softmax, before dropout).

    Example:
        >>> import numpy as np
        >>> layer = MultiHeadAttention(num_heads=2, key_dim=3)
        >>> out, w = layer(np.ones((2, 4, 6)), np.ones((2, 5, 8)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape)
        ((2, 4, 6), (2, 2, 4, 5))

    References:
        Vaswani et al. Attention Is All You Need. NeurIPS 2017, sec. 3.2.2.
        https://arxiv.org/abs/1706.03762
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

    def prepare_key(self, key):
        key = self.key_dense(key)  # K W^K: [B, Tv, H, d_k]
        if self.scoring == "scaled_dot":
            key = key * ops.cast(self._key_scale, key.dtype)
        return key

    @property
    def _narrow(self):
        """Heads narrow enough (``H d <= NARROW_HEADS``) to move between layouts by TensorFlow's own
        transpose (``move_axes``)."""
        return self.num_heads * max(self.head_key_dim, self.head_value_dim) <= _products.NARROW_HEADS

    @property
    def _key_scale(self):
        """``1 / sqrt(d_k)`` of ``scaled_dot``, applied to the keys once (``prepare_key``, ``project``)."""
        return 1.0 / math.sqrt(self.head_key_dim)

    def project(self, x, parts=("query", "key", "value"), heads_first=False, to_heads=None):
        """``x [B, T, D]`` through several of the projections at once: ``[Q W^Q, K W^K / sqrt(d_k), V W^V]``
        for ``parts`` (a subset of ``"query"``, ``"key"``, ``"value"``, in that order), each
        ``[B, T, H, d]``, the values of the separate projections (and of ``prepare_key``'s scaling).

        Self-attention projects one input three times: one product with the kernels side by side
        (``[D, H (d_k + d_k + d_v)]``) is one large matmul and one bias add instead of three of each,
        and one gradient product each way; the keys' ``1 / sqrt(d_k)`` is folded into their kernel
        and bias (``D H d_k`` multiplications, not ``B T H d_k``).

        ``heads_first``: each ``[B, H, T, d]`` (``attend_heads``' operands), parts of one width moved
        there by one transpose of ``[B, T, parts, H, d]``, not one per part. ``to_heads(joined, parts,
        heads)`` maps the joined projections of rows (``[N, parts H d]``, parts of one width) to
        ``[parts, B, H, T, d]`` in one step (the Transformer's real rows: one gather, where a scatter
        to the grid and a transpose moved every value twice); each part is ``[B, H, T, d]``."""
        denses = [{"query": self.query_dense, "key": self.key_dense, "value": self.value_dense}[p] for p in parts]
        dtype = self.compute_dtype
        kernels, biases, sizes = [], [], []
        for part, dense in zip(parts, denses):
            kernel = ops.cast(dense.kernel, dtype)
            width = kernel.shape[1] * kernel.shape[2]
            kernel = ops.reshape(kernel, (kernel.shape[0], width))
            bias = ops.reshape(ops.cast(dense.bias, dtype), (width,)) if self.use_bias else None
            if part == "key" and self.scoring == "scaled_dot":
                scale = ops.cast(self._key_scale, dtype)
                kernel, bias = kernel * scale, None if bias is None else bias * scale
            kernels.append(kernel)
            biases.append(bias)
            sizes.append(kernel.shape[1])
        joined = ops.matmul(x, kernels[0] if len(kernels) == 1 else ops.concatenate(kernels, axis=1))
        if self.use_bias:
            joined = joined + (biases[0] if len(biases) == 1 else ops.concatenate(biases, axis=0))
        if to_heads is not None:
            if len(set(sizes)) != 1:
                raise ValueError(f"MultiHeadAttention.project(to_heads=...) needs parts of one width. Received: "
                                 f"parts={tuple(parts)} of widths {tuple(sizes)} (key_dim, value_dim)")
            return ops.unstack(to_heads(joined, len(sizes), self.num_heads), axis=0)
        shape = ops.shape(joined)[:-1]
        if heads_first and len(set(sizes)) == 1 and len(shape) == 2:
            width = sizes[0] // self.num_heads
            joined = ops.reshape(joined, (*shape, len(sizes), self.num_heads, width))
            return ops.unstack(move_axes(joined, (2, 0, 3, 1, 4), self._narrow), axis=0)
        pieces = ops.split(joined, [sum(sizes[:i + 1]) for i in range(len(sizes) - 1)], axis=-1) \
            if len(sizes) > 1 else [joined]
        split = [ops.reshape(piece, (*shape, self.num_heads, size // self.num_heads)) for piece, size in zip(pieces, sizes)]
        return [heads_major(piece, self._narrow) for piece in split] if heads_first else split

    def prepare(self, value, key=None, heads_first=False, to_heads=None):
        """``(K W^K [/ sqrt(d_k)], V W^V)``: both projections of the memory, once per source,
        ``[B, Tv, H, d]``; with ``heads_first`` (for ``attend_heads``) ``[B, H, Tv, d]``, the operands
        of the two products as they are. ``to_heads``: ``value`` is rows of the memory, mapped heads
        first as ``project``'s (one input only)."""
        if key is None:  # one input: both projections in one product (``project``)
            return tuple(self.project(value, ("key", "value"), heads_first=heads_first, to_heads=to_heads))
        keys, values = self.prepare_key(key), self.value_dense(value)
        if heads_first:
            return heads_major(keys, self._narrow), heads_major(values, self._narrow)
        return keys, values

    def score(self, query, prepared_key):
        return ops.einsum("bqhd,bkhd->bhqk", self.query_dense(query), prepared_key)  # [B, H, Tq, Tv]

    def attend_heads(self, queries, keys, values, mask=None, training=None, heads_first=False, queries_first=False,
                     from_heads=None):
        """Eq. 1 on projected heads: ``queries [B, Tq, H, d_k]`` (``Q W^Q``), ``keys [B, Tv, H, d_k]``
        and ``values [B, Tv, H, d_v]`` (from ``prepare``, or a decoder's cache), ``mask`` bool
        broadcastable to ``[B, Tq, Tv]``. Returns ``(Concat(heads) W^O [B, Tq, D_out], weights
        [B, H, Tq, Tv])``. The Transformer calls it with rotated queries/keys and cached keys/values.

        ``heads_first=True`` takes ``keys [B, H, Tv, d_k]`` and ``values [B, H, Tv, d_v]`` (``prepare``'s
        with ``heads_first``, a decoder's cache): the two products are batched matmuls with no
        transposes of them, which a decoder would otherwise pay at every step for its cache and the
        source's keys and values.
        ``queries_first=True`` takes the queries heads first too (``[B, H, Tq, d_k]``, from ``project``
        with ``heads_first``). ``from_heads`` maps the heads as the products give them, ``[B, H, Tq,
        d_v]``, to rows ``[N, H, d_v]`` before ``W^O`` (the Transformer's real rows: one gather, no
        transpose, and ``W^O`` on the rows only)."""
        if not queries_first:
            queries = heads_major(queries, self._narrow)
        if not heads_first:
            keys, values = heads_major(keys, self._narrow), heads_major(values, self._narrow)
        head_mask = None if mask is None else ops.expand_dims(ops.cast(mask, "bool"), 1)  # [B, 1, Tq, Tv]
        small = _products.is_small(queries, keys)  # which kernels run the products (``_products``)
        weights = _products.attention_weights(queries, keys, head_mask, small)
        dropped = self.dropout_layer(weights, training=training) if self.dropout > 0 else weights
        heads = _products.weighted_values(dropped, values, small)  # [B, H, Tq, d_v]
        if from_heads is not None:
            return self.project_output(from_heads(heads)), weights
        return self.project_output(heads_major(heads, self._narrow)), weights  # [B, Tq, H, d_v]

    def project_output(self, heads):
        """``Concat(heads) W^O``: ``heads [B, Tq, H, d_v]`` (``output_dense``), or rows of heads
        ``[N, H, d_v]`` as one plain product (``[N, H d_v] @ [H d_v, D_out]``, what a Transformer's
        real rows take: no einsum bookkeeping for a batch axis of one)."""
        if len(heads.shape) == 4:
            return self.output_dense(heads)
        dense, dtype = self.output_dense, self.compute_dtype
        heads_in, head_dim, out_dim = dense.kernel.shape  # [H, d_v, D_out]
        kernel = ops.reshape(ops.cast(dense.kernel, dtype), (heads_in * head_dim, out_dim))
        out = ops.matmul(ops.reshape(heads, (-1, heads_in * head_dim)), kernel)
        return out + ops.cast(dense.bias, dtype) if self.use_bias else out

    @staticmethod
    def write_cache(cache_keys, cache_values, keys, values, step):
        """A decoder's key/value cache, keys and values ``[B, H, L, d]`` (for ``attend_heads(...,
        heads_first=True)``), with one position's ``keys``/``values`` ``[B, 1, H, d]`` written at slot
        ``step [B]``. Returns ``(cache_keys, cache_values, mask [B, 1, L])``, the mask True at the slots
        written so far (``<= step``); fixed shapes, so a ``tf.while_loop`` carries the cache (as
        keras-hub's ``CachedMultiHeadAttention``). The write is a scatter of ``B H`` rows of ``d``: a
        select of the new position over the whole cache reads and writes all ``L`` slots at every
        step (both caches of ``[16, 4, 64, 8]``: 73 us a step, the scatter 20; docs/performance.md)."""
        shape = ops.shape(cache_values)
        rows = shape[0] * shape[1]
        step = ops.cast(step, "int32")
        slot = ops.reshape(ops.broadcast_to(ops.expand_dims(step, 1), (shape[0], shape[1])), (rows,))
        index = ops.stack([ops.arange(rows, dtype="int32"), slot], axis=1)  # row b H + h of [B H, L, d]: slot step_b

        def write(cache, new):
            size = ops.shape(cache)
            flat = ops.reshape(cache, (rows, size[2], size[3]))
            new = ops.reshape(ops.cast(new, cache.dtype), (rows, size[3]))
            return ops.reshape(ops.scatter_update(flat, index, new), size)

        slots = ops.arange(shape[2], dtype="int32")[None, :]  # [1, L]
        return write(cache_keys, keys), write(cache_values, values), ops.expand_dims(slots <= step[:, None], 1)

    def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None):
        if isinstance(prepared_key, (tuple, list)):  # from ``prepare``: the values are projected already
            keys, values = prepared_key
        else:  # from ``prepare_key``: project the values here
            keys, values = prepared_key, self.value_dense(value)
        output, weights = self.attend_heads(self.query_dense(query), keys, values, mask, training=training)
        if mask is not None:  # nothing to attend to -> 0, not the output bias
            output = output * ops.cast(ops.expand_dims(ops.any(mask, axis=-1), -1), output.dtype)
        if return_attention_scores:
            return output, weights
        return output

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
