"""Transformer encoder-decoder, Vaswani et al. 2017, with incremental (cached) decoding."""

import math

import keras
from keras import ops

import zoo.attention as zoo_attention
from zoo.attention.base_attention import causal_mask
from zoo.checks import boolean, choice, enforce, positive_int
from zoo.models.common import attention_row, rate
from zoo.models.layer_norm import LayerNormalization
from zoo.models.seq2seq_model import Seq2SeqModel, register_model
from zoo.tokens import PAD_ID

POSITIONS = ("sinusoidal", "learned", "rotary")
ACTIVATIONS = ("relu", "gelu")
# Size rules between the arguments, declared once: the constructor enforces them and the config
# validator reads this literal without importing Keras (zoo.catalog.model_constraints).
CONSTRAINTS = (
    {"rule": "one_of", "key": "positions", "values": POSITIONS},
    {"rule": "one_of", "key": "activation", "values": ACTIVATIONS},
    {"rule": "multiple", "key": "embed_dim", "of": "num_heads",
     "why": "each head gets d_k = embed_dim / num_heads features"},
    {"rule": "even_quotient", "key": "embed_dim", "of": "num_heads", "when": {"positions": "rotary"},
     "why": "rotary positions rotate pairs of each head's features"},
)


class _Block(keras.layers.Layer):
    """Residual sublayer plumbing shared by the encoder and decoder layers (private)."""

    def __init__(self, embed_dim, intermediate_dim, num_heads, dropout, attention_dropout, norm_first, activation,
                 rotary, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.intermediate_dim, self.num_heads = embed_dim, intermediate_dim, num_heads
        self.norm_first, self.rotary = norm_first, rotary
        self.attention_dropout = attention_dropout
        dtype = self.dtype_policy
        self.self_attention = self.make_attention("self_attention")
        self.self_attention_norm = LayerNormalization(epsilon=1e-5, name="self_attention_norm", dtype=dtype)
        self.ffn_inner = keras.layers.Dense(intermediate_dim, activation=activation, name="ffn_inner", dtype=dtype)
        self.ffn_outer = keras.layers.Dense(embed_dim, name="ffn_outer", dtype=dtype)
        self.ffn_norm = LayerNormalization(epsilon=1e-5, name="ffn_norm", dtype=dtype)
        self.residual_dropout = keras.layers.Dropout(dropout, name="residual_dropout", dtype=dtype)
        self.rope = zoo_attention.create("rotary", name="rope", dtype=dtype) if rotary else None

    def make_attention(self, name):
        return zoo_attention.create("multi_head", num_heads=self.num_heads, key_dim=self.embed_dim // self.num_heads,
                                    dropout=self.attention_dropout, name=name, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        shape = (None, None, self.embed_dim)
        self.self_attention.build(shape, shape)
        self.self_attention_norm.build(shape)
        self.ffn_inner.build(shape)
        self.ffn_outer.build((None, None, self.intermediate_dim))
        self.ffn_norm.build(shape)
        if self.rope is not None:
            self.rope.build((None, None, self.num_heads, self.embed_dim // self.num_heads))
        self.built = True

    def residual(self, x, norm, sublayer, training):
        """``LayerNorm(x + Dropout(Sublayer(x)))`` (sec. 5.4), or ``x + Dropout(Sublayer(LayerNorm(x)))``."""
        if self.norm_first:
            output, extra = sublayer(norm(x))
            return x + self.residual_dropout(output, training=training), extra
        output, extra = sublayer(x)
        return norm(x + self.residual_dropout(output, training=training)), extra

    def feed_forward(self, x, training):
        """``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2`` (eq. 2)."""
        return self.residual(x, self.ffn_norm, lambda h: (self.ffn_outer(self.ffn_inner(h)), None), training)[0]

    def attend_self(self, h, mask, training, grid=None):
        """Self-attention of ``h`` (``project`` + ``attend_heads``), heads first: the three projections
        of ``h [B, T, D]`` moved there by one transpose, or of the rows of a ``grid`` (``_RealRows``) by
        one gather each way; rotary positions rotate the queries and keys there (axis 2)."""
        to_heads, from_heads = (None, None) if grid is None else (grid.to_heads, grid.from_heads)
        queries, keys, values = self.self_attention.project(h, heads_first=True, to_heads=to_heads)
        if self.rope is not None:
            queries, keys = self.rope(queries, sequence_axis=2), self.rope(keys, sequence_axis=2)
        return self.self_attention.attend_heads(queries, keys, values, mask, training=training, heads_first=True,
                                                queries_first=True, from_heads=from_heads)


class _EncoderLayer(_Block):
    """Self-attention + FFN (sec. 3.1), private to ``TransformerSeq2Seq``."""

    def call(self, x, attention_mask, training=None):
        x, weights = self.residual(x, self.self_attention_norm, lambda h: self.attend_self(h, attention_mask, training),
                                   training)
        return self.feed_forward(x, training), weights

    def call_rows(self, rows, grid, attention_mask, training=None):
        """``call`` at the real source positions only (``_DecoderLayer.call_rows``): ``rows [N, D]``
        of ``grid``; attention on the grid, with the padding keys masked as in ``call``."""
        def attend(h):
            return self.attend_self(h, attention_mask, training, grid=grid)

        rows, _ = self.residual(rows, self.self_attention_norm, attend, training)
        return self.feed_forward(rows, training)


def _one_position_to_heads(joined, parts, heads):
    """One decoding position's joined projections ``[B, parts H d]`` -> ``[parts, B, H, 1, d]``
    (``MultiHeadAttention.project``'s ``to_heads``, as ``_RealRows.to_heads`` for a grid)."""
    width = joined.shape[-1] // (parts * heads)
    return ops.expand_dims(ops.moveaxis(ops.reshape(joined, (-1, parts, heads, width)), 1, 0), 3)


def _one_position_from_heads(heads):
    """Heads of one position ``[B, H, 1, d]`` -> rows of heads ``[B, H, d]`` (``attend_heads``'
    ``from_heads``: ``W^O`` as one matmul)."""
    return ops.squeeze(heads, 2)


class _DecoderLayer(_Block):
    """Causal self-attention + cross-attention + FFN (sec. 3.1), private to ``TransformerSeq2Seq``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cross_attention = self.make_attention("cross_attention")
        self.cross_attention_norm = LayerNormalization(epsilon=1e-5, name="cross_attention_norm",
                                                       dtype=self.dtype_policy)

    def build(self, input_shape=None):
        super().build(input_shape)
        shape = (None, None, self.embed_dim)
        self.cross_attention.build(shape, shape)
        self.cross_attention_norm.build(shape)

    def cross_keys_values(self, memory, grid=None):
        """``(K W^K / sqrt(d_k), V W^V)`` of the encoder output, computed once per source, heads
        first (``[B, H, Ts, d_k]``): no decoder step transposes them. With a ``grid`` (``_RealRows``)
        ``memory`` is the encoder's rows, gathered there (``to_heads``; padding slots are masked)."""
        return self.cross_attention.prepare(memory, heads_first=True, to_heads=None if grid is None else grid.to_heads)

    def _cross(self, x, cross_keys, cross_values, cross_mask, training):
        def attend(h):
            return self.cross_attention.attend_heads(self.cross_attention.query_dense(h), cross_keys, cross_values,
                                                     cross_mask, training=training, heads_first=True)

        return self.residual(x, self.cross_attention_norm, attend, training)

    def call(self, x, cross_keys, cross_values, cross_mask, training=None):
        """All target positions at once: ``x [B, Tt, D]``; causal self-attention."""
        def attend(h):
            mask = ops.expand_dims(causal_mask(ops.shape(h)[1], ops.shape(h)[1]), 0)  # [1, Tt, Tt]
            return self.attend_self(h, mask, training)

        x, self_weights = self.residual(x, self.self_attention_norm, attend, training)
        x, cross_weights = self._cross(x, cross_keys, cross_values, cross_mask, training)
        return self.feed_forward(x, training), self_weights, cross_weights

    def call_rows(self, rows, grid, cross_keys, cross_values, cross_mask, training=None):
        """``call`` at the real target positions only: ``rows [N, D]`` are the positions of ``grid``
        (a ``_RealRows``); the position-wise work (FFN, norms, residuals, the cross-attention query)
        runs on the rows, attention on the ``[B, Tt]`` grid (``_RealRows.to_heads``: padding slots hold
        a copy of a row, and causality keeps every real position from them). The real positions'
        values are ``call``'s."""
        def attend(h):  # projections on the rows, gathered heads first once; W^O on the rows
            mask = ops.expand_dims(causal_mask(grid.length, grid.length), 0)  # [1, Tt, Tt]
            return self.attend_self(h, mask, training, grid=grid)

        def attend_cross(h):
            return self.cross_rows(h, cross_keys, cross_values, cross_mask, training, grid.to_heads, grid.from_heads)

        rows, _ = self.residual(rows, self.self_attention_norm, attend, training)
        rows, _ = self.residual(rows, self.cross_attention_norm, attend_cross, training)
        return self.feed_forward(rows, training)

    def cross_rows(self, h, cross_keys, cross_values, cross_mask, training, to_heads, from_heads):
        """Cross-attention of rows ``h [N, D]``: the queries projected on the rows and mapped heads
        first by ``to_heads`` (a grid's, or one position's in a decoding step), ``W^O`` on the rows
        ``from_heads`` gives back."""
        queries, = self.cross_attention.project(h, ("query",), to_heads=to_heads)  # [B, H, Tq, d_k]
        return self.cross_attention.attend_heads(queries, cross_keys, cross_values, cross_mask, training=training,
                                                 heads_first=True, queries_first=True, from_heads=from_heads)

    def step(self, x, step, cache_keys, cache_values, cross_keys, cross_values, cross_mask, training=None):
        """One position ``x [B, D]`` at index ``step [B]``; the caches (keys and values ``[B, H, L, d]``)
        get its keys/values. Rows, not ``[B, 1, D]``: every projection is one plain matmul (on a
        length-1 axis the einsum layers ran batched matmuls, the dense layers a tensordot)."""
        new_caches = []

        def attend(h):
            # Rows decode in lockstep (greedy, beam search), and rotary takes one scalar start.
            queries, keys, values = [ops.expand_dims(part, 1) for part in self.self_attention.project(h)]
            if self.rope is not None:
                start = ops.max(step)
                queries, keys = self.rope(queries, start_index=start), self.rope(keys, start_index=start)
            keys, values, mask = self.self_attention.write_cache(cache_keys, cache_values, keys, values, step)
            new_caches.extend([keys, values])
            return self.self_attention.attend_heads(queries, keys, values, mask, training=training, heads_first=True,
                                                    from_heads=_one_position_from_heads)

        def attend_cross(h):
            return self.cross_rows(h, cross_keys, cross_values, cross_mask, training, _one_position_to_heads,
                                   _one_position_from_heads)

        x, _ = self.residual(x, self.self_attention_norm, attend, training)
        x, cross_weights = self.residual(x, self.cross_attention_norm, attend_cross, training)
        return self.feed_forward(x, training), new_caches[0], new_caches[1], cross_weights


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


@keras.saving.register_keras_serializable(package="zoo")
class TransformerSeq2Seq(Seq2SeqModel):
    """The Transformer: stacks of multi-head self-attention, cross-attention and FFN layers.

    Encoder layer (sec. 3.1): ``x = LayerNorm(x + MultiHead(x, x, x))``, then
    ``x = LayerNorm(x + FFN(x))``. Decoder layer: causal self-attention (position ``i`` sees
    ``j <= i``), cross-attention ``MultiHead(y, m, m)`` over the encoder output ``m``, FFN;
    each sublayer with a residual connection, dropout on its output, and LayerNorm (post-norm,
    sec. 5.4; ``norm_first=True`` normalizes the sublayer input instead, and adds a final
    LayerNorm after each stack: the pre-norm of Xiong et al. 2020). With
    ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``,
    ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` (eq. 1), ``d_k = d_model / h``,
    ``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2`` (eq. 2). The attention layers are
    ``zoo.attention`` ``multi_head`` layers.

    Inputs: token embeddings times ``sqrt(d_model)`` (sec. 3.4) plus positions
    (``"sinusoidal"``, sec. 3.5, or ``"learned"``), then dropout; or ``"rotary"``, which
    rotates the queries and keys of self-attention instead (Su et al. 2021). Output:
    ``softmax(y W_o + b)``; ``tie_output`` uses the target embedding matrix as ``W_o^T``
    (sec. 3.4); ``share_embeddings`` uses one embedding for both sides (equal vocabularies).

    ``teacher_forced`` runs all target positions at once (causal mask, no loop) and returns
    the last decoder layer's cross-attention averaged over heads, ``[B, Tt, Ts]``.
    ``decode_step`` is incremental: the decoder self-attention keys/values of earlier steps
    sit in a cache preallocated by ``initial_state(memory, max_length)``, keys and values
    ``[B, H, L, d_k]`` per layer (fixed shapes: step ``t`` writes slot ``t``, slots after ``t`` are masked), and
    the cross-attention keys/values of the source are computed once in ``encode``; both are
    kept heads first, in the layouts the two products take, so a step transposes neither.
    ``attention_maps((source, target_in))`` gives every layer's per-head weights for plots.

    Target padding is not masked in decoder self-attention: padding comes after the real
    tokens, so the causal mask keeps it from them (and greedy decoding sees the same thing).

    Shapes: ``B`` batch, ``Ts`` source steps, ``Tt`` target steps, ``D`` = ``embed_dim``
    (``d_model``), ``H`` heads, ``L`` cache length, ``V`` target vocabulary.

    Args:
        source_vocab_size, target_vocab_size: vocabulary sizes (id 0 = padding).
        embed_dim: positive int ``d_model``, divisible by ``num_heads``.
        intermediate_dim: positive int ``d_ff``, the inner size of the FFN (keras-hub's name;
            called ``hidden_size`` before: ``.keras`` files saved with that name still load).
        num_layers: positive int ``N``, layers in the encoder and in the decoder.
        num_heads: positive int ``h``.
        dropout: float in [0, 1), on embeddings+positions and on every sublayer output
            (``P_drop``, sec. 5.4).
        attention_dropout: float in [0, 1), on the attention weights.
        positions: ``"rotary"`` (default), ``"sinusoidal"`` (the paper) or ``"learned"``. On the
            dates task without a learning-rate warmup, rotary trains several times faster.
        max_length: positive int, positions with a learned embedding (``positions="learned"``;
            later positions reuse the last one).
        norm_first: bool, pre-norm instead of the paper's post-norm.
        share_embeddings: bool, one embedding matrix for source and target (needs
            ``source_vocab_size == target_vocab_size``).
        tie_output: bool, the output projection is the transposed target embedding.
        activation: ``"relu"`` (the paper) or ``"gelu"``, the FFN's nonlinearity.

    Example:
        >>> import numpy as np
        >>> model = TransformerSeq2Seq(13, 11, embed_dim=8, intermediate_dim=16, num_heads=2)
        >>> maps = model.attention_maps((np.array([[5, 6, 3, 0]]), np.array([[2, 5, 6]])))
        >>> [tuple(m.shape) for m in maps["cross"]]
        [(1, 2, 3, 4), (1, 2, 3, 4)]

    References:
        Vaswani et al. Attention Is All You Need. NeurIPS 2017, sec. 3 and 5.4.
        https://arxiv.org/abs/1706.03762
        Xiong et al. On Layer Normalization in the Transformer Architecture. ICML 2020.
        Su et al. RoFormer: Enhanced Transformer with Rotary Position Embedding. 2021.
    """

    def __init__(self, source_vocab_size, target_vocab_size, embed_dim=64, intermediate_dim=256, num_layers=2,
                 num_heads=4, dropout=0.1, attention_dropout=0.0, positions="rotary", max_length=256,
                 norm_first=False, share_embeddings=False, tie_output=False, activation="relu", **kwargs):
        if "hidden_size" in kwargs:
            raise ValueError("TransformerSeq2Seq has no argument `hidden_size`: the feed-forward size is "
                             "`intermediate_dim` (model.intermediate_dim in a config; renamed from hidden_size). "
                             f"Received: hidden_size={kwargs['hidden_size']!r}")
        super().__init__(**kwargs)
        self.source_vocab_size = positive_int("source_vocab_size", source_vocab_size)
        self.target_vocab_size = positive_int("target_vocab_size", target_vocab_size)
        self.embed_dim = positive_int("embed_dim", embed_dim)
        self.intermediate_dim = positive_int("intermediate_dim", intermediate_dim)
        self.num_layers = positive_int("num_layers", num_layers)
        self.num_heads = positive_int("num_heads", num_heads)
        self.dropout = rate("dropout", dropout)
        self.attention_dropout = rate("attention_dropout", attention_dropout)
        self.positions = choice("positions", positions, POSITIONS)
        self.max_length = positive_int("max_length", max_length)
        self.norm_first = boolean("norm_first", norm_first)
        self.share_embeddings = boolean("share_embeddings", share_embeddings)
        self.tie_output = boolean("tie_output", tie_output)
        self.activation = choice("activation", activation, ACTIVATIONS)
        enforce(CONSTRAINTS, embed_dim=embed_dim, num_heads=num_heads, positions=positions)
        if self.share_embeddings and source_vocab_size != target_vocab_size:
            raise ValueError("Received an invalid value for argument `share_embeddings`: True needs equal "
                             f"vocabulary sizes. Received: source_vocab_size={source_vocab_size}, "
                             f"target_vocab_size={target_vocab_size}")
        self.head_dim = embed_dim // num_heads

        dtype = self.dtype_policy
        # N(0, d_model^-1/2), so that the sqrt(d_model) scaling gives embeddings of unit variance, on a
        # par with the sinusoidal positions (as tensor2tensor); Keras' default U(-0.05, 0.05) lets the
        # positions drown the words early in training.
        init = keras.initializers.RandomNormal(stddev=embed_dim ** -0.5)
        self.source_embedding = keras.layers.Embedding(source_vocab_size, embed_dim, name="source_embedding",
                                                       embeddings_initializer=init, dtype=dtype)
        self.target_embedding = (self.source_embedding if self.share_embeddings else
                                 keras.layers.Embedding(target_vocab_size, embed_dim, name="target_embedding",
                                                        embeddings_initializer=init, dtype=dtype))
        def position_layer(side):
            if self.positions == "learned":
                return zoo_attention.create("learned", max_length=max_length, name=f"{side}_positions", dtype=dtype)
            if self.positions == "sinusoidal":
                return zoo_attention.create("sinusoidal", name=f"{side}_positions", dtype=dtype)
            return None  # rotary: inside self-attention

        self.source_positions, self.target_positions = position_layer("source"), position_layer("target")
        self.embedding_dropout = keras.layers.Dropout(self.dropout, name="embedding_dropout", dtype=dtype)
        block = dict(embed_dim=embed_dim, intermediate_dim=intermediate_dim, num_heads=num_heads, dropout=self.dropout,
                     attention_dropout=self.attention_dropout, norm_first=self.norm_first,
                     activation=self.activation, rotary=self.positions == "rotary", dtype=dtype)
        self.encoder_layers = [_EncoderLayer(name=f"encoder_{i}", **block) for i in range(num_layers)]
        self.decoder_layers = [_DecoderLayer(name=f"decoder_{i}", **block) for i in range(num_layers)]
        if self.norm_first:
            self.encoder_norm = LayerNormalization(epsilon=1e-5, name="encoder_norm", dtype=dtype)
            self.decoder_norm = LayerNormalization(epsilon=1e-5, name="decoder_norm", dtype=dtype)
        if not self.tie_output:
            self.output_projection = keras.layers.Dense(target_vocab_size, name="output_projection", dtype=dtype)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "hidden_size" in config:  # a .keras file saved before the rename to intermediate_dim
            config["intermediate_dim"] = config.pop("hidden_size")
        return super().from_config(config)

    def build(self, input_shape=None):
        shape = (None, None, self.embed_dim)
        self.source_embedding.build((None, None))
        if not self.share_embeddings:
            self.target_embedding.build((None, None))
        for layer in (self.source_positions, self.target_positions):
            if layer is not None:
                layer.build(shape)
        for layer in [*self.encoder_layers, *self.decoder_layers]:
            layer.build(shape)
        if self.norm_first:
            self.encoder_norm.build(shape)
            self.decoder_norm.build(shape)
        if self.tie_output:
            self.output_bias = self.add_weight(name="output_bias", shape=(self.target_vocab_size,),
                                               initializer="zeros")
        else:
            self.output_projection.build(shape)
        self.built = True

    # -- pieces ---------------------------------------------------------------------------------
    def _embed(self, embedding, positions, tokens, start_index=0, training=None):
        x = embedding(tokens) * ops.cast(math.sqrt(self.embed_dim), self.compute_dtype)
        if positions is not None:
            x = positions(x, start_index=start_index)
        return self.embedding_dropout(x, training=training)

    def _logits(self, y):
        if self.norm_first:
            y = self.decoder_norm(y)
        if self.tie_output:
            kernel = ops.cast(self.target_embedding.embeddings, y.dtype)
            return ops.matmul(y, ops.transpose(kernel)) + ops.cast(self.output_bias, y.dtype)
        return self.output_projection(y)

    def _encode(self, source, training=None):
        mask = ops.not_equal(source, PAD_ID)
        x = self._embed(self.source_embedding, self.source_positions, source, training=training)
        attention_mask = ops.expand_dims(mask, 1)  # [B, 1, Ts]: keys only
        maps = []
        for layer in self.encoder_layers:
            x, weights = layer(x, attention_mask, training=training)
            maps.append(weights)
        if self.norm_first:
            x = self.encoder_norm(x)
        return x, mask, maps

    def _encode_rows(self, source, training=None):
        """What the training step's decoder reads of ``encode``'s memory (its mask and each decoder
        layer's cross keys/values), with the position-wise work on the real source positions only:
        the cross keys and values are projected from the encoder's rows and gathered heads first
        (``_RealRows.to_heads``; padding slots are masked), never written out as a grid."""
        mask = ops.not_equal(source, PAD_ID)
        grid = _RealRows(source)
        rows = grid.to_rows(self._embed(self.source_embedding, self.source_positions, source, training=training))
        attention_mask = ops.expand_dims(mask, 1)  # [B, 1, Ts]: keys only
        for layer in self.encoder_layers:
            rows = layer.call_rows(rows, grid, attention_mask, training=training)
        if self.norm_first:
            rows = self.encoder_norm(rows)
        return self._memory(rows, mask, grid)

    def _memory(self, memory, mask, grid=None):
        """The decoder's memory: the encoder output, its mask and each decoder layer's cross keys/values;
        from the encoder's rows of ``grid`` (the training step's), the mask and the cross keys/values only."""
        cross = [layer.cross_keys_values(memory, grid) for layer in self.decoder_layers]
        out = {"memory_mask": mask, "cross_keys": tuple(k for k, _ in cross), "cross_values": tuple(v for _, v in cross)}
        return out if grid is not None else {"memory": memory, **out}

    def _decode_all(self, memory, target_in, training=None):
        """``(y [B, Tt, D], self maps, cross maps)``: the last decoder layer's output, before ``_logits``."""
        y = self._embed(self.target_embedding, self.target_positions, target_in, training=training)
        cross_mask = ops.expand_dims(memory["memory_mask"], 1)
        self_maps, cross_maps = [], []
        for layer, keys, values in zip(self.decoder_layers, memory["cross_keys"], memory["cross_values"]):
            y, self_weights, cross_weights = layer(y, keys, values, cross_mask, training=training)
            self_maps.append(self_weights)
            cross_maps.append(cross_weights)
        return y, self_maps, cross_maps

    # -- the decoder interface ------------------------------------------------------------------
    def encode(self, source, training=None):
        memory, mask, _ = self._encode(source, training=training)
        return self._memory(memory, mask)

    def initial_state(self, memory, max_length=None):
        """``(t, K_1, V_1, ..., K_N, V_N)``: step ``t = 0`` per row ``[B]``, zero caches, keys and
        values ``[B, H, max_length, d_k]``.

        Every tensor has the batch first, so beam search can reorder hypotheses.
        """
        if max_length is None:
            raise ValueError("TransformerSeq2Seq.initial_state needs `max_length`, the size of its "
                             "key/value cache. Received: max_length=None")
        batch = ops.shape(memory["memory"])[0]
        cache = ops.zeros((batch, self.num_heads, max_length, self.head_dim), dtype=self.compute_dtype)
        return (ops.zeros((batch,), "int32"),) + (cache, cache) * self.num_layers

    @property
    def feature_size(self):
        return self.embed_dim

    def output_logits(self, features, training=None):
        """``y W_o + b`` (after the final LayerNorm with ``norm_first``), position by position."""
        return self._logits(features)

    def decode_features(self, token, state, memory, training=None):
        """The last decoder layer's output ``[B, D]`` at one position, before ``output_logits``."""
        step, caches = state[0], state[1:]
        y = self._embed(self.target_embedding, self.target_positions, ops.expand_dims(token, 1),
                        start_index=step, training=training)  # [B, 1, D]
        y = ops.squeeze(y, 1)  # rows [B, D] through the layers (``_DecoderLayer.step``)
        cross_mask = ops.expand_dims(memory["memory_mask"], 1)
        new_caches = []
        for index, layer in enumerate(self.decoder_layers):
            y, keys, values, cross_weights = layer.step(
                y, step, caches[2 * index], caches[2 * index + 1], memory["cross_keys"][index],
                memory["cross_values"][index], cross_mask, training=training)
            new_caches.extend([keys, values])
        return y, (step + 1, *new_caches), attention_row(cross_weights)

    def teacher_forced_features(self, source, target_in, training=None):
        """All target positions in parallel; attention is the last layer's cross-attention, head mean."""
        self.ensure_built()
        memory = self.encode(source, training=training)
        features, _, cross_maps = self._decode_all(memory, target_in, training=training)
        return features, ops.cast(ops.mean(cross_maps[-1], axis=1), "float32")

    def call(self, inputs, training=None, return_features=False):
        """Teacher-forced logits; with ``return_features`` (the training step's) the last decoder
        layer's output at the real target positions (``target_in != 0``; the data pad ``target_in``
        and ``target_out`` alike) and 0 at padding: the decoder's position-wise work skips padding."""
        if not return_features:
            return super().call(inputs, training=training)
        source, target_in = inputs
        self.ensure_built()
        memory = self._encode_rows(source, training=training)
        grid = _RealRows(target_in)
        rows = grid.to_rows(self._embed(self.target_embedding, self.target_positions, target_in, training=training))
        cross_mask = ops.expand_dims(memory["memory_mask"], 1)
        for layer, keys, values in zip(self.decoder_layers, memory["cross_keys"], memory["cross_values"]):
            rows = layer.call_rows(rows, grid, keys, values, cross_mask, training=training)
        return grid.to_grid(rows)

    def attention_maps(self, inputs):
        """Per-layer, per-head attention weights of teacher-forced decoding, for plots.

        Returns a dict of lists with one entry per layer: ``encoder`` ``[B, H, Ts, Ts]``,
        ``self`` (decoder, causal) ``[B, H, Tt, Tt]`` and ``cross`` ``[B, H, Tt, Ts]``.
        """
        source, target_in = inputs
        self.ensure_built()
        memory, mask, encoder_maps = self._encode(source, training=False)
        _, self_maps, cross_maps = self._decode_all(self._memory(memory, mask), target_in, training=False)
        return {"encoder": encoder_maps, "self": self_maps, "cross": cross_maps}

    def get_config(self):
        config = super().get_config()
        config.update({
            "source_vocab_size": self.source_vocab_size, "target_vocab_size": self.target_vocab_size,
            "embed_dim": self.embed_dim, "intermediate_dim": self.intermediate_dim, "num_layers": self.num_layers,
            "num_heads": self.num_heads, "dropout": self.dropout, "attention_dropout": self.attention_dropout,
            "positions": self.positions, "max_length": self.max_length, "norm_first": self.norm_first,
            "share_embeddings": self.share_embeddings, "tie_output": self.tie_output,
            "activation": self.activation,
        })
        return config


@register_model("transformer")
def transformer(source_vocab_size, target_vocab_size, **kwargs):
    return TransformerSeq2Seq(source_vocab_size, target_vocab_size, name="transformer", **kwargs)
