"""RNN encoder-decoder without attention: a fixed-size context (Sutskever et al. 2014, Cho et al. 2014)."""

import keras
from keras import ops

from zoo.checks import boolean
from zoo.models.encoder_decoder import Seq2SeqModel
from zoo.models.recurrent import rnn
from zoo.models.recurrent.rnn import CELL_RULE, SPLIT_ENCODER
from zoo.models.registry import register_model

CONSTRAINTS = CELL_RULE + SPLIT_ENCODER  # the declared rules, read by the validator (zoo.catalog)


@keras.saving.register_keras_serializable(package="zoo")
class PlainSeq2Seq(Seq2SeqModel):
    """Stacked GRU/LSTM encoder-decoder whose only view of the source is one vector.

    The encoder reads the source; its final state is the context ``c`` (the top layer's, the
    two directions concatenated when bidirectional). The decoder starts from the encoder's
    final state(s), layer by layer (Sutskever et al. 2014, sec. 2), and, as in Cho et al.
    (2014, eq. for ``h<t> = f(h<t-1>, y_{t-1}, c)``, sec. 2.2), sees ``c`` again at every step,
    concatenated with the embedding of the previous token::

        s_t = RNN([e(y_{t-1}); c], s_{t-1}),   s_0 = encoder final state
        p(y_t | y_<t, x) = softmax(W_o s_t)

    There is no attention: ``decode_step`` returns an all-zero attention row ``[B, Ts]`` and
    ``attention_weights`` all-zero ``[B, Tt, Ts]`` (the interface asks for one; a plot of it
    is blank, and the class attribute ``has_attention = False`` says so). Since the decoder input does not depend on its own outputs, teacher forcing
    runs the decoder RNN over the whole target at once.

    ``reverse_source`` reverses each source sentence (within its length, padding stays at the
    end) before encoding, the trick of Sutskever et al. (2014, sec. 3.3). Bidirectional
    encoders have ``hidden_size // 2`` units per direction so that the context and the final
    states are ``hidden_size`` wide.

    Shapes: ``B`` batch, ``Ts`` source steps, ``Tt`` target steps, ``H`` = ``hidden_size``.

    Args:
        source_vocab_size, target_vocab_size: vocabulary sizes (id 0 = padding).
        embed_dim: positive int, embedding size of both sides.
        hidden_size: positive int ``H``, the decoder RNN size. The encoder is sized so that the
            context and its final states are ``H`` wide too: ``H`` units, or ``H // 2`` per
            direction when ``bidirectional`` (then ``H`` must be even).
        cell: ``"gru"`` (Cho et al.) or ``"lstm"`` (Sutskever et al.).
        num_layers: positive int, stacked RNN layers in the encoder and in the decoder
            (Sutskever et al. use 4).
        bidirectional: bool, bidirectional encoder.
        reverse_source: bool, read the source backwards.
        dropout: float in [0, 1), on embeddings, between stacked layers and on decoder outputs.

    Example:
        >>> import numpy as np
        >>> model = PlainSeq2Seq(13, 11, embed_dim=8, hidden_size=12)
        >>> tuple(model((np.array([[5, 6, 3, 0]]), np.array([[2, 5, 6]]))).shape)
        (1, 3, 11)

    References:
        Sutskever, Vinyals, Le. Sequence to Sequence Learning with Neural Networks. NeurIPS
        2014. https://arxiv.org/abs/1409.3215
        Cho et al. Learning Phrase Representations using RNN Encoder-Decoder for Statistical
        Machine Translation. EMNLP 2014, sec. 2.2. https://arxiv.org/abs/1406.1078
        Zhang et al. Dive into Deep Learning, sec. 10.7 (``Seq2SeqDecoder``).
    """

    has_attention = False

    def __init__(self, source_vocab_size, target_vocab_size, embed_dim=64, hidden_size=128, cell="gru",
                 num_layers=1, bidirectional=False, reverse_source=False, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        rnn.setup_rnn_encoder_decoder(self, source_vocab_size, target_vocab_size, embed_dim, hidden_size, cell,
                                      num_layers, bidirectional, dropout)
        self.reverse_source = boolean("reverse_source", reverse_source)

    def build(self, input_shape=None):
        hidden, memory_dim = self.hidden_size, self.memory_dim  # equal: the context c is H wide
        self.source_embedding.build((None, None))
        self.target_embedding.build((None,))
        for index, layer in enumerate(self.encoder_layers):
            layer.build((None, None, self.embed_dim if index == 0 else memory_dim))
        for index, layer in enumerate(self.decoder_layers):
            layer.build((None, None, self.embed_dim + memory_dim if index == 0 else hidden))
        self.output_projection.build((None, hidden))
        self.built = True

    def encode(self, source, training=None):
        mask = rnn.source_mask(source)
        if self.reverse_source:
            source = rnn.reverse_padded(source, ops.sum(ops.cast(mask, "int32"), axis=1))
        embedded = self.embedding_dropout(self.source_embedding(source), training=training)
        _, finals = rnn.run_encoder(self.encoder_layers, embedded, mask, self.bidirectional,
                                    self.layer_dropout, training=training)
        return {"memory_mask": mask, "context": finals[-1][0],  # c: the top layer's final h
                "initial_states": tuple(state for layer in finals for state in layer)}

    def initial_state(self, memory, max_length=None):
        """The encoder's final state(s), ``h (, c)`` per layer."""
        return tuple(memory["initial_states"])

    @property
    def feature_size(self):
        return self.hidden_size

    def decode_features(self, token, state, memory, training=None):
        """The decoder output ``s_t`` (after dropout), before ``W_o``."""
        embedded = self.embedding_dropout(self.target_embedding(token), training=training)
        inputs = ops.concatenate([embedded, memory["context"]], axis=-1)
        cells = [layer.cell for layer in self.decoder_layers]
        output, new_state = rnn.step_cells(cells, inputs, state, self.per_layer, self.layer_dropout,
                                           training=training)
        return self.output_dropout(output, training=training), new_state, self._no_attention(memory)

    def output_logits(self, features, training=None):
        return self.output_projection(features)

    def teacher_forced_features(self, source, target_in, training=None):
        """All target steps at once (the decoder input does not depend on its outputs)."""
        self.ensure_built()
        memory = self.encode(source, training=training)
        embedded = self.embedding_dropout(self.target_embedding(target_in), training=training)
        context = ops.broadcast_to(ops.expand_dims(memory["context"], 1),
                                   (*ops.shape(embedded)[:2], self.memory_dim))
        outputs = rnn.run_decoder(self.decoder_layers, ops.concatenate([embedded, context], axis=-1),
                                  memory["initial_states"], self.per_layer, self.layer_dropout,
                                  training=training)
        attention = ops.zeros((ops.shape(target_in)[0], ops.shape(target_in)[1], ops.shape(source)[1]), "float32")
        return self.output_dropout(outputs, training=training), attention

    def _no_attention(self, memory):
        return ops.zeros_like(ops.cast(memory["memory_mask"], "float32"))  # [B, Ts]

    def get_config(self):
        config = super().get_config()
        config.update({
            "source_vocab_size": self.source_vocab_size, "target_vocab_size": self.target_vocab_size,
            "embed_dim": self.embed_dim, "hidden_size": self.hidden_size, "cell": self.cell,
            "num_layers": self.num_layers, "bidirectional": self.bidirectional,
            "reverse_source": self.reverse_source, "dropout": self.dropout,
        })
        return config


@register_model("seq2seq")
def seq2seq(source_vocab_size, target_vocab_size, **kwargs):
    return PlainSeq2Seq(source_vocab_size, target_vocab_size, name="seq2seq", **kwargs)
