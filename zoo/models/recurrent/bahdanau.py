"""RNN encoder-decoder with additive (or any alignment) attention, Bahdanau et al. 2015."""

import keras
from keras import ops

from zoo.checks import boolean
from zoo.models import alignment
from zoo.models.encoder_decoder import Seq2SeqModel
from zoo.models.recurrent import rnn
from zoo.models.recurrent.rnn import CELL_RULE
from zoo.models.registry import register_model

CONSTRAINTS = CELL_RULE  # the declared rules, read by the validator (zoo.catalog)


@keras.saving.register_keras_serializable(package="zoo")
class BahdanauSeq2Seq(Seq2SeqModel):
    """Embedding + (bidirectional) GRU encoder, GRU decoder attending with its previous state.

    At target step ``i`` (d2l's ``Seq2SeqAttentionDecoder``): the query is the previous
    decoder state ``s_{i-1}``; the context ``c_i = sum_j alpha_ij h_j`` is concatenated with
    the embedding of the previous token ``y_{i-1}``; ``s_i = GRU([e(y_{i-1}); c_i], s_{i-1})``;
    ``p(y_i) = softmax(W_o s_i)``; with ``deep_output`` (the paper's readout, appendix A.2.2),
    ``p(y_i) = softmax(W_o t_i)`` with ``t_i = maxout(U_o s_i + V_o e(y_{i-1}) + C_o c_i)``, the
    maximum over pairs of ``2 * hidden_size`` units, so the context and the previous word reach the
    output directly, not only through the RNN state. The encoder's final state(s) pass through a ``tanh`` bridge
    to initialize ``s_0``. Attention keys (``U_a h_j`` for additive) are computed once per
    source sequence in ``encode``.

    ``cell="lstm"`` uses LSTMs instead (the cell state ``c_0`` gets its own ``tanh`` bridge);
    ``num_layers > 1`` stacks encoder and decoder layers (dropout between them): decoder layer
    ``l`` starts from encoder layer ``l``'s final state(s), the query ``s_{i-1}`` is the top
    decoder layer's state, and the context enters the bottom layer. Attention layers that
    take the query position (``local_m``) get the target step ``i - 1`` (0-based), which is
    then carried in the decoder state; those that take the previous step's weights
    (``location_aware``) get ``alpha_{i-1}``, carried in the state too (``[B, Ts]``, from the
    layer's ``initial_weights``).

    Shapes: ``B`` batch, ``Ts`` source steps, ``Tt`` target steps, ``H`` = ``hidden_size``,
    ``V`` target vocabulary; the memory ``h_j`` is ``2H`` wide when bidirectional, else ``H``.

    Args:
        source_vocab_size, target_vocab_size: vocabulary sizes (id 0 = padding).
        embed_dim: positive int, embedding size of both sides.
        hidden_size: positive int ``H``, the decoder RNN size. Each encoder direction also has
            ``H`` units (as in the paper: a bidirectional encoder's memory is ``2H`` wide); the
            ``tanh`` bridge maps the encoder's final states to ``H``.
        bidirectional: bool, bidirectional encoder.
        attention: name of a registered alignment attention (``zoo.attention.alignment_names()``).
        attention_options: dict of keyword arguments for that attention layer.
        dropout: float in [0, 1), on embeddings, between stacked layers and on decoder outputs.
        cell: ``"gru"`` or ``"lstm"``.
        num_layers: positive int, stacked RNN layers in the encoder and in the decoder.
        deep_output: bool, the paper's maxout readout from ``s_i``, ``e(y_{i-1})`` and ``c_i``;
            False: d2l's ``W_o s_i``. A ``.keras`` file saved before the option existed loads
            with False, as it was trained.

    Example:
        >>> import numpy as np
        >>> model = BahdanauSeq2Seq(13, 11, embed_dim=8, hidden_size=12)
        >>> tuple(model((np.array([[5, 6, 3, 0]]), np.array([[2, 5, 6]]))).shape)
        (1, 3, 11)

    References:
        Bahdanau, Cho, Bengio. Neural Machine Translation by Jointly Learning to Align and
        Translate. ICLR 2015. Zhang et al. Dive into Deep Learning, sec. 11.4.
    """

    def __init__(self, source_vocab_size, target_vocab_size, embed_dim=64, hidden_size=128,
                 bidirectional=True, attention="additive", attention_options=None, dropout=0.0, cell="gru",
                 num_layers=1, deep_output=True, **kwargs):
        super().__init__(**kwargs)
        # Each encoder direction has hidden_size units, like the decoder.
        rnn.set_rnn_arguments(self, source_vocab_size, target_vocab_size, embed_dim, hidden_size, cell, num_layers,
                              bidirectional, dropout, encoder_units=hidden_size)
        self.attention_name = attention
        self.attention_options = dict(attention_options or {})
        self.deep_output = boolean("deep_output", deep_output)

        # Layers of the default (1-layer GRU) model first and in this order: a .keras file keeps
        # some weights by attribute name, others by class and creation order, and seeded initial
        # weights depend on the creation order; so older files load and results stay the same.
        dtype = self.dtype_policy
        rnn.make_embeddings(self)
        self.encoder_rnn = rnn.make_rnn(self.cell, hidden_size, f"encoder_{self.cell}", self.bidirectional, dtype,
                                        wrapper_name="encoder")
        self.bridge = keras.layers.Dense(hidden_size, activation="tanh", name="bridge", dtype=dtype)
        self.attention = alignment.create_alignment_attention("bahdanau", attention, self.attention_options, dtype)
        self.decoder_cell = rnn.make_cell(self.cell, hidden_size, f"decoder_{self.cell}", dtype)
        self.embedding_dropout = keras.layers.Dropout(self.dropout, name="embedding_dropout", dtype=dtype)
        self.output_dropout = keras.layers.Dropout(self.dropout, name="output_dropout", dtype=dtype)
        self.output_projection = keras.layers.Dense(target_vocab_size, name="output_projection", dtype=dtype)
        # Only with cell="lstm" or num_layers > 1 (empty otherwise).
        self.encoder_stack = [
            rnn.make_rnn(self.cell, hidden_size, f"encoder_{self.cell}_{i}", self.bidirectional, dtype)
            for i in range(1, num_layers)]
        self.decoder_stack = [rnn.make_cell(self.cell, hidden_size, f"decoder_{self.cell}_{i}", dtype)
                              for i in range(1, num_layers)]
        # One bridge per decoder state tensor (h, c per layer); self.bridge is the first.
        self.extra_bridges = [keras.layers.Dense(hidden_size, activation="tanh", name=f"bridge_{i}", dtype=dtype)
                              for i in range(1, num_layers * self.per_layer)]
        self.groups_hypotheses = alignment.groups_hypotheses(self.attention)  # beam rows as their sentence's queries
        if self.deep_output:  # created last: files without the option keep their weight order
            self.readout = keras.layers.Dense(2 * hidden_size, name="readout", dtype=dtype)

    @classmethod
    def from_config(cls, config):
        # .keras files saved before `deep_output` existed had d2l's readout, W_o s_i.
        return super().from_config({"deep_output": False, **config})

    def build(self, input_shape=None):
        memory_dim = self.memory_dim
        self.source_embedding.build((None, None))
        self.target_embedding.build((None,))
        self.encoder_rnn.build((None, None, self.embed_dim))
        for layer in self.encoder_stack:
            layer.build((None, None, memory_dim))
        for bridge in [self.bridge, *self.extra_bridges]:
            bridge.build((None, memory_dim))
        self.attention.build(*alignment.step_shapes(self.hidden_size, self.memory_dim))  # s_{i-1}, h
        self.decoder_cell.build((None, self.embed_dim + self.context_dim))
        for cell in self.decoder_stack:
            cell.build((None, self.hidden_size))
        self.output_projection.build((None, self.hidden_size))
        if self.deep_output:
            self.readout.build((None, self.feature_size))
        self.built = True

    @property
    def context_dim(self):
        """``C``, the width of the context ``c_i`` (known without building)."""
        return alignment.context_width(self.attention, self.hidden_size, self.memory_dim)

    def encode(self, source, training=None):
        mask = rnn.source_mask(source)
        embedded = self.embedding_dropout(self.source_embedding(source), training=training)
        memory, finals = rnn.run_encoder([self.encoder_rnn, *self.encoder_stack], embedded, mask,
                                         self.bidirectional, self.output_dropout, training=training)
        finals = [state for layer in finals for state in layer]  # h (, c) per layer
        bridged = tuple(bridge(final) for bridge, final in zip([self.bridge, *self.extra_bridges], finals))
        return {"memory": memory, "memory_mask": mask, "keys": self.attention.prepare(memory),
                "initial_states": bridged}

    def initial_state(self, memory, max_length=None):
        return (*memory["initial_states"], *alignment.initial_extras(self.attention, memory))

    @property
    def feature_size(self):
        """``H``; with ``deep_output``, ``H + E + C``: ``[s_i; e(y_{i-1}); c_i]``, the readout's input."""
        return self.hidden_size + self.embed_dim + self.context_dim if self.deep_output else self.hidden_size

    def decode_features(self, token, state, memory, training=None):
        """``s_i``; with ``deep_output``, ``[s_i; e(y_{i-1}); c_i]``: what ``output_logits`` reads out.

        The readout does not feed back into the recurrence, so it belongs to the output side: in
        training it runs once after the time loop, on the real target tokens' rows only."""
        embedded = self.embedding_dropout(self.target_embedding(token), training=training)
        return self._embedded_features(embedded, state, memory, training=training)

    def teacher_forced_features(self, source, target_in, training=None):
        """The step loop over the embedded target: every ``e(y_{i-1})`` looked up (and dropped out)
        at once before the loop, which then runs only what depends on the previous state."""
        self.ensure_built()
        embedded = self.embedding_dropout(self.target_embedding(target_in), training=training)  # [B, Tt, E]
        return self._step_loop(self._embedded_features, self.feature_size, self.compute_dtype, source, embedded,
                               training)

    def _embedded_features(self, embedded, state, memory, training=None):
        """``decode_features`` from ``e(y_{i-1})`` (after dropout) instead of ``y_{i-1}``."""
        states, extra = state[:self.num_layers * self.per_layer], state[self.num_layers * self.per_layer:]
        previous = states[(self.num_layers - 1) * self.per_layer]  # s_{i-1} of the top layer
        context, weights = alignment.attend_step(self.attention, previous, memory, training=training,
                                                 **alignment.extras_arguments(self.attention, extra))
        rnn_input = ops.concatenate([embedded, context], axis=-1)
        output, new_states = rnn.step_cells([self.decoder_cell, *self.decoder_stack], rnn_input, states,
                                            self.per_layer, self.output_dropout, training=training)
        if self.deep_output:
            output = ops.concatenate([output, embedded, context], axis=-1)
        return output, new_states + alignment.next_extras(self.attention, extra, weights), weights

    def output_logits(self, features, training=None):
        """``W_o`` of ``s_i`` (after dropout); with ``deep_output``, of ``t_i = maxout(readout(features))``."""
        if self.deep_output:
            pre = self.readout(features)  # U_o s_i + V_o e(y_{i-1}) + C_o c_i
            pairs = ops.reshape(pre, (-1, self.hidden_size, 2))
            features = ops.reshape(ops.max(pairs, axis=-1), (*ops.shape(pre)[:-1], self.hidden_size))  # maxout
        return self.output_projection(self.output_dropout(features, training=training))  # W_o

    def get_config(self):
        config = super().get_config()
        config.update({
            "source_vocab_size": self.source_vocab_size, "target_vocab_size": self.target_vocab_size,
            "embed_dim": self.embed_dim, "hidden_size": self.hidden_size, "bidirectional": self.bidirectional,
            "attention": self.attention_name, "attention_options": self.attention_options, "dropout": self.dropout,
            "cell": self.cell, "num_layers": self.num_layers, "deep_output": self.deep_output,
        })
        return config


@register_model("bahdanau")
def bahdanau(source_vocab_size, target_vocab_size, **kwargs):
    return BahdanauSeq2Seq(source_vocab_size, target_vocab_size, name="bahdanau", **kwargs)
