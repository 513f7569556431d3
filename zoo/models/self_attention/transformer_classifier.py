"""An encoder-only Transformer that classifies a token sequence (``model=transformer_classifier``)."""

import inspect
import math

import keras
from keras import ops

import zoo.attention as zoo_attention
from zoo.checks import choice, positive_int
from zoo.models.exported_model import ExportedModel
from zoo.models.registry import register_model
from zoo.models.self_attention import transformer
from zoo.models.self_attention.layer_norm import LayerNormalization
from zoo.models.self_attention.transformer import CONSTRAINTS as TRANSFORMER_CONSTRAINTS
from zoo.models.self_attention.transformer import OWNED_OPTIONS as TRANSFORMER_OWNED_OPTIONS
from zoo.tokens import PAD_ID

POOLINGS = ("mean", "cls")
# model.attention is the encoder's self-attention (read by the validator, zoo.config, without importing this
# module): multi_head or a kind: self attention; encoder only, so one that cannot be causal (Linformer) is fine;
# the options the model sets for every layer itself are refused in model.attention_options (as the Transformer's).
ATTENTION_KIND = "self"
CAUSAL = False
OWNED_OPTIONS = TRANSFORMER_OWNED_OPTIONS + ("max_length",)  # and the longest sequence (Linformer's)
# The rules between the arguments, declared once: the constructor enforces them and the config
# validator reads this literal without importing Keras (zoo.catalog.model_constraints): the
# Transformer's stack's (transformer.set_stack_arguments enforces them) and the pooling's.
CONSTRAINTS = TRANSFORMER_CONSTRAINTS + ({"rule": "one_of", "key": "pooling", "values": POOLINGS},)
ADDED = ("sinusoidal", "learned")  # positions added to the embeddings; rotary and the score biases act in attention


def _accepted(layer_class, **options):
    """The ``options`` the Transformer's encoder layer takes (its arguments grow: attention, score
    biases, key-value heads, windows), so this model passes what the layer of the day accepts."""
    wanted = inspect.signature(layer_class.__init__).parameters
    return {k: v for k, v in options.items() if k in wanted}


def attention_takes_max_length(attention):
    """Whether the registered attention ``attention`` is sized for a longest sequence (``max_length``:
    Linformer's projections ``E``, ``F``); the classifier sets it to its own ``max_length``."""
    layer = zoo_attention.ATTENTIONS.get(attention) if attention in zoo_attention.names() else None
    return layer is not None and "max_length" in inspect.signature(layer.__init__).parameters


@keras.saving.register_keras_serializable(package="zoo")
class TransformerClassifier(ExportedModel):
    """The Transformer's encoder, pooled, and a dense layer onto the classes (encoder-only classification).

    ``x = Embedding(tokens) sqrt(d_model) (+ positions)``, then ``N`` encoder layers of
    ``zoo.models.self_attention.transformer`` (self-attention and FFN, each with a residual connection,
    dropout and LayerNorm, sec. 3.1 of Vaswani et al. 2017; pre-norm by default, ``norm_first``), padding
    keys masked; ``h = mean_{t real} x_t`` (``pooling="mean"``) or the output at a learned ``[CLS]``
    vector put before the tokens (``"cls"``, Devlin et al. 2019); ``logits = h W + b``, ``[B, C]``.

    **Mean pooling by default**: ListOps' answer is a function of the whole tree, and the mean over the
    real tokens hands every position's output a gradient from the first step and needs no extra token
    (its padding rows are left out, so it does not depend on the batch's padding); ``cls`` lets the last
    layer's attention choose what to read instead, as BERT does.

    The encoder layer is the Transformer's own (``transformer._EncoderLayer``: the same layer,
    the same fast path under ``kernels=fast``), with whatever it takes: ``attention`` (a registered
    self-attention, ``model.attention``, with ``attention_options``), positions as score biases
    (``relative``, ``t5``, ``alibi``), ``rotary``, or ``none``. ``sinusoidal`` and ``learned``
    positions are added to the embeddings.

    ``call(tokens)`` is what the shared training loop reads: the ``C`` logits behind a padding
    column, ``[B, 1, C + 1]`` float32 (the loop's labels are ``class + 1``, id 0 being padding:
    ``zoo.data.classification``); ``classify(tokens)`` is the plain ``[B, C]``. Shapes: ``B`` batch,
    ``T`` tokens, ``D`` = ``embed_dim``, ``H`` heads, ``C`` classes.

    Args:
        vocab_size: the token vocabulary (id 0 = padding), from the data.
        num_classes: ``C``, from the data.
        embed_dim, intermediate_dim, num_layers, num_heads, dropout, attention_dropout, positions,
            max_length, norm_first, activation: as ``TransformerSeq2Seq``'s (``num_layers`` encoder
            layers only); ``max_length`` also sizes an attention made for a longest sequence.
        pooling: ``"mean"`` over the real tokens, or ``"cls"``.
        num_kv_heads: key-value heads (GQA; 1 = MQA), dividing ``num_heads``; None = ``num_heads``.
        attention_window: ``W``, self-attention to ``|i - j| < W`` only; None = full.
        attention: the self-attention of every encoder layer (``multi_head``, the default).
        attention_options: that layer's options (None: its defaults); the heads, head size and
            dropout are the model's, and so is the longest sequence of an attention sized for one
            (Linformer's ``max_length``: ``max_length``, plus the ``[CLS]`` row).

    Example:
        >>> import numpy as np
        >>> model = TransformerClassifier(20, 10, embed_dim=8, intermediate_dim=16, num_heads=2)
        >>> tuple(model.classify(np.array([[5, 6, 7, 0], [8, 9, 0, 0]])).shape)
        (2, 10)

    References:
        Vaswani et al. Attention Is All You Need. NeurIPS 2017, sec. 3.
        Devlin et al. BERT: Pre-training of Deep Bidirectional Transformers. NAACL 2019, sec. 3 ([CLS]).
        Tay et al. Long Range Arena: A Benchmark for Efficient Transformers. ICLR 2021 (encoder-only
        classification of ListOps).
    """

    def __init__(self, vocab_size, num_classes, embed_dim=64, intermediate_dim=128, num_layers=2, num_heads=4,
                 dropout=0.1, attention_dropout=0.0, positions="sinusoidal", max_length=512, norm_first=True,
                 activation="relu", pooling="mean", num_kv_heads=None, attention_window=None, attention="multi_head",
                 attention_options=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.num_classes = positive_int("num_classes", num_classes)
        transformer.set_stack_arguments(self, embed_dim, intermediate_dim, num_layers, num_heads, dropout,
                                        attention_dropout, positions, max_length, norm_first, activation,
                                        num_kv_heads, attention_window)
        self.pooling = choice("pooling", pooling, POOLINGS)
        self.attention = str(attention)
        self.attention_options = dict(attention_options or {})
        if attention_takes_max_length(self.attention):  # Linformer's E, F: the model's longest input
            self.attention_options["max_length"] = self.max_length + (self.pooling == "cls")

        dtype = self.dtype_policy
        self.embedding = keras.layers.Embedding(vocab_size, embed_dim, name="embedding", dtype=dtype,
                                                embeddings_initializer=transformer.embedding_initializer(embed_dim))
        self.position_layer = transformer.added_positions(self.positions, max_length, "positions", dtype)
        self.score_bias = self._score_bias(dtype)
        self.embedding_dropout = keras.layers.Dropout(self.dropout, name="embedding_dropout", dtype=dtype)
        layer_class = transformer._EncoderLayer
        block = dict(embed_dim=embed_dim, intermediate_dim=intermediate_dim, num_heads=num_heads, dropout=self.dropout,
                     attention_dropout=self.attention_dropout, norm_first=self.norm_first,
                     activation=self.activation, rotary=self.positions == "rotary", dtype=dtype)
        extra = _accepted(layer_class, attention=self.attention, attention_options=self.attention_options,
                          score_bias=self.score_bias, num_kv_heads=self.num_kv_heads,
                          attention_window=self.attention_window)
        for key in ("num_kv_heads", "attention_window"):
            if key not in extra and getattr(self, key) is not None:
                raise ValueError(f"Received an invalid value for argument `{key}`, expected None (the Transformer's "
                                 f"encoder layer takes no {key} yet). Received: {key}={getattr(self, key)!r}")
        if "attention" not in extra and self.attention != "multi_head":
            raise ValueError(f"Received an invalid value for argument `attention`, expected 'multi_head' (the "
                             f"Transformer's encoder layer takes no other yet). Received: attention={attention!r}")
        if "score_bias" not in extra and self.score_bias is not None:
            raise ValueError("Received an invalid value for argument `positions`, expected one of 'sinusoidal', "
                             "'learned', 'rotary', 'none' (the Transformer's encoder layer takes no score bias "
                             f"yet). Received: positions={positions!r}")
        self.encoder_layers = [layer_class(name=f"encoder_{i}", **block, **extra) for i in range(num_layers)]
        if self.norm_first:
            self.encoder_norm = LayerNormalization(epsilon=1e-5, name="encoder_norm", dtype=dtype)
        self.output_projection = keras.layers.Dense(num_classes, name="output_projection", dtype=dtype)

    def _score_bias(self, dtype):
        """The position layer that biases every layer's attention scores (one, shared), or None."""
        if self.positions == "alibi":
            return zoo_attention.create("alibi", num_heads=self.num_heads, name="alibi", dtype=dtype)
        if self.positions == "t5":
            return zoo_attention.create("t5", num_heads=self.num_heads, bidirectional=True, name="t5", dtype=dtype)
        if self.positions == "relative":
            return zoo_attention.create("relative", name="relative", dtype=dtype)
        return None

    def build(self, input_shape=None):
        shape = (None, None, self.embed_dim)
        self.embedding.build((None, None))
        if self.position_layer is not None:
            self.position_layer.build(shape)
        for layer in self.encoder_layers:
            layer.build(shape)
        if self.norm_first:
            self.encoder_norm.build(shape)
        if self.pooling == "cls":
            self.cls = self.add_weight(name="cls", shape=(self.embed_dim,),
                                       initializer=keras.initializers.RandomNormal(stddev=self.embed_dim ** -0.5))
        self.output_projection.build((None, self.embed_dim))
        self.built = True

    def build_from_config(self, config):  # a loaded .keras file: build, then the weights are set
        self.ensure_built()

    def encode(self, tokens, training=None):
        """``(x [B, T', D], mask [B, T'], per-layer weights [B, H, T', T'])``: the encoder's output, with
        the ``[CLS]`` row first when ``pooling="cls"`` (``T' = T + 1``)."""
        self.ensure_built()
        mask = ops.not_equal(tokens, PAD_ID)
        x = self.embedding(tokens) * ops.cast(math.sqrt(self.embed_dim), self.compute_dtype)
        if self.pooling == "cls":
            cls = ops.broadcast_to(ops.cast(self.cls, x.dtype), (ops.shape(x)[0], 1, self.embed_dim))
            x = ops.concatenate([cls, x], axis=1)
            mask = ops.concatenate([ops.ones_like(mask[:, :1]), mask], axis=1)
        if self.position_layer is not None:
            x = self.position_layer(x)
        x = self.embedding_dropout(x, training=training)
        x, maps = transformer.encoder_stack(self, x, mask, training=training)
        return x, mask, maps

    def classify(self, tokens, training=None):
        """Class logits ``[B, C]`` float32 of ``tokens [B, T]`` (0 = padding)."""
        self.ensure_built()
        x, mask, _ = self.encode(tokens, training=training)
        if self.pooling == "cls":
            pooled = x[:, 0]
        else:  # the mean over the real tokens (a row with none pools to 0)
            real = ops.cast(ops.expand_dims(mask, -1), x.dtype)
            pooled = ops.sum(x * real, axis=1) / ops.maximum(ops.sum(real, axis=1), ops.cast(1.0, x.dtype))
        return ops.cast(self.output_projection(pooled), "float32")

    def call(self, tokens, training=None):
        """``[B, 1, C + 1]``: the class logits after a padding column the softmax never picks (the training
        loop's labels are ``class + 1``; ``zoo.data.classification``)."""
        logits = self.classify(tokens, training=training)
        padding = ops.full((ops.shape(logits)[0], 1), -1e9, dtype="float32")
        return ops.expand_dims(ops.concatenate([padding, logits], axis=-1), 1)

    def attention_maps(self, tokens):
        """Every encoder layer's per-head self-attention weights ``[B, H, T', T']``, for plots."""
        self.ensure_built()
        return self.encode(tokens, training=False)[2]

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size, "num_classes": self.num_classes, "embed_dim": self.embed_dim,
            "intermediate_dim": self.intermediate_dim, "num_layers": self.num_layers, "num_heads": self.num_heads,
            "dropout": self.dropout, "attention_dropout": self.attention_dropout, "positions": self.positions,
            "max_length": self.max_length, "norm_first": self.norm_first, "activation": self.activation,
            "pooling": self.pooling, "num_kv_heads": self.num_kv_heads, "attention_window": self.attention_window,
            "attention": self.attention, "attention_options": self.attention_options,
        })
        return config


@register_model("transformer_classifier", task="classify")
def transformer_classifier(vocab_size, num_classes, **kwargs):
    return TransformerClassifier(vocab_size, num_classes, name="transformer_classifier", **kwargs)
