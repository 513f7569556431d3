"""RNN encoder-decoder with additive (or any alignment) attention, Bahdanau et al. 2015."""

import keras
from keras import ops

from zoo.models.seq2seq_model import Seq2SeqModel, register_model


def _positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"Received an invalid value for argument `{name}`, expected a positive integer. "
                         f"Received: {name}={value}")


@keras.saving.register_keras_serializable(package="zoo")
class BahdanauSeq2Seq(Seq2SeqModel):
    """Embedding + (bidirectional) GRU encoder, GRU decoder attending with its previous state.

    At target step ``i`` (d2l's ``Seq2SeqAttentionDecoder``): the query is the previous
    decoder state ``s_{i-1}``; the context ``c_i = sum_j alpha_ij h_j`` is concatenated with
    the embedding of the previous token ``y_{i-1}``; ``s_i = GRU([e(y_{i-1}); c_i], s_{i-1})``;
    ``p(y_i) = softmax(W_o s_i)``. The encoder's final state(s) pass through a ``tanh`` bridge
    to initialize ``s_0``. Attention keys (``U_a h_j`` for additive) are computed once per
    source sequence in ``encode``.

    Args:
        source_vocab_size, target_vocab_size: vocabulary sizes (id 0 = padding).
        embed_dim: embedding size of both sides.
        hidden_size: GRU size (each direction of the encoder, and the decoder).
        bidirectional: bool, bidirectional encoder.
        attention: name of a registered alignment attention (``zoo.attention.alignment_names()``).
        attention_options: dict of keyword arguments for that attention layer.
        dropout: dropout on embeddings and decoder outputs.

    References:
        Bahdanau, Cho, Bengio. Neural Machine Translation by Jointly Learning to Align and
        Translate. ICLR 2015. Zhang et al. Dive into Deep Learning, sec. 11.4.
    """

    def __init__(self, source_vocab_size, target_vocab_size, embed_dim=64, hidden_size=128,
                 bidirectional=True, attention="additive", attention_options=None, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        for name, value in [("source_vocab_size", source_vocab_size), ("target_vocab_size", target_vocab_size),
                            ("embed_dim", embed_dim), ("hidden_size", hidden_size)]:
            _positive_int(name, value)
        import zoo.attention as zoo_attention

        if attention not in zoo_attention.alignment_names():
            raise ValueError(f"Unknown alignment attention '{attention}' for model bahdanau. "
                             f"Available: {', '.join(zoo_attention.alignment_names())}")
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size
        self.embed_dim = embed_dim
        self.hidden_size = hidden_size
        self.bidirectional = bool(bidirectional)
        self.attention_name = attention
        self.attention_options = dict(attention_options or {})
        self.dropout = float(dropout)

        self.source_embedding = keras.layers.Embedding(source_vocab_size, embed_dim, mask_zero=True,
                                                       name="source_embedding")
        self.target_embedding = keras.layers.Embedding(target_vocab_size, embed_dim, name="target_embedding")
        rnn = keras.layers.GRU(hidden_size, return_sequences=True, return_state=True, name="encoder_gru")
        self.encoder_rnn = keras.layers.Bidirectional(rnn, name="encoder") if self.bidirectional else rnn
        self.bridge = keras.layers.Dense(hidden_size, activation="tanh", name="bridge")
        self.attention = zoo_attention.create(attention, name="attention", **self.attention_options)
        self.decoder_cell = keras.layers.GRUCell(hidden_size, name="decoder_gru")
        self.embedding_dropout = keras.layers.Dropout(self.dropout, name="embedding_dropout")
        self.output_dropout = keras.layers.Dropout(self.dropout, name="output_dropout")
        self.output_projection = keras.layers.Dense(target_vocab_size, name="output_projection")

    def build(self, input_shape=None):
        memory_dim = self.hidden_size * (2 if self.bidirectional else 1)
        self.source_embedding.build((None, None))
        self.target_embedding.build((None,))
        self.encoder_rnn.build((None, None, self.embed_dim))
        self.bridge.build((None, memory_dim))
        self.attention.build((None, 1, self.hidden_size), (None, None, memory_dim))
        self.decoder_cell.build((None, self.embed_dim + memory_dim))
        self.output_projection.build((None, self.hidden_size))
        self.built = True

    def encode(self, source, training=None):
        mask = ops.not_equal(source, 0)
        embedded = self.embedding_dropout(self.source_embedding(source), training=training)
        outputs = self.encoder_rnn(embedded, mask=mask, training=training)
        memory, final = outputs[0], ops.concatenate(outputs[1:], axis=-1)
        return {"memory": memory, "memory_mask": mask, "keys": self.attention.prepare_key(memory),
                "final_state": self.bridge(final)}

    def initial_state(self, memory, max_length=None):
        return (memory["final_state"],)

    def decode_step(self, token, state, memory, training=None):
        (previous,) = state
        query = ops.expand_dims(previous, 1)  # s_{i-1} as [B, 1, H]
        mask = ops.expand_dims(memory["memory_mask"], 1)  # [B, 1, Ts]
        context, weights = self.attention.attend(query, memory["memory"], memory["keys"], mask=mask,
                                                 return_attention_scores=True, training=training)
        embedded = self.embedding_dropout(self.target_embedding(token), training=training)
        rnn_input = ops.concatenate([embedded, ops.squeeze(context, 1)], axis=-1)
        output, new_state = self.decoder_cell(rnn_input, [previous], training=training)
        new_state = new_state[0] if isinstance(new_state, (list, tuple)) else new_state
        logits = self.output_projection(self.output_dropout(output, training=training))
        return logits, (new_state,), ops.squeeze(weights, 1)

    def get_config(self):
        config = super().get_config()
        config.update({
            "source_vocab_size": self.source_vocab_size, "target_vocab_size": self.target_vocab_size,
            "embed_dim": self.embed_dim, "hidden_size": self.hidden_size, "bidirectional": self.bidirectional,
            "attention": self.attention_name, "attention_options": self.attention_options, "dropout": self.dropout,
        })
        return config


@register_model("bahdanau")
def bahdanau(source_vocab_size, target_vocab_size, **kwargs):
    return BahdanauSeq2Seq(source_vocab_size, target_vocab_size, name="bahdanau", **kwargs)
