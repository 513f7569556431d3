"""RNN encoder-decoder with global or local attention on the current state, Luong et al. 2015."""

import keras
from keras import ops

from zoo.checks import boolean
from zoo.models import alignment
from zoo.models.encoder_decoder import Seq2SeqModel
from zoo.models.recurrent import rnn
from zoo.models.recurrent.rnn import CELL_RULE, SPLIT_ENCODER
from zoo.models.registry import register_model

CONSTRAINTS = CELL_RULE + SPLIT_ENCODER  # the declared rules, read by the validator (zoo.catalog)


@keras.saving.register_keras_serializable(package="zoo")
class LuongSeq2Seq(Seq2SeqModel):
    """Stacked GRU/LSTM encoder-decoder; attention on the current decoder state ``h_t``.

    At target step ``t`` the stacked decoder RNN first computes ``h_t`` (the top layer's
    output) from the previous token; then attention uses ``h_t`` as the query (Luong et al.
    2015, sec. 3, the "simpler computation path" ``h_t -> a_t -> c_t -> h~_t``)::

        a_t(s) = align(h_t, h_s) = softmax_s(score(h_t, h_s))          (eq. 7)
        c_t    = sum_s a_t(s) h_s
        h~_t   = tanh(W_c [c_t; h_t])                                     (eq. 5)
        p(y_t | y_<t, x) = softmax(W_s h~_t)                              (eq. 6)

    ``score`` is any alignment attention of ``zoo.attention`` (``general`` by default, eq. 8:
    ``h_t^T W_a h_s``; ``dot``, ``concat``, ``location``, ``local_m``, ``local_p``, ...).
    Local attention that takes the query position (``local_m``, ``p_t = t``) gets the 0-based
    target step; one that takes the previous step's weights (``location_aware``) gets
    ``a_{t-1}``, carried in the decoder state (``[B, Ts]``, from the layer's ``initial_weights``;
    the parallel teacher forcing's one call runs the queries in order, the same numbers). Keys
    (e.g. ``W_a h_s``) are computed once per source in ``encode``.

    With ``input_feeding`` (sec. 3.3) the attentional vector ``h~_{t-1}`` is concatenated with
    the embedding of ``y_{t-1}`` as the decoder input, so teacher forcing steps through time
    (``keras.ops.scan``). Without it the decoder RNN does not depend on attention, and
    teacher forcing runs the RNN over the whole target once and the attention over all
    steps at once (query ``[B, Tt, H]``): the same numbers, parallel in time.

    Encoder: ``num_layers`` GRU/LSTM layers; bidirectional ones have ``hidden_size // 2``
    units per direction, concatenated (as OpenNMT's ``brnn``), so the memory ``h_s`` and every
    final state are ``hidden_size`` wide and ``dot`` attention works. Decoder layer ``l``
    starts from encoder layer ``l``'s final state(s) (sec. 4.1 feeds the encoder's final states
    to the decoder). Dropout is applied to embeddings, between stacked layers and to ``h~_t``
    before ``W_s`` (sec. 4.1 uses 0.2 on the stacked LSTM).

    Shapes: ``B`` batch, ``Ts`` source steps, ``Tt`` target steps, ``H`` = ``hidden_size``,
    ``V`` target vocabulary.

    Args:
        source_vocab_size, target_vocab_size: vocabulary sizes (id 0 = padding).
        embed_dim: positive int, embedding size of both sides.
        hidden_size: positive int ``H``, the decoder RNN size. The encoder is sized so that the
            memory ``h_s`` and its final states are ``H`` wide too: ``H`` units, or ``H // 2`` per
            direction when ``bidirectional`` (then ``H`` must be even).
        cell: ``"lstm"`` (as in the paper) or ``"gru"``.
        num_layers: positive int, stacked RNN layers in the encoder and in the decoder.
        bidirectional: bool, bidirectional encoder (the paper's encoder is unidirectional).
        attention: name of a registered alignment attention (``zoo.attention.alignment_names()``).
        attention_options: dict of keyword arguments for that attention layer.
        input_feeding: bool, feed ``h~_{t-1}`` into the decoder input (sec. 3.3; the paper's best
            models use it). Off: training is parallel in time.
        dropout: float in [0, 1), on embeddings, between stacked layers and on ``h~_t``.

    Example:
        >>> import numpy as np
        >>> model = LuongSeq2Seq(13, 11, embed_dim=8, hidden_size=12)
        >>> tuple(model((np.array([[5, 6, 3, 0]]), np.array([[2, 5, 6]]))).shape)
        (1, 3, 11)

    References:
        Luong, Pham, Manning. Effective Approaches to Attention-based Neural Machine
        Translation. EMNLP 2015, sec. 3 (eq. 5-10), sec. 3.3 (input feeding).
        https://arxiv.org/abs/1508.04025
    """

    def __init__(self, source_vocab_size, target_vocab_size, embed_dim=64, hidden_size=128, cell="lstm",
                 num_layers=1, bidirectional=True, attention="general", attention_options=None,
                 input_feeding=False, dropout=0.2, **kwargs):
        super().__init__(**kwargs)
        rnn.setup_rnn_encoder_decoder(self, source_vocab_size, target_vocab_size, embed_dim, hidden_size, cell,
                                      num_layers, bidirectional, dropout)
        self.attention_name = attention
        self.attention_options = dict(attention_options or {})
        self.input_feeding = boolean("input_feeding", input_feeding)

        dtype = self.dtype_policy
        self.attention = alignment.create_alignment_attention("luong", attention, self.attention_options, dtype)
        self.attentional = keras.layers.Dense(hidden_size, activation="tanh", use_bias=False, name="attentional",
                                              dtype=dtype)  # W_c; W_s is output_projection
        self.groups_hypotheses = alignment.groups_hypotheses(self.attention)  # beam rows as their sentence's queries
        self.feeds_weights_back = alignment.takes_previous_weights(self.attention)  # a_{t-1} in the state

    def build(self, input_shape=None):
        hidden, memory_dim = self.hidden_size, self.memory_dim  # equal: h_s and h_t are both H wide
        self.source_embedding.build((None, None))
        self.target_embedding.build((None,))
        for index, layer in enumerate(self.encoder_layers):
            layer.build((None, None, self.embed_dim if index == 0 else memory_dim))
        for index, layer in enumerate(self.decoder_layers):
            bottom = self.embed_dim + (hidden if self.input_feeding else 0)
            layer.build((None, None, bottom if index == 0 else hidden))
        query_shape, value_shape = (None, 1, hidden), (None, None, memory_dim)
        self.attention.build(query_shape, value_shape)
        context_dim = self.attention.compute_output_shape(query_shape, value_shape)[-1]
        self.attentional.build((None, context_dim + hidden))
        self.output_projection.build((None, hidden))
        self.built = True

    # -- the decoder interface ------------------------------------------------------------------
    def encode(self, source, training=None):
        mask = rnn.source_mask(source)
        embedded = self.embedding_dropout(self.source_embedding(source), training=training)
        memory, finals = rnn.run_encoder(self.encoder_layers, embedded, mask, self.bidirectional,
                                         self.layer_dropout, training=training)
        return {"memory": memory, "memory_mask": mask, "keys": self.attention.prepare(memory),
                "initial_states": tuple(state for layer in finals for state in layer)}

    def initial_state(self, memory, max_length=None):
        """``(t, h_0 (, c_0) per layer[, h~_0][, a_0])``: the step ``t = 0`` per row ``[B]``, encoder final
        states, zeros, and for an attention that takes the previous weights its ``initial_weights``.

        Every tensor has the batch first, so beam search can reorder hypotheses.
        """
        batch = ops.shape(memory["memory"])[0]
        state = (ops.zeros((batch,), "int32"), *memory["initial_states"])
        if self.input_feeding:
            state += (ops.zeros_like(memory["initial_states"][0]),)
        if self.feeds_weights_back:
            state += (self.attention.initial_weights(memory["memory_mask"]),)
        return state

    @property
    def feature_size(self):
        return self.hidden_size

    def decode_features(self, token, state, memory, training=None):
        """``h~_t`` (after dropout), before ``W_s``."""
        step, rnn_states = state[0], state[1:1 + self.num_layers * self.per_layer]
        inputs = self.embedding_dropout(self.target_embedding(token), training=training)
        if self.input_feeding:
            inputs = ops.concatenate([inputs, state[1 + self.num_layers * self.per_layer]], axis=-1)  # h~_{t-1}
        cells = [layer.cell for layer in self.decoder_layers]
        output, new_states = rnn.step_cells(cells, inputs, rnn_states, self.per_layer, self.layer_dropout,
                                            training=training)  # h_t
        extras = (step, state[-1])  # t (always in the state, first) and a_{t-1} (last, if carried)
        context, weights = alignment.attend_step(self.attention, output, memory, training=training,
                                                 **alignment.extras_arguments(self.attention, extras))
        attentional = self.attentional(ops.concatenate([context, output], axis=-1))  # h~_t
        new_state = (step + 1, *new_states) + ((attentional,) if self.input_feeding else ())
        if self.feeds_weights_back:
            new_state += (ops.cast(weights, state[-1].dtype),)
        return self.output_dropout(attentional, training=training), new_state, weights

    def output_logits(self, features, training=None):
        return self.output_projection(features)  # W_s

    def teacher_forced_features(self, source, target_in, training=None):
        """Parallel in time without input feeding; the step loop of ``Seq2SeqModel`` with it."""
        if self.input_feeding:
            return super().teacher_forced_features(source, target_in, training=training)
        self.ensure_built()
        memory = self.encode(source, training=training)
        inputs = self.embedding_dropout(self.target_embedding(target_in), training=training)
        outputs = rnn.run_decoder(self.decoder_layers, inputs, memory["initial_states"], self.per_layer,
                                  self.layer_dropout, training=training)  # h_t for all t: [B, Tt, H]
        # The layer's own call: local-m places query t at source position t (position_offset=0).
        context, weights = self.attention(outputs, memory["memory"], value_mask=memory["memory_mask"],
                                          return_attention_scores=True, training=training)
        attentional = self.attentional(ops.concatenate([context, outputs], axis=-1))
        return self.output_dropout(attentional, training=training), ops.cast(alignment.head_mean(weights), "float32")

    def get_config(self):
        config = super().get_config()
        config.update({
            "source_vocab_size": self.source_vocab_size, "target_vocab_size": self.target_vocab_size,
            "embed_dim": self.embed_dim, "hidden_size": self.hidden_size, "cell": self.cell,
            "num_layers": self.num_layers, "bidirectional": self.bidirectional, "attention": self.attention_name,
            "attention_options": self.attention_options, "input_feeding": self.input_feeding,
            "dropout": self.dropout,
        })
        return config


@register_model("luong")
def luong(source_vocab_size, target_vocab_size, **kwargs):
    return LuongSeq2Seq(source_vocab_size, target_vocab_size, name="luong", **kwargs)
