"""Transformer encoder-decoder, Vaswani et al. 2017, with incremental (cached) decoding."""

import math

import keras
import numpy as np
from keras import ops

import zoo.attention as zoo_attention
from zoo import kernels
from zoo.checks import boolean, choice, enforce, invalid, positive_int, rate
from zoo.models.alignment import attention_row
from zoo.models.encoder_decoder import Seq2SeqModel
from zoo.models.registry import register_model
from zoo.models.self_attention.layer_norm import LayerNormalization
from zoo.tokens import PAD_ID

POSITIONS = ("sinusoidal", "learned", "rotary", "relative", "t5", "alibi", "none")
SCORE_BIASES = ("relative", "t5", "alibi")  # positions as a bias on the scores (MultiHeadAttention's score_bias)
ACTIVATIONS = ("relu", "gelu")
# model.attention is the self-attention (multi_head or a kind: self attention), and the decoder's is causal:
# the config validator reads these literals (zoo.catalog.model_attention_kind, model_literal).
ATTENTION_KIND = "self"
CAUSAL = True
# The self-attention's arguments the Transformer sets from its own (model.num_heads, ...), not from
# model.attention_options: the validator refuses them there (zoo.config).
OWNED_OPTIONS = ("num_heads", "key_dim", "value_dim", "dropout", "num_kv_heads", "sliding_window")
# Size rules between the arguments, declared once: the constructor enforces them and the config
# validator reads this literal without importing Keras (zoo.catalog.model_constraints).
CONSTRAINTS = (
    {"rule": "one_of", "key": "positions", "values": POSITIONS},
    {"rule": "one_of", "key": "activation", "values": ACTIVATIONS},
    {"rule": "multiple", "key": "embed_dim", "of": "num_heads",
     "why": "each head gets d_k = embed_dim / num_heads features"},
    {"rule": "even_quotient", "key": "embed_dim", "of": "num_heads", "when": {"positions": "rotary"},
     "why": "rotary positions rotate pairs of each head's features"},
    {"rule": "multiple", "key": "num_heads", "of": "num_kv_heads",
     "why": "each key-value head serves num_heads / num_kv_heads query heads"},
)


class _Block(keras.layers.Layer):
    """Residual sublayer plumbing shared by the encoder and decoder layers (private)."""

    def __init__(self, embed_dim, intermediate_dim, num_heads, dropout, attention_dropout, norm_first, activation,
                 rotary, attention="multi_head", attention_options=None, num_kv_heads=None, attention_window=None,
                 score_bias=None, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.intermediate_dim, self.num_heads = embed_dim, intermediate_dim, num_heads
        self.norm_first, self.rotary = norm_first, rotary
        self.attention_dropout, self.num_kv_heads = attention_dropout, num_kv_heads
        self.score_bias = score_bias  # a position layer (RelativePositionEmbedding, ...) or None; maybe shared
        dtype = self.dtype_policy
        self.self_attention = self.make_attention("self_attention", attention, attention_options,
                                                  sliding_window=attention_window)
        self.self_attention_norm = LayerNormalization(epsilon=1e-5, name="self_attention_norm", dtype=dtype)
        self.ffn_inner = keras.layers.Dense(intermediate_dim, activation=activation, name="ffn_inner", dtype=dtype)
        self.ffn_outer = keras.layers.Dense(embed_dim, name="ffn_outer", dtype=dtype)
        self.ffn_norm = LayerNormalization(epsilon=1e-5, name="ffn_norm", dtype=dtype)
        self.residual_dropout = keras.layers.Dropout(dropout, name="residual_dropout", dtype=dtype)
        self.rope = zoo_attention.create("rotary", name="rope", dtype=dtype) if rotary else None

    def make_attention(self, name, attention="multi_head", options=None, **owned):
        """The attention layer ``attention`` (registered in ``zoo.attention``) with ``options``, and the
        Transformer's own heads, head size, dropout and key-value heads over them (``OWNED_OPTIONS``)."""
        owned = {"num_heads": self.num_heads, "key_dim": self.embed_dim // self.num_heads,
                 "dropout": self.attention_dropout, "num_kv_heads": self.num_kv_heads, **owned}
        options = {k: v for k, v in (options or {}).items() if k not in OWNED_OPTIONS}
        return zoo_attention.create(attention, **options, **owned, name=name, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        shape = (None, None, self.embed_dim)
        self.self_attention.build(shape, shape)
        self.self_attention_norm.build(shape)
        self.ffn_inner.build(shape)
        self.ffn_outer.build((None, None, self.intermediate_dim))
        self.ffn_norm.build(shape)
        if self.rope is not None:
            self.rope.build((None, None, self.num_heads, self.embed_dim // self.num_heads))
        if self.score_bias is not None and not self.score_bias.built:
            heads = (None, self.num_heads, None, self.embed_dim // self.num_heads)
            self.score_bias.build(heads, heads)
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

    def attend_self(self, h, training, **options):
        """Self-attention of ``h [B, T, D]`` (rotary positions rotate its queries and keys, a score bias
        adds to its scores): ``(output, (weights, [cache]))``, ``options`` the masks and cache of
        ``MultiHeadAttention``."""
        if self.score_bias is not None:
            options["score_bias"] = self.score_bias
        results = self.self_attention(h, h, rotary=self.rope, return_attention_scores=True, training=training,
                                      **options)
        return results[0], results[1:]


class _EncoderLayer(_Block):
    """Self-attention + FFN (sec. 3.1), private to ``TransformerSeq2Seq``."""

    @kernels.replaceable
    def call(self, x, attention_mask, training=None):
        """``x [B, Ts, D]``, ``attention_mask`` bool ``[B, 1, Ts]`` (the real source positions):
        ``(x, self-attention weights [B, H, Ts, Ts])``."""
        x, (weights,) = self.residual(
            x, self.self_attention_norm, lambda h: self.attend_self(h, training, attention_mask=attention_mask),
            training)
        return self.feed_forward(x, training), weights


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

    @kernels.replaceable
    def call(self, x, cross_cache, cross_mask, cache=None, cache_update_index=None, training=None):
        """``x [B, Tt, D]``: all target positions at once (training), or, with this layer's
        self-attention ``cache`` (a tuple, its ``initial_cache``: keys and values ``[B, H_kv, L, d_k]`` for
        ``multi_head``) and ``cache_update_index``, the
        positions from that index on (decoding: one a step). ``cross_cache``: the encoder output's
        ``(K W^K, V W^V)`` (``MultiHeadAttention.prepare``, once per source), ``cross_mask`` bool
        ``[B, 1, Ts]``. Returns ``(x, self weights, cross weights, cache)``, the cache updated (None
        without one)."""
        x, (self_weights, *new_cache) = self.residual(
            x, self.self_attention_norm,
            lambda h: self.attend_self(h, training, use_causal_mask=True, cache=None if cache is None else tuple(cache),
                                       cache_update_index=cache_update_index), training)

        def attend_cross(h):  # the source's keys and values, projected once: the cache is not updated
            output, weights, _ = self.cross_attention(h, None, attention_mask=cross_mask, cache=cross_cache,
                                                      return_attention_scores=True, training=training)
            return output, weights

        x, cross_weights = self.residual(x, self.cross_attention_norm, attend_cross, training)
        return self.feed_forward(x, training), self_weights, cross_weights, new_cache[0] if new_cache else None


# -- what every Transformer stack sets up (the encoder-decoder here, the encoder-only classifier) ----
def set_stack_arguments(model, embed_dim, intermediate_dim, num_layers, num_heads, dropout, attention_dropout,
                        positions, max_length, norm_first, activation, num_kv_heads, attention_window):
    """Validates the arguments of a stack of Transformer layers and sets them on ``model``, one
    attribute each, named as the argument; then enforces ``CONSTRAINTS`` (the size rules)."""
    for name, value in (("embed_dim", embed_dim), ("intermediate_dim", intermediate_dim),
                        ("num_layers", num_layers), ("num_heads", num_heads), ("max_length", max_length)):
        setattr(model, name, positive_int(name, value))
    model.dropout, model.attention_dropout = rate("dropout", dropout), rate("attention_dropout", attention_dropout)
    model.positions = choice("positions", positions, POSITIONS)
    model.norm_first = boolean("norm_first", norm_first)
    model.activation = choice("activation", activation, ACTIVATIONS)
    model.num_kv_heads = positive_int("num_kv_heads", num_kv_heads, allow_none=True)
    model.attention_window = positive_int("attention_window", attention_window, allow_none=True)
    enforce(CONSTRAINTS, embed_dim=embed_dim, num_heads=num_heads, positions=positions, num_kv_heads=num_kv_heads)


def encoder_stack(model, x, mask, training=None):
    """``model.encoder_layers`` in turn over the embedded ``x [B, T, D]``, padding keys masked (``mask
    [B, T]``), then ``model.encoder_norm`` under pre-norm (``norm_first``: nothing else normalises the
    last residual sum). Returns ``(x [B, T, D], per-layer weights [B, H, T, T])``."""
    attention_mask = ops.expand_dims(mask, 1)  # [B, 1, T]: keys only
    maps = []
    for layer in model.encoder_layers:
        x, weights = layer(x, attention_mask, training=training)
        maps.append(weights)
    if model.norm_first:
        x = model.encoder_norm(x)
    return x, maps


def embedding_initializer(embed_dim):
    """N(0, d_model^-1/2) for the token embeddings, so that the sqrt(d_model) scaling gives embeddings
    of unit variance, on a par with the sinusoidal positions (as tensor2tensor); Keras' default
    U(-0.05, 0.05) lets the positions drown the words early in training. Unseeded: one such object
    gives every table it initialises the same draw."""
    return keras.initializers.RandomNormal(stddev=embed_dim ** -0.5)


def added_positions(positions, max_length, name, dtype):
    """The position layer added to the scaled embeddings (``learned``, ``sinusoidal``), or None:
    rotary, relative, t5 and alibi act inside self-attention, ``none`` nowhere."""
    if positions == "learned":
        return zoo_attention.create("learned", max_length=max_length, name=name, dtype=dtype)
    if positions == "sinusoidal":
        return zoo_attention.create("sinusoidal", name=name, dtype=dtype)
    return None


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
    rotates the queries and keys of self-attention instead (Su et al. 2021); or positions as a bias
    on the self-attention scores (``MultiHeadAttention``'s ``score_bias``): ``"relative"`` (Shaw et al.
    2018, clipped distances in keys and values, learned per layer), ``"t5"`` (Raffel et al. 2020, a
    scalar per head and distance bucket, one table per stack: bidirectional buckets in the encoder,
    causal in the decoder), ``"alibi"`` (Press et al. 2022, a fixed penalty ``-m_h |i - j|``); or
    ``"none"``, no positions at all (Kazemnejad et al. 2023: a causal decoder can infer them). Output:
    ``softmax(y W_o + b)``; ``tie_output`` uses the target embedding matrix as ``W_o^T``
    (sec. 3.4); ``share_embeddings`` uses one embedding for both sides (equal vocabularies).

    Attention options (each of the encoder's and decoder's self-attention; the cross-attention is
    always ``multi_head``, with the shared key-value heads): ``attention`` names any registered
    self-attention of ``zoo.attention`` (``multi_head``, or a ``kind: self`` layer such as
    ``memory_efficient`` or ``linear``, which subclass ``MultiHeadAttention`` and keep its call and
    its ``initial_cache``), built with ``attention_options`` and the Transformer's own ``num_heads``,
    ``d_k = embed_dim / num_heads``, ``attention_dropout``, ``num_kv_heads`` and ``attention_window``
    (``OWNED_OPTIONS``); ``num_kv_heads`` shares key-value heads (GQA, Ainslie et al. 2023; 1 = MQA,
    Shazeer 2019), so the decoding cache holds ``H_kv`` heads (``cache_bytes_per_token``);
    ``attention_window=W`` keeps each self-attention to ``|i - j| < W`` (Beltagy et al. 2020; causal in
    the decoder: ``0 <= i - j < W``), and the decoder's cache to ``W`` rolling slots.

    ``teacher_forced`` runs all target positions at once (causal mask, no loop) and returns
    the last decoder layer's cross-attention averaged over heads, ``[B, Tt, Ts]``.
    ``decode_step`` is incremental: the decoder self-attention keys/values of earlier steps
    sit in a cache preallocated by ``initial_state(memory, max_length)``, each layer's
    ``self_attention.initial_cache`` (``multi_head``: keys and values ``[B, H_kv, L, d_k]``, fixed
    shapes: step ``t`` writes slot ``t``, slots after ``t`` are masked; ``W`` rolling slots with a window), and
    the cross-attention keys/values of the source are computed once in ``encode``; both are
    kept heads first, in the layouts the two products take, so a step transposes neither. Each
    encoder and decoder layer has one forward path, its ``call``: a decoding step is the same
    ``call`` on one position with the layer's cache (``MultiHeadAttention``'s ``cache`` and
    ``cache_update_index``, as keras-hub's ``CachedMultiHeadAttention``).
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
        positions: ``"rotary"`` (default), ``"sinusoidal"`` (the paper), ``"learned"``, ``"relative"``,
            ``"t5"``, ``"alibi"`` or ``"none"`` (see above). On the dates task without a learning-rate
            warmup, rotary trains several times faster than sinusoidal.
        max_length: positive int, positions with a learned embedding (``positions="learned"``;
            later positions reuse the last one).
        norm_first: bool, pre-norm instead of the paper's post-norm.
        share_embeddings: bool, one embedding matrix for source and target (needs
            ``source_vocab_size == target_vocab_size``).
        tie_output: bool, the output projection is the transposed target embedding.
        activation: ``"relu"`` (the paper) or ``"gelu"``, the FFN's nonlinearity.
        num_kv_heads: positive int dividing ``num_heads``, or None (= ``num_heads``): key-value heads.
        attention_window: positive int ``W`` or None (full attention): sliding-window self-attention.
        attention: str, the self-attention's registered name (``"multi_head"``).
        attention_options: dict of its other keyword arguments (``conf/attention/<name>.yaml``).

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
        Shaw et al. Self-Attention with Relative Position Representations. NAACL 2018.
        Raffel et al. Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer. 2020.
        Press et al. Train Short, Test Long: Attention with Linear Biases. ICLR 2022.
        Kazemnejad et al. The Impact of Positional Encoding on Length Generalization in Transformers. 2023.
        Ainslie et al. GQA. EMNLP 2023. Shazeer. Fast Transformer Decoding: One Write-Head is All You Need. 2019.
        Beltagy et al. Longformer: The Long-Document Transformer. 2020.
    """

    def __init__(self, source_vocab_size, target_vocab_size, embed_dim=64, intermediate_dim=256, num_layers=2,
                 num_heads=4, dropout=0.1, attention_dropout=0.0, positions="rotary", max_length=256,
                 norm_first=False, share_embeddings=False, tie_output=False, activation="relu", num_kv_heads=None,
                 attention_window=None, attention="multi_head", attention_options=None, **kwargs):
        if "hidden_size" in kwargs:
            raise ValueError("TransformerSeq2Seq has no argument `hidden_size`: the feed-forward size is "
                             "`intermediate_dim` (model.intermediate_dim in a config; renamed from hidden_size). "
                             f"Received: hidden_size={kwargs['hidden_size']!r}")
        super().__init__(**kwargs)
        self.source_vocab_size = positive_int("source_vocab_size", source_vocab_size)
        self.target_vocab_size = positive_int("target_vocab_size", target_vocab_size)
        set_stack_arguments(self, embed_dim, intermediate_dim, num_layers, num_heads, dropout, attention_dropout,
                            positions, max_length, norm_first, activation, num_kv_heads, attention_window)
        self.share_embeddings = boolean("share_embeddings", share_embeddings)
        self.tie_output = boolean("tie_output", tie_output)
        if attention not in zoo_attention.names():
            raise invalid("attention", "a registered self-attention: " + ", ".join(zoo_attention.names()), attention)
        self.attention = attention
        if attention_options is not None and not isinstance(attention_options, dict):
            raise invalid("attention_options", "a dict of keyword arguments for the attention layer",
                          attention_options)
        self.attention_options = dict(attention_options or {})
        if self.share_embeddings and source_vocab_size != target_vocab_size:
            raise ValueError("Received an invalid value for argument `share_embeddings`: True needs equal "
                             f"vocabulary sizes. Received: source_vocab_size={source_vocab_size}, "
                             f"target_vocab_size={target_vocab_size}")
        self.head_dim = embed_dim // num_heads

        dtype = self.dtype_policy
        init = embedding_initializer(embed_dim)
        self.source_embedding = keras.layers.Embedding(source_vocab_size, embed_dim, name="source_embedding",
                                                       embeddings_initializer=init, dtype=dtype)
        self.target_embedding = (self.source_embedding if self.share_embeddings else
                                 keras.layers.Embedding(target_vocab_size, embed_dim, name="target_embedding",
                                                        embeddings_initializer=init, dtype=dtype))

        def score_bias(side):
            """The score bias of a stack: t5's table and alibi's slopes are one for all its layers
            (T5 shares the bias over a stack), relative's embeddings one per layer."""
            if self.positions == "t5":
                return zoo_attention.create("t5", num_heads=num_heads, bidirectional=side == "encoder",
                                            name=f"{side}_position_bias", dtype=dtype)
            if self.positions == "alibi":
                return zoo_attention.create("alibi", num_heads=num_heads, name=f"{side}_position_bias", dtype=dtype)
            return None

        def layer_bias(shared, name):
            if self.positions == "relative":
                return zoo_attention.create("relative", name=f"{name}_relative_positions", dtype=dtype)
            return shared

        self.source_positions = added_positions(self.positions, max_length, "source_positions", dtype)
        self.target_positions = added_positions(self.positions, max_length, "target_positions", dtype)
        self.encoder_position_bias, self.decoder_position_bias = score_bias("encoder"), score_bias("decoder")
        self.embedding_dropout = keras.layers.Dropout(self.dropout, name="embedding_dropout", dtype=dtype)
        block = dict(embed_dim=embed_dim, intermediate_dim=intermediate_dim, num_heads=num_heads, dropout=self.dropout,
                     attention_dropout=self.attention_dropout, norm_first=self.norm_first,
                     activation=self.activation, rotary=self.positions == "rotary", attention=self.attention,
                     attention_options=self.attention_options, num_kv_heads=self.num_kv_heads,
                     attention_window=self.attention_window, dtype=dtype)
        self.encoder_layers = [_EncoderLayer(name=f"encoder_{i}", **block,
                                             score_bias=layer_bias(self.encoder_position_bias, f"encoder_{i}"))
                               for i in range(num_layers)]
        self.decoder_layers = [_DecoderLayer(name=f"decoder_{i}", **block,
                                             score_bias=layer_bias(self.decoder_position_bias, f"decoder_{i}"))
                               for i in range(num_layers)]
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
        x, maps = encoder_stack(self, x, mask, training=training)
        return x, mask, maps

    def _memory(self, memory, mask):
        """The decoder's memory: the encoder output, its mask, and each decoder layer's cross-attention
        cache ``(K W^K, V W^V)`` of it, heads first ``[B, H, Ts, d_k]``, computed once per source."""
        cross = [layer.cross_attention.prepare(memory) for layer in self.decoder_layers]
        return {"memory": memory, "memory_mask": mask, "cross_keys": tuple(k for k, _ in cross),
                "cross_values": tuple(v for _, v in cross)}

    def _decode(self, memory, target_in, caches=None, step=None, training=None):
        """The decoder stack on ``target_in [B, T]``: ``(y [B, T, D] (before ``_logits``), self maps,
        cross maps, caches)``. All positions at once (``caches`` None, causal), or with each layer's
        self-attention cache ``(keys, values)`` the positions from ``step [B]`` on (rows decode in
        lockstep: the cache is written at one index for all)."""
        start = 0 if step is None else step
        y = self._embed(self.target_embedding, self.target_positions, target_in, start_index=start, training=training)
        cross_mask = ops.expand_dims(memory["memory_mask"], 1)  # [B, 1, Ts]: keys only
        index = None if step is None else ops.max(step)
        self_maps, cross_maps, new_caches = [], [], []
        for i, layer in enumerate(self.decoder_layers):
            y, self_weights, cross_weights, cache = layer(
                y, (memory["cross_keys"][i], memory["cross_values"][i]), cross_mask,
                cache=None if caches is None else caches[i], cache_update_index=index, training=training)
            self_maps.append(self_weights)
            cross_maps.append(cross_weights)
            new_caches.append(cache)
        return y, self_maps, cross_maps, new_caches

    # -- the decoder interface ------------------------------------------------------------------
    @kernels.replaceable
    def encode(self, source, training=None):
        memory, mask, _ = self._encode(source, training=training)
        return self._memory(memory, mask)

    def initial_state(self, memory, max_length=None):
        """``(t, *cache_1, ..., *cache_N)``: step ``t = 0`` per row ``[B]``, then each decoder layer's
        empty self-attention cache, its ``initial_cache`` (``multi_head``: keys and values
        ``[B, H_kv, max_length, d_k]``, or ``[B, H_kv, W, d_k]`` with a window), as one flat tuple.

        Every tensor has the batch first, so beam search can reorder hypotheses.
        """
        if max_length is None:
            raise ValueError("TransformerSeq2Seq.initial_state needs `max_length`, the size of its "
                             "key/value cache. Received: max_length=None")
        batch = ops.shape(memory["memory"])[0]
        caches = [layer.self_attention.initial_cache(batch, max_length, self.compute_dtype)
                  for layer in self.decoder_layers]
        return (ops.zeros((batch,), "int32"),) + tuple(part for cache in caches for part in cache)

    def split_caches(self, caches):
        """The flat cache parts of a decoder state (after ``t``) -> one tuple per decoder layer."""
        out, start = [], 0
        for layer in self.decoder_layers:
            count = len(layer.self_attention.initial_cache(1, 1))
            out.append(tuple(caches[start:start + count]))
            start += count
        return out

    def decoding_cache_bytes(self, max_length):
        """The decoder's self-attention cache of one sequence decoded up to ``max_length`` positions, in
        bytes: its ``initial_cache`` parts (``multi_head``: ``2 N H_kv L d_k`` values; with a window
        ``L = W`` whatever ``max_length``). Sharing key-value heads divides it by ``H / H_kv``."""
        self.ensure_built()
        width = np.dtype(keras.backend.standardize_dtype(self.compute_dtype).replace("bfloat16", "float16")).itemsize
        parts = [p for layer in self.decoder_layers for p in layer.self_attention.initial_cache(1, max_length)]
        return int(sum(math.prod(p.shape) for p in parts)) * width

    @property
    def feature_size(self):
        return self.embed_dim

    def output_logits(self, features, training=None):
        """``y W_o + b`` (after the final LayerNorm with ``norm_first``), position by position."""
        return self._logits(features)

    @kernels.replaceable
    def decode_features(self, token, state, memory, training=None):
        """The last decoder layer's output ``[B, D]`` at one position, before ``output_logits``: the
        decoder stack on ``token [B]`` at position ``t`` with the caches of ``state``."""
        step, caches = state[0], state[1:]
        y, _, cross_maps, new_caches = self._decode(memory, ops.expand_dims(token, 1),
                                                    caches=self.split_caches(caches), step=step, training=training)
        new_state = (step + 1, *[part for cache in new_caches for part in cache])
        return ops.squeeze(y, 1), new_state, attention_row(cross_maps[-1])

    def teacher_forced_features(self, source, target_in, training=None):
        """All target positions in parallel; attention is the last layer's cross-attention, head mean."""
        self.ensure_built()
        memory = self.encode(source, training=training)
        features, _, cross_maps, _ = self._decode(memory, target_in, training=training)
        return features, ops.cast(ops.mean(cross_maps[-1], axis=1), "float32")

    def call(self, inputs, training=None, return_features=False):
        """Teacher-forced logits; with ``return_features`` (the training step's) ``training_features``."""
        if not return_features:
            return super().call(inputs, training=training)
        source, target_in = inputs
        return self.training_features(source, target_in, training=training)

    @kernels.replaceable
    def training_features(self, source, target_in, training=None):
        """The last decoder layer's output at the real target positions (``target_in != 0``; the data
        pad ``target_in`` and ``target_out`` alike) and 0 at padding: what the training step's loss
        reads (``teacher_forced_features`` with the padding zeroed)."""
        features, _ = self.teacher_forced_features(source, target_in, training=training)
        real = ops.cast(ops.expand_dims(ops.not_equal(target_in, PAD_ID), -1), features.dtype)
        return features * real

    def attention_maps(self, inputs):
        """Per-layer, per-head attention weights of teacher-forced decoding, for plots.

        Returns a dict of lists with one entry per layer: ``encoder`` ``[B, H, Ts, Ts]``,
        ``self`` (decoder, causal) ``[B, H, Tt, Tt]`` and ``cross`` ``[B, H, Tt, Ts]``.
        """
        source, target_in = inputs
        self.ensure_built()
        memory, mask, encoder_maps = self._encode(source, training=False)
        _, self_maps, cross_maps, _ = self._decode(self._memory(memory, mask), target_in, training=False)
        return {"encoder": encoder_maps, "self": self_maps, "cross": cross_maps}

    def get_config(self):
        config = super().get_config()
        config.update({
            "source_vocab_size": self.source_vocab_size, "target_vocab_size": self.target_vocab_size,
            "embed_dim": self.embed_dim, "intermediate_dim": self.intermediate_dim, "num_layers": self.num_layers,
            "num_heads": self.num_heads, "dropout": self.dropout, "attention_dropout": self.attention_dropout,
            "positions": self.positions, "max_length": self.max_length, "norm_first": self.norm_first,
            "share_embeddings": self.share_embeddings, "tie_output": self.tie_output,
            "activation": self.activation, "num_kv_heads": self.num_kv_heads,
            "attention_window": self.attention_window, "attention": self.attention,
            "attention_options": self.attention_options,
        })
        return config


@register_model("transformer")
def transformer(source_vocab_size, target_vocab_size, **kwargs):
    return TransformerSeq2Seq(source_vocab_size, target_vocab_size, name="transformer", **kwargs)
