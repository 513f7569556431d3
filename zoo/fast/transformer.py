"""The Transformer's CPU speed-ups (``zoo.models.self_attention.transformer``'s fast path): the training step's
position-wise work on the real (non-padding) positions only, gathered straight into the heads-first
layouts of attention (``_RealRows``, with gather gradients written by hand), the self-attention's three
projections as one product (``zoo.fast.attention.project``), and a decoding step on rows ``[B, D]``
with one-position heads maps, whose every projection is one plain matmul.

The fast path covers the Transformer of ``multi_head`` self-attention with as many key-value heads as
query heads, no window and no score bias (positions ``rotary``, ``sinusoidal``, ``learned``, ``none``);
a layer or model with any other option (``positions=relative|t5|alibi``, ``num_kv_heads``,
``attention_window``, ``attention=<another>``) runs the reference (``plain_block``, ``plain_model``).

Each function registered here replaces one reference method of ``zoo.models.self_attention.transformer`` wholesale,
with the same arguments, results and data layouts (the memory's cross caches and the decoder state
are the reference's: heads first, keys unscaled), so a model's variables, its memory and its state do
not depend on the mode. Measured (docs/performance.md): the real rows took the small Transformer's
training step from 1.26x to 1.41-1.49x ``keras_transformer``'s speed; one base-size sentence decodes
20 steps in 20-21 ms on rows, 25-26 ms on ``[B, 1, D]``. Proven equal to the reference by
``tests/fast/test_transformer.py`` (features, gradients, decoded ids).
"""

from keras import ops

from zoo.attention.base_attention import causal_mask
from zoo.attention.multi_head_attention import MultiHeadAttention
from zoo.fast.attention import attend_heads, project, write_cache
from zoo.kernels import replaces
from zoo.models.alignment import attention_row
from zoo.tokens import PAD_ID


class _RealRows:
    """The real (non-padding) positions of a ``[B, T]`` batch of token ids, private to the Transformer:
    ``to_rows`` gathers them from ``[B, T, ...]`` into rows ``[N, ...]``, ``to_grid`` scatters rows back,
    with zeros at padding. Rows without a batch axis make every position-wise ``Dense`` one plain
    matmul (on ``[1, N, D]`` Keras takes the tensordot path: transposes, reshapes and shape ops).

    Attention takes its operands heads first: ``to_heads`` gathers the rows' joined projections
    straight into ``[parts, B, H, T, d]`` and ``from_heads`` gathers the rows back out of the heads
    ``[B, H, T, d]``, each one gather of ``d``-wide slices forward and one backward, where a scatter to
    the grid and a transpose (and their gradients) moved every value twice. A padding slot of
    ``to_heads`` holds a copy of the first row, not zeros: every reader masks it (a padding key) or
    drops it (a padding query's output never reaches a row), so its gradient is exactly zero and
    the backward pass gathers the real slots only. An all-padding batch keeps its first position
    as a row (read by nobody), so there is always a row to copy."""

    def __init__(self, tokens):
        shape = ops.shape(tokens)
        self.batch, self.length = shape[0], shape[1]
        real = ops.reshape(ops.not_equal(tokens, PAD_ID), (-1,))
        first = ops.equal(ops.arange(ops.shape(real)[0]), 0)
        real = ops.logical_or(real, ops.logical_and(first, ops.logical_not(ops.any(real))))
        self.index = ops.nonzero(real)[0]  # [N] flat positions
        self._heads = {}

    def to_rows(self, x):
        flat = ops.reshape(x, (self.batch * self.length, *x.shape[2:]))
        return ops.take(flat, self.index, axis=0)

    def to_grid(self, rows):
        grid = ops.scatter(ops.expand_dims(self.index, 1), rows, (self.batch * self.length, *rows.shape[1:]))
        return ops.reshape(grid, (self.batch, self.length, *rows.shape[1:]))

    def _slots(self, parts, heads):
        """Gather indices between rows of ``[N, parts, H]`` slices and slots of ``[parts, B, H, T]``:
        ``(into_heads [parts B H T], into_rows [N parts H])``, made once per layout."""
        if (parts, heads) not in self._heads:
            index = ops.cast(self.index, "int32")
            rows = ops.shape(index)[0]
            size = self.batch * self.length
            row_of = ops.scatter(ops.expand_dims(index, 1), ops.arange(rows, dtype="int32"), (size,))  # padding: 0
            b, t = index // self.length, index % self.length
            part = ops.arange(parts, dtype="int32")
            head = ops.arange(heads, dtype="int32")
            grid_row = ops.reshape(row_of, (1, self.batch, 1, self.length))
            into_heads = (grid_row * parts + ops.reshape(part, (parts, 1, 1, 1))) * heads + ops.reshape(
                head, (1, 1, heads, 1))
            into_rows = ((ops.reshape(part, (1, parts, 1)) * self.batch + ops.reshape(b, (-1, 1, 1))) * heads
                         + ops.reshape(head, (1, 1, heads))) * self.length + ops.reshape(t, (-1, 1, 1))
            self._heads[(parts, heads)] = (ops.reshape(into_heads, (-1,)), ops.reshape(into_rows, (-1,)))
        return self._heads[(parts, heads)]

    def to_heads(self, joined, parts, heads):
        """Rows of joined projections ``[N, parts H d]`` -> ``[parts, B, H, T, d]`` (``MultiHeadAttention.project``'s
        ``to_heads``)."""
        into_heads, into_rows = self._slots(parts, heads)
        width = joined.shape[-1] // (parts * heads)
        batch, length = self.batch, self.length

        @ops.custom_gradient
        def gather(joined):
            def grad(*args, upstream=None):
                upstream = args[0] if upstream is None else upstream
                return ops.reshape(ops.take(ops.reshape(upstream, (-1, width)), into_rows, axis=0),
                                   (-1, parts * heads * width))

            out = ops.take(ops.reshape(joined, (-1, width)), into_heads, axis=0)
            return ops.reshape(out, (parts, batch, heads, length, width)), grad

        return gather(joined)

    def from_heads(self, heads):
        """Heads ``[B, H, T, d]`` -> rows ``[N, H, d]`` (``MultiHeadAttention.attend_heads``' ``from_heads``);
        the gradient is zero at padding."""
        count, width = heads.shape[1], heads.shape[-1]
        _, into_rows = self._slots(1, count)
        slots = self.batch * count * self.length

        @ops.custom_gradient
        def gather(heads):
            def grad(*args, upstream=None):
                upstream = args[0] if upstream is None else upstream
                flat = ops.scatter(ops.expand_dims(into_rows, 1), ops.reshape(upstream, (-1, width)), (slots, width))
                return ops.reshape(flat, ops.shape(heads))

            return ops.reshape(ops.take(ops.reshape(heads, (-1, width)), into_rows, axis=0), (-1, count, width)), grad

        return gather(heads)


def one_position_to_heads(joined, parts, heads):
    """One decoding position's joined projections ``[B, parts H d]`` -> ``[parts, B, H, 1, d]``
    (``project``'s ``to_heads``, as ``_RealRows.to_heads`` for a grid)."""
    width = joined.shape[-1] // (parts * heads)
    return ops.expand_dims(ops.moveaxis(ops.reshape(joined, (-1, parts, heads, width)), 1, 0), 3)


def one_position_from_heads(heads):
    """Heads of one position ``[B, H, 1, d]`` -> rows of heads ``[B, H, d]`` (``attend_heads``'
    ``from_heads``: ``W^O`` as one matmul)."""
    return ops.squeeze(heads, 2)


# -- the layers -------------------------------------------------------------------------------------
def plain_attention(attention):
    """Whether ``attention`` is the fast path's: ``multi_head`` itself, all heads with their own keys
    and values, no window."""
    return (type(attention) is MultiHeadAttention and attention.kv_heads == attention.num_heads
            and attention.sliding_window is None)


def plain_block(block):
    """Whether the fast path computes ``block`` (an encoder or decoder layer) exactly: plain attentions
    and no score bias; else its reference ``call`` runs."""
    cross = getattr(block, "cross_attention", None)
    return block.score_bias is None and plain_attention(block.self_attention) and (
        cross is None or plain_attention(cross))


def plain_model(model):
    """Whether every layer of ``model`` is ``plain_block``: else its reference methods run."""
    return all(plain_block(layer) for layer in [*model.encoder_layers, *model.decoder_layers])


def dropout_rows(block, rows, grid, training):
    """The residual dropout of rows ``[N, D]`` of ``grid`` with the very mask the reference draws for the
    grid ``[B, T, D]``: the layer's ``Dropout`` on ones of the grid's shape (the same seed and shape, so the
    same draws), gathered to the rows. Training in either mode then follows the same path."""
    dropout = block.residual_dropout
    if dropout.rate == 0 or training is None or training is False:
        return rows
    scale = dropout(ops.ones((grid.batch, grid.length, rows.shape[-1]), rows.dtype), training=training)
    return rows * grid.to_rows(scale)


def residual_rows(block, rows, grid, norm, sublayer, training):
    """``_Block.residual`` on rows, its dropout by ``dropout_rows``."""
    if block.norm_first:
        output, extra = sublayer(norm(rows))
        return rows + dropout_rows(block, output, grid, training), extra
    output, extra = sublayer(rows)
    return norm(rows + dropout_rows(block, output, grid, training)), extra


def feed_forward_rows(block, rows, grid, training):
    """``_Block.feed_forward`` on rows."""
    return residual_rows(block, rows, grid, block.ffn_norm, lambda h: (block.ffn_outer(block.ffn_inner(h)), None),
                         training)[0]


def attend_self(block, h, mask, training, grid=None):
    """Self-attention of ``h`` heads first: the three projections of ``h [B, T, D]`` moved there by one
    transpose, or of the rows of a ``grid`` (``_RealRows``) by one gather each way; rotary positions
    rotate the queries and keys there (axis 2)."""
    to_heads, from_heads = (None, None) if grid is None else (grid.to_heads, grid.from_heads)
    attention = block.self_attention
    queries, keys, values = project(attention, h, heads_first=True, to_heads=to_heads)
    if block.rope is not None:
        queries, keys = block.rope(queries, sequence_axis=2), block.rope(keys, sequence_axis=2)
    return attend_heads(attention, queries, keys, values, mask, training=training, queries_first=True,
                        from_heads=from_heads)


def attend_cross(layer, h, cross_keys, cross_values, cross_mask, training, to_heads=None, from_heads=None):
    """Cross-attention of ``h`` (``[B, T, D]``, or rows ``[N, D]`` mapped heads first by ``to_heads``: a
    grid's, or one position's in a decoding step), ``W^O`` on the rows ``from_heads`` gives back."""
    queries, = project(layer.cross_attention, h, ("query",), to_heads=to_heads)
    return attend_heads(layer.cross_attention, queries, cross_keys, cross_values, cross_mask, training=training,
                        queries_first=to_heads is not None, from_heads=from_heads)


@replaces("zoo.models.self_attention.transformer._EncoderLayer.call", own_gradient=True)
def encoder_layer(self, x, attention_mask, training=None):
    """``_EncoderLayer.call`` with the joined projections and heads-first products. Training only (a
    custom gradient by its moves): in a SavedModel, traced with it, grappler's cost model warned of its
    softmax at every load; the encoder runs once per sentence there, on the reference layer."""
    if not plain_block(self):
        return type(self).call.reference(self, x, attention_mask, training=training)
    x, weights = self.residual(x, self.self_attention_norm, lambda h: attend_self(self, h, attention_mask, training),
                               training)
    return self.feed_forward(x, training), weights


def encoder_rows(layer, rows, grid, attention_mask, training=None):
    """``_EncoderLayer.call`` at the real source positions only: ``rows [N, D]`` of ``grid``; attention
    on the grid, with the padding keys masked."""
    rows, _ = residual_rows(layer, rows, grid, layer.self_attention_norm,
                            lambda h: attend_self(layer, h, attention_mask, training, grid=grid), training)
    return feed_forward_rows(layer, rows, grid, training)


@replaces("zoo.models.self_attention.transformer._DecoderLayer.call", own_gradient=True)
def decoder_layer(self, x, cross_cache, cross_mask, cache=None, cache_update_index=None, training=None):
    """``_DecoderLayer.call`` for all target positions at once with the joined projections and
    heads-first products; with a cache, the reference (decoding goes through ``decode_features``)."""
    if cache is not None or not plain_block(self):
        return type(self).call.reference(self, x, cross_cache, cross_mask, cache, cache_update_index,
                                            training=training)

    def attend(h):
        mask = ops.expand_dims(causal_mask(ops.shape(h)[1], ops.shape(h)[1]), 0)  # [1, Tt, Tt]
        return attend_self(self, h, mask, training)

    x, self_weights = self.residual(x, self.self_attention_norm, attend, training)
    x, cross_weights = self.residual(
        x, self.cross_attention_norm, lambda h: attend_cross(self, h, *cross_cache, cross_mask, training), training)
    return self.feed_forward(x, training), self_weights, cross_weights, None


def decoder_rows(layer, rows, grid, cross_keys, cross_values, cross_mask, training=None):
    """``_DecoderLayer.call`` at the real target positions only: ``rows [N, D]`` are the positions of
    ``grid``; the position-wise work (FFN, norms, residuals, the cross-attention query) runs on the
    rows, attention on the ``[B, Tt]`` grid (padding slots hold a copy of a row, and causality keeps
    every real position from them)."""
    def attend(h):
        mask = ops.expand_dims(causal_mask(grid.length, grid.length), 0)  # [1, Tt, Tt]
        return attend_self(layer, h, mask, training, grid=grid)

    def cross(h):
        return attend_cross(layer, h, cross_keys, cross_values, cross_mask, training, grid.to_heads, grid.from_heads)

    rows, _ = residual_rows(layer, rows, grid, layer.self_attention_norm, attend, training)
    rows, _ = residual_rows(layer, rows, grid, layer.cross_attention_norm, cross, training)
    return feed_forward_rows(layer, rows, grid, training)


def decoder_step(layer, x, step, cache_keys, cache_values, cross_keys, cross_values, cross_mask, training=None):
    """One position ``x [B, D]`` at index ``step [B]``; the caches (keys and values ``[B, H, L, d]``)
    get its keys/values. Rows, not ``[B, 1, D]``: every projection is one plain matmul (on a length-1
    axis the einsum layers ran batched matmuls, the dense layers a tensordot)."""
    new_caches = []

    def attend(h):
        # Rows decode in lockstep (greedy, beam search), and rotary takes one scalar start.
        queries, keys, values = [ops.expand_dims(part, 1) for part in project(layer.self_attention, h)]
        if layer.rope is not None:
            start = ops.max(step)
            queries, keys = layer.rope(queries, start_index=start), layer.rope(keys, start_index=start)
        keys, values, mask = write_cache(cache_keys, cache_values, keys, values, step)
        new_caches.extend([keys, values])
        return attend_heads(layer.self_attention, queries, keys, values, mask, training=training,
                            from_heads=one_position_from_heads)

    def cross(h):
        return attend_cross(layer, h, cross_keys, cross_values, cross_mask, training, one_position_to_heads,
                            one_position_from_heads)

    x, _ = layer.residual(x, layer.self_attention_norm, attend, training)
    x, cross_weights = layer.residual(x, layer.cross_attention_norm, cross, training)
    return layer.feed_forward(x, training), new_caches[0], new_caches[1], cross_weights


# -- the model --------------------------------------------------------------------------------------
def cross_caches(model, memory, mask, grid=None):
    """``TransformerSeq2Seq._memory``'s cross caches by one joined ``[K W^K, V W^V]`` product a layer,
    heads first; from the encoder's rows of ``grid`` (the training step's: no ``"memory"``)."""
    cross = [project(layer.cross_attention, memory, ("key", "value"), heads_first=True,
                     to_heads=None if grid is None else grid.to_heads) for layer in model.decoder_layers]
    out = {"memory_mask": mask, "cross_keys": tuple(k for k, _ in cross), "cross_values": tuple(v for _, v in cross)}
    return out if grid is not None else {"memory": memory, **out}


@replaces("zoo.models.self_attention.transformer.TransformerSeq2Seq.encode")
def encode(self, source, training=None):
    """``TransformerSeq2Seq.encode`` with the cross caches of ``cross_caches``."""
    if not plain_model(self):
        return type(self).encode.reference(self, source, training=training)
    memory, mask, _ = self._encode(source, training=training)
    return cross_caches(self, memory, mask)


def encode_rows(model, source, training=None):
    """What the training step's decoder reads of ``encode``'s memory (its mask and each decoder layer's
    cross keys/values), with the position-wise work on the real source positions only: the cross keys
    and values are projected from the encoder's rows and gathered heads first (``_RealRows.to_heads``;
    padding slots are masked), never written out as a grid."""
    mask = ops.not_equal(source, PAD_ID)
    grid = _RealRows(source)
    rows = grid.to_rows(model._embed(model.source_embedding, model.source_positions, source, training=training))
    attention_mask = ops.expand_dims(mask, 1)  # [B, 1, Ts]: keys only
    for layer in model.encoder_layers:
        rows = encoder_rows(layer, rows, grid, attention_mask, training=training)
    if model.norm_first:
        rows = model.encoder_norm(rows)
    return cross_caches(model, rows, mask, grid)


@replaces("zoo.models.self_attention.transformer.TransformerSeq2Seq.training_features", own_gradient=True)
def training_features(self, source, target_in, training=None):
    """``TransformerSeq2Seq.training_features`` with the position-wise work at the real positions only
    (``_RealRows``), source and target: the padding's features are 0 without being computed."""
    if not plain_model(self):
        return type(self).training_features.reference(self, source, target_in, training=training)
    self.ensure_built()
    memory = encode_rows(self, source, training=training)
    grid = _RealRows(target_in)
    rows = grid.to_rows(self._embed(self.target_embedding, self.target_positions, target_in, training=training))
    cross_mask = ops.expand_dims(memory["memory_mask"], 1)
    for layer, keys, values in zip(self.decoder_layers, memory["cross_keys"], memory["cross_values"]):
        rows = decoder_rows(layer, rows, grid, keys, values, cross_mask, training=training)
    return grid.to_grid(rows)


@replaces("zoo.models.self_attention.transformer.TransformerSeq2Seq.decode_features")
def decode_features(self, token, state, memory, training=None):
    """``TransformerSeq2Seq.decode_features`` on rows ``[B, D]`` through the layers (``decoder_step``)."""
    if not plain_model(self):
        return type(self).decode_features.reference(self, token, state, memory, training=training)
    step, caches = state[0], state[1:]
    y = self._embed(self.target_embedding, self.target_positions, ops.expand_dims(token, 1),
                    start_index=step, training=training)  # [B, 1, D]
    y = ops.squeeze(y, 1)
    cross_mask = ops.expand_dims(memory["memory_mask"], 1)
    new_caches = []
    for index, layer in enumerate(self.decoder_layers):
        y, keys, values, cross_weights = decoder_step(
            layer, y, step, caches[2 * index], caches[2 * index + 1], memory["cross_keys"][index],
            memory["cross_values"][index], cross_mask, training=training)
        new_caches.extend([keys, values])
    return y, (step + 1, *new_caches), attention_row(cross_weights)
