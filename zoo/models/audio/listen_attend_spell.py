"""Listen, Attend and Spell (Chan et al. 2016): a pyramidal bidirectional RNN listener over log-mel
frames, an attending RNN speller."""

import keras
from keras import ops

from zoo.checks import choice, positive_int, rate
from zoo.models import alignment
from zoo.models.encoder_decoder import Seq2SeqModel
from zoo.models.recurrent import rnn
from zoo.models.recurrent.rnn import CELL_RULE
from zoo.models.registry import register_model

CONSTRAINTS = CELL_RULE  # the declared rules, read by the validator (zoo.catalog)
CMVN_EPSILON = 1e-5  # the variance floor of the per-utterance feature normalisation


def frame_mask(num_frames, length):
    """``[B, length]`` bool, True at each row's first ``num_frames [B]`` frames (padding comes after)."""
    steps = ops.arange(length, dtype="int32")[None, :]
    return steps < ops.cast(num_frames, "int32")[:, None]


def normalize_frames(features, mask, epsilon=CMVN_EPSILON):
    """Per-utterance mean and variance normalisation (CMVN) of ``features [B, F, M]`` over each row's
    real frames (``mask [B, F]``): ``(x_t - mu) / sqrt(sigma^2 + epsilon)`` per filterbank channel, 0 at
    padded frames, so padding a batch changes no real frame."""
    weights = ops.cast(mask, features.dtype)[..., None]  # [B, F, 1]
    count = ops.maximum(ops.sum(weights, axis=1, keepdims=True), ops.cast(1, features.dtype))
    mean = ops.sum(features * weights, axis=1, keepdims=True) / count
    variance = ops.sum(ops.square(features - mean) * weights, axis=1, keepdims=True) / count
    return (features - mean) * ops.rsqrt(variance + ops.cast(epsilon, features.dtype)) * weights


def pyramid_pairs(outputs, mask):
    """One pyramid step's input (Chan et al. 2016, eq. 5): consecutive pairs of the layer below's
    outputs concatenated, ``[h_{2i}; h_{2i+1}]``.

    ``outputs [B, T, D]``, ``mask [B, T]`` -> ``(pairs [B, ceil(T / 2), 2D], mask [B, ceil(T / 2)])``. An
    odd ``T`` gets one zero frame at the end; padded frames are zeroed first, so a row's last pair
    when its length is odd is ``[h_{2i}; 0]``, whatever the batch's padding, and pair ``i`` is real
    when frame ``2i`` is: a row of ``n`` frames keeps ``ceil(n / 2)``.
    """
    outputs = outputs * ops.cast(mask, outputs.dtype)[..., None]
    batch, steps, width = ops.shape(outputs)[0], ops.shape(outputs)[1], outputs.shape[-1]
    half = (steps + 1) // 2
    outputs = ops.pad(outputs, [[0, 0], [0, 2 * half - steps], [0, 0]])
    mask = ops.pad(ops.cast(mask, "int32"), [[0, 0], [0, 2 * half - steps]])
    pairs = ops.reshape(outputs, (batch, half, 2 * width))
    return pairs, ops.any(ops.reshape(mask, (batch, half, 2)) > 0, axis=-1)


def reduced_frames(num_frames, pyramid_layers):
    """A row's listener frames: ``num_frames`` halved, rounded up, ``pyramid_layers`` times (NumPy or
    tensors)."""
    for _ in range(pyramid_layers):
        num_frames = (num_frames + 1) // 2
    return num_frames


@keras.saving.register_keras_serializable(package="zoo")
class ListenAttendSpell(Seq2SeqModel):
    """Listen, Attend and Spell: a pyramidal bidirectional RNN listener, an attending RNN speller.

    **Listener** (sec. 3.1). The log-mel frames ``x = (x_1, ..., x_T)`` (``[B, F, M]``, ``num_frames``
    real per row; normalised per utterance: ``normalize_frames``) pass a bidirectional RNN, then
    ``pyramid_layers`` pyramidal ones, each reading consecutive pairs of the layer below (eq. 5)::

        h_i^j = pBLSTM(h_{i-1}^j, [h_{2i}^{j-1}, h_{2i+1}^{j-1}])

    so each halves the time resolution: ``h = Listen(x)`` has ``U = ceil(T / 2^pyramid_layers)``
    frames (``reduction = 2 ** pyramid_layers``; 3 pyramid layers, 8 times fewer, in the paper), the
    memory the speller attends over, ``2 * listener_units`` wide. Each RNN is masked: a padded frame
    keeps the state, and is zeroed before the next pairing (``pyramid_pairs``), so padding a batch
    changes no row. Listener frame ``u`` covers input frames ``[u r, (u + 1) r)``, which is how
    ``zoo.metrics.alignment.spans_to_frames(..., reduction=r)`` maps the gold spans onto it.

    **Speller** (sec. 3.2), at output step ``i`` (eqs. 6-9)::

        s_i = RNN(s_{i-1}, y_{i-1}, c_{i-1})           the stacked cells on [E y_{i-1}; c_{i-1}]
        c_i = AttentionContext(s_i, h)                 alpha_i = softmax_u(e_{i,u}), c_i = sum_u alpha_{i,u} h_u
        P(y_i | x, y_{<i}) = CharacterDistribution(s_i, c_i) = softmax(W_o tanh(W_c [s_i; c_i]))

    The query is the current state ``s_i`` (the paper's order, not Bahdanau's ``s_{i-1}``). The score
    ``e_{i,u}`` is ``model.attention``, any alignment attention, ``location_aware`` by default: the
    additive score plus convolutional features of ``alpha_{i-1}`` (Chorowski et al. 2015), carried in
    the state from the layer's ``initial_weights``; attention layers that take the query position
    (``local_m``) get the step. ``s_0`` and ``c_0`` are zeros. Not here: the paper's sampling of the
    previous token from the model's own output during training (10%), and its language-model rescoring.

    Source ``(features float32 [B, F, M], num_frames int32 [B])``; ``call((features, num_frames,
    target_in))`` gives teacher-forced logits ``[B, T, V]``, the input of the training loop's batches.
    The ``Seq2SeqModel`` interface (``encode``, ``initial_state``, ``decode_features``,
    ``output_logits``) lets greedy and beam search spell from it; a step's attention is ``[B, U]``.

    Shapes: ``B`` batch, ``F`` frames, ``M`` = ``num_mels``, ``U`` listener frames, ``T`` output steps,
    ``H`` = ``hidden_size``, ``V`` target vocabulary.

    Args:
        target_vocab_size: the output vocabulary (id 0 = padding).
        num_mels: positive int ``M``, the filterbank channels of a frame (from the data).
        embed_dim: positive int, the width of ``E y``.
        hidden_size: positive int ``H``, the speller's cells and ``W_c``'s width.
        listener_units: positive int, units per direction of each listener RNN.
        pyramid_layers: non-negative int, the pyramidal layers above the bottom one (each halves ``T``).
        speller_layers: positive int, the speller's stacked cells (2 in the paper).
        cell: ``"lstm"`` (the paper's) or ``"gru"``, for listener and speller.
        attention: name of a registered alignment attention (``zoo.attention.alignment_names()``).
        attention_options: dict of keyword arguments for that attention layer.
        dropout: float in [0, 1), between RNN layers and before ``W_o``.

    Example:
        >>> import numpy as np
        >>> model = ListenAttendSpell(14, num_mels=5, embed_dim=4, hidden_size=8, listener_units=4,
        ...                           pyramid_layers=2, attention_options={"units": 4, "kernel_size": 3})
        >>> features, frames = np.zeros((2, 13, 5), "float32"), np.array([13, 9])
        >>> tuple(model((features, frames, np.array([[2, 5, 6], [2, 7, 0]]))).shape), model.reduction
        ((2, 3, 14), 4)
        >>> tuple(model.encode((features, frames))["memory"].shape)  # ceil(13 / 4) listener frames
        (2, 4, 8)

    References:
        Chan, Jaitly, Le, Vinyals. Listen, Attend and Spell: A Neural Network for Large Vocabulary
        Conversational Speech Recognition. ICASSP 2016, eqs. 5-9. https://arxiv.org/abs/1508.01211
        Chorowski, Bahdanau, Serdyuk, Cho, Bengio. Attention-Based Models for Speech Recognition.
        NIPS 2015. https://arxiv.org/abs/1506.07503
    """

    def __init__(self, target_vocab_size, num_mels, embed_dim=32, hidden_size=128, listener_units=64,
                 pyramid_layers=3, speller_layers=1, cell="lstm", attention="location_aware",
                 attention_options=None, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.target_vocab_size = positive_int("target_vocab_size", target_vocab_size)
        self.num_mels = positive_int("num_mels", num_mels)
        self.embed_dim = positive_int("embed_dim", embed_dim)
        self.hidden_size = positive_int("hidden_size", hidden_size)
        self.listener_units = positive_int("listener_units", listener_units)
        if isinstance(pyramid_layers, bool) or not isinstance(pyramid_layers, int) or pyramid_layers < 0:
            raise ValueError("Received an invalid value for argument `pyramid_layers`, expected a non-negative "
                             f"integer. Received: pyramid_layers={pyramid_layers!r}")
        self.pyramid_layers = pyramid_layers
        self.speller_layers = positive_int("speller_layers", speller_layers)
        self.cell = choice("cell", cell, rnn.RNN_CELLS)
        self.attention_name = attention
        self.attention_options = dict(attention_options or {})
        self.dropout = rate("dropout", dropout)
        self.per_layer = rnn.states_per_layer(self.cell)
        dtype = self.dtype_policy
        self.listener = [rnn.make_rnn(self.cell, self.listener_units, f"listener_{i}", bidirectional=True,
                                      dtype=dtype) for i in range(self.pyramid_layers + 1)]
        self.target_embedding = keras.layers.Embedding(target_vocab_size, embed_dim, name="target_embedding",
                                                       dtype=dtype)
        self.speller = [rnn.make_cell(self.cell, self.hidden_size, f"speller_{i}", dtype=dtype)
                        for i in range(self.speller_layers)]
        self.attention = alignment.create_alignment_attention("listen_attend_spell", attention,
                                                              self.attention_options, dtype)
        self.character_mlp = keras.layers.Dense(hidden_size, activation="tanh", name="w_c", dtype=dtype)
        self.layer_dropout = keras.layers.Dropout(self.dropout, name="layer_dropout", dtype=dtype)
        self.output_dropout = keras.layers.Dropout(self.dropout, name="output_dropout", dtype=dtype)
        self.output_projection = keras.layers.Dense(target_vocab_size, name="w_o", dtype=dtype)
        self.groups_hypotheses = alignment.groups_hypotheses(self.attention)  # beam rows as their sentence's queries

    @property
    def reduction(self):
        """Input frames per listener frame: ``2 ** pyramid_layers``."""
        return 2 ** self.pyramid_layers

    @property
    def memory_dim(self):
        """The width of a listener frame ``h_u``: both directions."""
        return 2 * self.listener_units

    @property
    def _attention_shapes(self):
        """The attention's query ``[B, 1, H]`` (``s_i``) and memory ``[B, U, 2 * listener_units]``."""
        return (None, 1, self.hidden_size), (None, None, self.memory_dim)

    @property
    def context_dim(self):
        """The width of ``c_i`` (the memory's for additive scores)."""
        return self.attention.compute_output_shape(*self._attention_shapes)[-1]

    @property
    def feature_size(self):
        """``[s_i; c_i]``: what the character distribution reads."""
        return self.hidden_size + self.context_dim

    def build(self, input_shape=None):
        width = self.num_mels
        for layer in self.listener:
            layer.build((None, None, width))
            width = 2 * self.memory_dim  # the next layer reads pairs of this one's frames
        self.target_embedding.build((None,))
        width = self.embed_dim + self.context_dim
        for cell in self.speller:
            cell.build((None, width))
            width = self.hidden_size
        self.attention.build(*self._attention_shapes)
        self.character_mlp.build((None, self.feature_size))
        self.output_projection.build((None, self.hidden_size))
        self.built = True

    def listen(self, features, num_frames, training=None):
        """``h = Listen(x)``: ``(h [B, U, 2 * listener_units], mask [B, U])`` of ``features [B, F, M]``."""
        self.ensure_built()
        features = ops.cast(features, self.compute_dtype)
        mask = frame_mask(num_frames, ops.shape(features)[1])
        x = normalize_frames(features, mask)
        for index, layer in enumerate(self.listener):
            if index > 0:  # [h_{2i}^{j-1}; h_{2i+1}^{j-1}], eq. 5
                x, mask = pyramid_pairs(self.layer_dropout(x, training=training), mask)
            x = rnn.run_layer(layer, x, mask=mask, training=training)[0]
        return x * ops.cast(mask, x.dtype)[..., None], mask

    def encode(self, source, training=None):
        features, num_frames = source
        memory, mask = self.listen(features, num_frames, training=training)
        return {"memory": memory, "memory_mask": mask, "keys": self.attention.prepare(memory)}

    def initial_state(self, memory, max_length=None):
        batch = ops.shape(memory["memory"])[0]
        dtype = self.compute_dtype
        state = tuple(ops.zeros((batch, self.hidden_size), dtype) for _ in range(self.speller_layers * self.per_layer))
        state += (ops.zeros((batch, self.context_dim), dtype),)  # c_0
        return state + alignment.initial_extras(self.attention, memory)

    def decode_features(self, token, state, memory, training=None):
        return self._embedded_features(self.target_embedding(token), state, memory, training=training)

    def _embedded_features(self, embedded, state, memory, training=None):
        """One step from ``E y_{i-1}``: ``([s_i; c_i], state, alpha_i [B, U])``."""
        cells = self.speller_layers * self.per_layer
        states, context, extra = state[:cells], state[cells], state[cells + 1:]
        s, states = rnn.step_cells(self.speller, ops.concatenate([embedded, ops.cast(context, embedded.dtype)], -1),
                                   states, self.per_layer, self.layer_dropout, training=training)  # s_i, eq. 7
        context, weights = alignment.attend_step(self.attention, s, memory, training=training,
                                                 **alignment.extras_arguments(self.attention, extra))  # eq. 8
        new_state = (*states, ops.cast(context, state[cells].dtype), *alignment.next_extras(self.attention, extra,
                                                                                           weights))
        return ops.concatenate([s, ops.cast(context, s.dtype)], axis=-1), new_state, weights

    def output_logits(self, features, training=None):
        """``W_o tanh(W_c [s_i; c_i])`` (eq. 9, before the softmax)."""
        hidden = self.output_dropout(self.character_mlp(features), training=training)
        return self.output_projection(hidden)

    def teacher_forced_features(self, source, target_in, training=None):
        """``(features [B, T, F], attention [B, T, U])``: the step over the embedded target, scanned."""
        self.ensure_built()
        memory = self.encode(source, training=training)
        state = self.initial_state(memory)
        embedded = ops.swapaxes(self.target_embedding(target_in), 0, 1)  # [T, B, E]
        batch, frames = ops.shape(memory["memory"])[0], ops.shape(memory["memory"])[1]
        dtype = self.compute_dtype
        init = (state, ops.zeros((batch, self.feature_size), dtype), ops.zeros((batch, frames), "float32"))

        def step(carry, e):
            features, new_state, weights = self._embedded_features(e, carry[0], memory, training=training)
            new_carry = (new_state, ops.cast(features, dtype), ops.cast(weights, "float32"))
            return new_carry, new_carry

        unroll = 32 if keras.backend.backend() == "tensorflow" else 1  # as Seq2SeqModel's scan
        _, (_, features, attention) = ops.scan(step, init, embedded, unroll=unroll)
        return ops.transpose(features, (1, 0, 2)), ops.transpose(attention, (1, 0, 2))

    def call(self, inputs, training=None, return_features=False):
        """``inputs = (features [B, F, M], num_frames [B], target_in [B, T])``: teacher-forced logits
        ``[B, T, V]``, or with ``return_features`` the features ``[B, T, F]``."""
        features, num_frames, target_in = inputs
        out, _ = self.teacher_forced_features((features, num_frames), target_in, training=training)
        return out if return_features else self.output_logits(out, training=training)

    def attention_weights(self, inputs):
        """Teacher-forced attention ``[B, T, U]`` over the listener's frames."""
        features, num_frames, target_in = inputs
        return self.teacher_forced_features((features, num_frames), target_in, training=False)[1]

    def get_config(self):
        config = super().get_config()
        config.update({
            "target_vocab_size": self.target_vocab_size, "num_mels": self.num_mels, "embed_dim": self.embed_dim,
            "hidden_size": self.hidden_size, "listener_units": self.listener_units,
            "pyramid_layers": self.pyramid_layers, "speller_layers": self.speller_layers, "cell": self.cell,
            "attention": self.attention_name, "attention_options": self.attention_options, "dropout": self.dropout,
        })
        return config


@register_model("listen_attend_spell", task="speech")
def listen_attend_spell(target_vocab_size, num_mels, **kwargs):
    return ListenAttendSpell(target_vocab_size, num_mels, name="listen_attend_spell", **kwargs)
