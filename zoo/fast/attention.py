"""The attention layers' CPU speed-ups: TensorFlow's own kernels for small products, softmaxes and
transposes, chosen by size, in place of oneDNN's; and multi-head attention's joined projections and
heads-first layouts, which the fast Transformer (``zoo.fast.transformer``) builds on.

Why: on x86, TensorFlow runs ``BatchMatMulV2`` (what ``matmul`` and ``einsum`` emit), ``Softmax``
and ``Transpose`` as oneDNN primitives by default, whose fixed cost per call is many times the
arithmetic of a small attention: d2l's sizes (``[64, 4, 9, 8]`` per operand) or one decoding step
(one query per head). ``BatchMatMulV3`` (the same product, with an output dtype), ``LogSoftmax`` and
a transpose of int32 bits are not rewritten to oneDNN: TensorFlow's own kernels run them. Measured
on the project's 2-core CPU (docs/performance.md, 2026-11-25), per product: ``[64, 4, 9, 8] x
[64, 4, 8, 9]`` 94 -> 49 us, one decoding query ``[64, 4, 1, 64] x [64, 4, 64, 64]`` 204 -> 75 us; but
where a head's product is large (``Tq Tk d_k`` of 20 x 20 x 64, the base size) oneDNN's kernel is
2-4x faster. So:

- one query per head (decoding steps): TensorFlow's kernels, and the softmax as ``exp(log_softmax)``
  (4 softmaxes of ``[16, 4, 1, 64]`` per step took a third of the small Transformer's decoding);
- ``Tq Tk d_k <= SMALL_WORK``: TensorFlow's kernels (decided at trace time where the lengths are
  static, else by a ``cond`` on the batch's lengths: a training step's batches vary);
- anything larger, another backend, or another dtype than float32 (oneDNN's bfloat16 is what makes
  ``mixed_bfloat16`` pay): the reference's ``keras.ops``.

The gradients of the small products are small products too (``tf.custom_gradient``). The heads'
moves between ``[B, T, H, d]`` and ``[B, H, T, d]`` take TensorFlow's own transpose for narrow heads
(``H d <= NARROW_HEADS``, d2l's sizes). Small Transformer training step (``python -m zoo.bench
sizes=[small]``): 1.21-1.26x -> 1.41-1.49x ``keras_transformer`` from these kernels.

Every function registered here is proven equal to its reference by ``tests/fast/test_attention.py``.
"""

import keras
import tensorflow as tf
from keras import ops

from zoo import kernels
from zoo.attention.base_attention import large_negative, masked_softmax
from zoo.kernels import replaces

SMALL_WORK = 8192  # Tq * Tk * d of one product at or below which TensorFlow's own kernels run
SMALL_SCORES = 512  # Tq * Tk of one softmax at or below which it runs as exp(log_softmax)
NARROW_HEADS = 64  # H * d at or below which the heads move between layouts by TensorFlow's own transpose


# -- TensorFlow's own kernels ---------------------------------------------------------------------
def exporting() -> bool:
    """Whether a SavedModel is being traced (``kernels.exporting()``). The kernels here then run without
    their hand-written gradients (an exported model is not differentiated), so the replacements built
    on them stay in force in exports, with no custom gradient in the graph."""
    return kernels.is_exporting()


def own_kernels(x) -> bool:
    """Whether TensorFlow's own kernels can stand in for oneDNN's for ``x``: float32 on TensorFlow."""
    return keras.backend.backend() == "tensorflow" and keras.backend.standardize_dtype(x.dtype) == "float32"


def product(a, b, adj_a=False, adj_b=False):
    """``a b`` (either transposed) by ``BatchMatMulV3``: TensorFlow's kernel, not oneDNN's."""
    return tf.raw_ops.BatchMatMulV3(x=a, y=b, adj_x=adj_a, adj_y=adj_b, Tout=a.dtype)


def small_scores(queries, keys):
    """``Q K^T`` with TensorFlow's kernel forward and backward (forward only when ``exporting()``)."""
    if exporting():
        return product(queries, keys, adj_b=True)

    @tf.custom_gradient
    def scores(q, k):
        def grad(g):  # dQ = G K, dK = G^T Q
            return product(g, k), product(g, q, adj_a=True)
        return product(q, k, adj_b=True), grad

    return scores(queries, keys)


def small_mix(weights, values):
    """``W V`` with TensorFlow's kernel forward and backward (forward only when ``exporting()``)."""
    if exporting():
        return product(weights, values)

    @tf.custom_gradient
    def mix(w, v):
        def grad(g):  # dW = G V^T, dV = W^T G
            return product(g, v, adj_b=True), product(w, g, adj_a=True)
        return product(w, v), grad

    return mix(weights, values)


def small_work(x, static, dynamic):
    """``Tq Tk d <= SMALL_WORK`` (or one query) from the static sizes ``(Tq, Tk, d)`` (any may be
    None: then ``dynamic()`` gives them as tensors and the answer is a scalar bool tensor); False
    wherever TensorFlow's own kernels are not in play (``own_kernels(x)``)."""
    if not own_kernels(x):
        return False
    if static[0] == 1:
        return True
    if None not in static:
        return static[0] * static[1] * static[2] <= SMALL_WORK
    if exporting():  # no cond in a SavedModel: grappler's cost model warns of its branches at every load
        return False
    tq, tk, d = [size if size is not None else tensor for size, tensor in zip(static, dynamic())]
    return tq * tk * d <= SMALL_WORK


def either(small, own, default):
    """``own()`` or ``default()`` as ``small`` (from ``small_work``) says: at trace time, or by a ``cond``."""
    if small is True:
        return own()
    if small is False:
        return default()
    return tf.cond(small, own, default)


def mix(weights, values, small=None):
    """``W V`` for ``weights [..., Tq, Tk]`` and ``values [..., Tk, d]``: on TensorFlow's own kernel,
    forward and backward, where ``small`` (by default ``small_work``), else ``keras.ops.matmul``.
    The alignment attentions' context product, forward and backward: ``[64, 1, 9] x [64, 9, 64]``
    (``bahdanau``'s step at d2l's sizes) 90 -> 31 us, ``[64, 1, 20] x [64, 20, 512]`` (base) 326 ->
    253 us; four queries at base, ``[64, 4, 20] x [64, 20, 512]``, 456 us on oneDNN against 1,110 on
    TensorFlow's kernel: oneDNN's."""
    if small is None:
        small = small_work(weights, (weights.shape[-2], weights.shape[-1], values.shape[-1]),
                           lambda: (ops.shape(weights)[-2], ops.shape(weights)[-1], ops.shape(values)[-1]))
    return either(small, lambda: small_mix(weights, values), lambda: ops.matmul(weights, values))


def small_softmax(scores, mask=None):
    """``masked_softmax`` over the last axis, for small scores: on TensorFlow in float32 as
    ``exp(log_softmax)``, which oneDNN does not take over (its ``Softmax`` primitive's fixed cost is
    most of a small one). Forward and backward, us: ``[64, 1, 9]`` 43 -> 29, ``[256, 1, 20]`` 62 -> 39,
    ``[64, 4, 9]`` 57 -> 34, ``[64, 9, 9]`` 77 -> 47, ``[64, 20, 20]`` 133 -> 107; but ``[64, 40, 40]``
    339 -> 435 and ``[64, 4, 200]`` 131 -> 199 (hence ``SMALL_SCORES``)."""
    if not own_kernels(scores):
        return masked_softmax(scores, mask)
    if mask is not None:
        scores = ops.where(mask, scores, ops.cast(large_negative(scores.dtype), scores.dtype))
    weights = tf.exp(tf.nn.log_softmax(scores))
    return weights if mask is None else weights * ops.cast(mask, weights.dtype)


def move_axes(x, perm, own_kernel=False):
    """``ops.transpose(x, perm)``; with ``own_kernel`` (float32 on TensorFlow) by TensorFlow's own kernel,
    forward and backward: the same bits moved as int32, which oneDNN does not take over. oneDNN's
    transpose pays a fixed cost many times the copy of a small one: in a loop, ``[64, 4, 9, 8]`` 46 ->
    14.5 us, ``[64, 9, 3, 4, 8]`` 66 -> 40 us (d2l's sizes); at ``[64, 4, 20, 64]`` the same, at ``[64,
    20, 3, 4, 64]`` 182 -> 205 us (hence attention heads with ``H d <= NARROW_HEADS`` only; the RNN
    layers' moves to time-major and back take it always: ``[64, 9, 96]`` 47 us -> under 5, ``[64, 20,
    768]`` 170 -> 137 us)."""
    if not own_kernel or not own_kernels(x) or exporting():
        return ops.transpose(x, perm)
    return int32_transpose(x, perm)


def int32_transpose(x, perm):
    """``tf.transpose(x, perm)`` of a float32 ``x`` on its bits as int32, forward and backward (the
    gradient is the inverse move): TensorFlow's own transpose kernel, which oneDNN does not take over
    (``move_axes`` here, the RNN layers' time-major moves in ``zoo.fast.rnn``)."""
    inverse = tuple(perm.index(axis) for axis in range(len(perm)))

    def moved_bits(t, order):
        return tf.bitcast(tf.transpose(tf.bitcast(t, tf.int32), order), t.dtype)

    if exporting():  # forward only: no custom gradient in a SavedModel
        return moved_bits(x, perm)

    @tf.custom_gradient
    def moved(t):
        return moved_bits(t, perm), lambda upstream: moved_bits(upstream, inverse)

    return moved(x)


# -- alignment attention ------------------------------------------------------------------------------
@replaces("zoo.attention.base_attention.BaseAttention.attend")
def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None):
    """``BaseAttention.attend`` with the softmax as ``small_softmax`` where ``Tq Tk <= SMALL_SCORES``
    (or one query) and the weighted sum by ``mix`` (TensorFlow's kernel where small). A sparse
    ``normalizer`` (sparsemax, entmax15) is the reference's own ``normalize_scores``."""
    scores = self.score(query, prepared_key)
    tq, tk = scores.shape[-2], scores.shape[-1]
    small = tq == 1 or (tq is not None and tk is not None and tq * tk <= SMALL_SCORES)
    if self.normalizer != "softmax":
        weights = self.normalize_scores(scores, mask)
    else:
        weights = small_softmax(scores, mask) if small else masked_softmax(scores, mask)
    dropped = self.dropout_layer(weights, training=training) if self.dropout > 0 else weights
    output = mix(ops.cast(dropped, value.dtype), value)
    if return_attention_scores:
        return output, weights
    return output


# -- multi-head attention -----------------------------------------------------------------------------
def is_small(queries, keys):
    """True, False, or (lengths known only at run time) a scalar bool tensor: whether one head's
    ``Q K^T`` (``queries [B, H, Tq, d]``, ``keys [B, H, Tk, d]``) is small enough for TensorFlow's
    own kernels."""
    return small_work(queries, (queries.shape[2], keys.shape[2], queries.shape[3]),
                      lambda: (ops.shape(queries)[2], ops.shape(keys)[2], ops.shape(queries)[3]))


def attention_weights(queries, keys, mask, small):
    """``softmax(Q K^T)`` (the queries carry the scale) for heads-first ``queries [B, H, Tq, d]`` and
    ``keys [B, H, Tk, d]``, ``mask`` bool broadcastable to ``[B, H, Tq, Tk]`` or None."""
    def default():
        return masked_softmax(ops.matmul(queries, ops.swapaxes(keys, -1, -2)), mask)

    if small is True and queries.shape[2] == 1:
        return small_softmax(small_scores(queries, keys), mask)
    return either(small, lambda: masked_softmax(small_scores(queries, keys), mask), default)


def narrow(layer):
    """Whether ``layer``'s heads move between layouts by TensorFlow's own transpose (``H d <= NARROW_HEADS``)."""
    return layer.num_heads * max(layer.head_key_dim, layer.head_value_dim) <= NARROW_HEADS


def heads_major(x, narrow_heads=False):
    """``[B, T, H, d]`` <-> ``[B, H, T, d]`` (the swap is its own inverse). With one step (or one
    head) the swap moves no data, so it is a reshape: a decoder's every step."""
    if x.shape[1] == 1 or x.shape[2] == 1:
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[2], shape[1], shape[3]))
    return move_axes(x, (0, 2, 1, 3), narrow_heads)


@replaces("zoo.attention.multi_head_attention.MultiHeadAttention.split_heads")
def split_heads(self, x):
    """``split_heads`` as a reshape for one step, by TensorFlow's own transpose for narrow heads."""
    return heads_major(x, narrow(self))


@replaces("zoo.attention.multi_head_attention.MultiHeadAttention.merge_heads")
def merge_heads(self, heads):
    """``merge_heads`` as ``split_heads``' (the swap is its own inverse)."""
    return heads_major(heads, narrow(self))


@replaces("zoo.attention.multi_head_attention.MultiHeadAttention.attention")
def attention(self, queries, keys, values, mask=None, training=None, bias=None, value_term=None):
    """Eq. 1 with the kernels chosen by size: the scale on the queries (``B H Tq d_k`` products, not
    ``B H Tq Tv``), the products and softmax on TensorFlow's own kernels where small. With a score bias
    or a value term (positions on the scores), the reference."""
    if bias is not None or value_term is not None:
        from zoo.attention.multi_head_attention import MultiHeadAttention

        return MultiHeadAttention.attention.reference(self, queries, keys, values, mask, training=training,
                                                      bias=bias, value_term=value_term)
    queries = queries * ops.cast(self.scale, queries.dtype)
    head_mask = None if mask is None else ops.expand_dims(ops.cast(mask, "bool"), 1)
    small = is_small(queries, keys)
    weights = attention_weights(queries, keys, head_mask, small)
    dropped = self.dropout_layer(weights, training=training) if self.dropout > 0 else weights
    return mix(dropped, values, small), weights


def project(layer, x, parts=("query", "key", "value"), heads_first=False, to_heads=None):
    """``x [B, T, D]`` (or rows ``[N, D]``) through several of ``layer``'s projections at once:
    ``[Q W^Q / sqrt(d_k), K W^K, V W^V]`` for ``parts`` (a subset of ``"query"``, ``"key"``, ``"value"``,
    in that order), each ``[B, T, H, d]``: the queries carry the scale of eq. 1.

    Self-attention projects one input three times: one product with the kernels side by side
    (``[D, H (d_k + d_k + d_v)]``) is one large matmul and one bias add instead of three of each,
    and one gradient product each way; the queries' ``1 / sqrt(d_k)`` is folded into their kernel
    and bias (``D H d_k`` multiplications, not ``B T H d_k``).

    ``heads_first``: each ``[B, H, T, d]``, parts of one width moved there by one transpose of
    ``[B, T, parts, H, d]``. ``to_heads(joined, parts, heads)`` maps the joined projections of rows
    (``[N, parts H d]``, parts of one width) to ``[parts, B, H, T, d]`` in one step (the fast
    Transformer's real rows: one gather); each part is then ``[B, H, T, d]``."""
    denses = [{"query": layer.query_dense, "key": layer.key_dense, "value": layer.value_dense}[p] for p in parts]
    dtype = layer.compute_dtype
    kernels, biases, sizes = [], [], []
    for part, dense in zip(parts, denses):
        kernel = ops.cast(dense.kernel, dtype)
        width = kernel.shape[1] * kernel.shape[2]
        kernel = ops.reshape(kernel, (kernel.shape[0], width))
        bias = ops.reshape(ops.cast(dense.bias, dtype), (width,)) if layer.use_bias else None
        if part == "query" and layer.scale != 1.0:
            scale = ops.cast(layer.scale, dtype)
            kernel, bias = kernel * scale, None if bias is None else bias * scale
        kernels.append(kernel)
        biases.append(bias)
        sizes.append(kernel.shape[1])
    joined = ops.matmul(x, kernels[0] if len(kernels) == 1 else ops.concatenate(kernels, axis=1))
    if layer.use_bias:
        joined = joined + (biases[0] if len(biases) == 1 else ops.concatenate(biases, axis=0))
    if to_heads is not None:
        if len(set(sizes)) != 1:
            raise ValueError(f"project(to_heads=...) needs parts of one width. Received: "
                             f"parts={tuple(parts)} of widths {tuple(sizes)} (key_dim, value_dim)")
        return ops.unstack(to_heads(joined, len(sizes), layer.num_heads), axis=0)
    shape = ops.shape(joined)[:-1]
    if heads_first and len(set(sizes)) == 1 and len(shape) == 2:
        width = sizes[0] // layer.num_heads
        joined = ops.reshape(joined, (*shape, len(sizes), layer.num_heads, width))
        return ops.unstack(move_axes(joined, (2, 0, 3, 1, 4), narrow(layer)), axis=0)
    pieces = ops.split(joined, [sum(sizes[:i + 1]) for i in range(len(sizes) - 1)], axis=-1) \
        if len(sizes) > 1 else [joined]
    split = [ops.reshape(piece, (*shape, layer.num_heads, size // layer.num_heads))
             for piece, size in zip(pieces, sizes)]
    return [heads_major(piece, narrow(layer)) for piece in split] if heads_first else split


def attend_heads(layer, queries, keys, values, mask=None, training=None, queries_first=False, from_heads=None):
    """Eq. 1 on projected heads: ``queries [B, Tq, H, d_k]`` (``project``'s, scaled), ``keys [B, H, Tv,
    d_k]`` and ``values [B, H, Tv, d_v]`` heads first (a cache, or ``project``'s with ``heads_first``),
    ``mask`` bool broadcastable to ``[B, Tq, Tv]``. Returns ``(Concat(heads) W^O [B, Tq, D_out],
    weights [B, H, Tq, Tv])``; no row is zeroed (the Transformer's queries always have a key).

    ``queries_first``: the queries are heads first too. ``from_heads`` maps the heads as the products
    give them, ``[B, H, Tq, d_v]``, to rows ``[N, H, d_v]`` before ``W^O`` (one gather, no transpose,
    and ``W^O`` on the rows only)."""
    if not queries_first:
        queries = heads_major(queries, narrow(layer))
    head_mask = None if mask is None else ops.expand_dims(ops.cast(mask, "bool"), 1)  # [B, 1, Tq, Tv]
    small = is_small(queries, keys)
    weights = attention_weights(queries, keys, head_mask, small)
    dropped = layer.dropout_layer(weights, training=training) if layer.dropout > 0 else weights
    heads = mix(dropped, values, small)  # [B, H, Tq, d_v]
    if from_heads is not None:
        return project_output(layer, from_heads(heads)), weights
    return project_output(layer, heads_major(heads, narrow(layer))), weights


def project_output(layer, heads):
    """``Concat(heads) W^O``: ``heads [B, Tq, H, d_v]`` (``output_dense``), or rows of heads
    ``[N, H, d_v]`` as one plain product (``[N, H d_v] @ [H d_v, D_out]``: no einsum bookkeeping)."""
    if len(heads.shape) == 4:
        return layer.output_dense(heads)
    dense, dtype = layer.output_dense, layer.compute_dtype
    heads_in, head_dim, out_dim = dense.kernel.shape  # [H, d_v, D_out]
    kernel = ops.reshape(ops.cast(dense.kernel, dtype), (heads_in * head_dim, out_dim))
    out = ops.matmul(ops.reshape(heads, (-1, heads_in * head_dim)), kernel)
    return out + ops.cast(dense.bias, dtype) if layer.use_bias else out


def write_cache(cache_keys, cache_values, keys, values, step):
    """A decoder's key/value cache, keys and values ``[B, H, L, d]``, with one position's
    ``keys``/``values`` ``[B, 1, H, d]`` written at slot ``step [B]``. Returns ``(cache_keys,
    cache_values, mask [B, 1, L])``, the mask True at the slots written so far (``<= step``). The
    write is a scatter of ``B H`` rows of ``d``: a select of the new position over the whole cache
    reads and writes all ``L`` slots at every step (both caches of ``[16, 4, 64, 8]``: 73 us a step,
    the scatter 20; docs/performance.md)."""
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



@replaces("zoo.attention.additive_attention.AdditiveAttention.score")
def additive_score(self, query, prepared_key):
    """``AdditiveAttention.score`` with ``v^T tanh(...)`` as one ``[B Tq Tv, U] x [U, 1]`` matmul: the
    einsum's kernel took 73 against 30 us forward and backward at d2l's ``[64, 1, 9, 32]``, 686 against
    488 us at ``[64, 4, 20, 256]``."""
    q = self.query_dense(query)
    hidden = ops.tanh(ops.expand_dims(q, -2) + ops.expand_dims(prepared_key, -3))  # [B, Tq, Tv, U]
    v = ops.expand_dims(ops.cast(self.scorer(), hidden.dtype), -1)
    scores = ops.matmul(ops.reshape(hidden, (-1, hidden.shape[-1])), v)
    return ops.reshape(scores, ops.shape(hidden)[:-1])
