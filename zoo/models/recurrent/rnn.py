"""The RNN encoder-decoder builder of ``bahdanau``, ``luong`` and ``seq2seq``: sizes, layers, runners.

One convention for every RNN model: ``hidden_size`` is the decoder RNN's width (its state and
output); the encoder has ``encoder_units`` units per direction, which each model derives from
``hidden_size`` (``luong`` and ``seq2seq``: ``hidden_size // 2`` per direction when bidirectional,
so that the memory is ``hidden_size`` wide; ``bahdanau``: ``hidden_size`` per direction, bridged
to the decoder). Every layer gets the model's ``dtype_policy``.

``setup_rnn_encoder_decoder`` makes all the layers at once (``luong``, ``seq2seq``); a model
whose older ``.keras`` files and seeded initial weights depend on another creation order
(``bahdanau``) calls its steps (``set_rnn_arguments``, ``make_embeddings``, ``make_rnn``,
``make_cell``) in its own order. Backend-neutral (``keras.ops``): every RNN runs on Keras' own
``GRU``/``LSTM`` layers and cells (``run_layer``, ``step_cells``).
"""

import keras
from keras import ops

from zoo import kernels
from zoo.checks import boolean, choice, enforce, positive_int, rate
from zoo.tokens import PAD_ID

RNN_CELLS = ("gru", "lstm")
# The choice of cell, declared once for every model with an RNN: the constructors pass RNN_CELLS to
# ``choice`` and list this rule in their CONSTRAINTS, which the validator reads (zoo.catalog).
CELL_RULE = ({"rule": "one_of", "key": "cell", "values": RNN_CELLS},)
# The size rule of an encoder that splits hidden_size over its two directions (luong, seq2seq),
# declared once: set_rnn_arguments enforces it, and those models re-export it as their
# CONSTRAINTS, which the config validator reads without importing Keras (zoo.catalog).
SPLIT_ENCODER = (
    {"rule": "even", "key": "hidden_size", "when": {"bidirectional": True},
     "why": "each encoder direction has hidden_size // 2 units"},
)


def states_per_layer(cell):
    """How many state tensors a layer of ``cell`` carries: 1 for GRU (h), 2 for LSTM (h, c)."""
    return 2 if cell == "lstm" else 1


# -- building ---------------------------------------------------------------------------------
def set_rnn_arguments(model, source_vocab_size, target_vocab_size, embed_dim, hidden_size, cell, num_layers,
                      bidirectional, dropout, encoder_units=None):
    """Validates the shared RNN arguments and sets them, and the sizes derived from them, on ``model``.

    Sets ``source_vocab_size, target_vocab_size, embed_dim, hidden_size, cell, num_layers,
    bidirectional, dropout, encoder_units`` (units per encoder direction; None: ``hidden_size // 2``
    when bidirectional, else ``hidden_size``), ``memory_dim`` (the encoder output's width:
    ``encoder_units``, doubled when bidirectional) and ``per_layer`` (state tensors per layer).
    """
    model.source_vocab_size = positive_int("source_vocab_size", source_vocab_size)
    model.target_vocab_size = positive_int("target_vocab_size", target_vocab_size)
    model.embed_dim = positive_int("embed_dim", embed_dim)
    model.hidden_size = positive_int("hidden_size", hidden_size)
    model.num_layers = positive_int("num_layers", num_layers)
    model.cell = choice("cell", cell, RNN_CELLS)
    model.bidirectional = boolean("bidirectional", bidirectional)
    model.dropout = rate("dropout", dropout)
    if encoder_units is None:
        enforce(SPLIT_ENCODER, hidden_size=hidden_size, bidirectional=model.bidirectional)
        encoder_units = hidden_size // 2 if model.bidirectional else hidden_size
    model.encoder_units = positive_int("encoder_units", encoder_units)
    model.memory_dim = model.encoder_units * (2 if model.bidirectional else 1)
    model.per_layer = states_per_layer(model.cell)


def make_embeddings(model):
    """Sets ``model.source_embedding`` (masking padding) and ``model.target_embedding``."""
    model.source_embedding = keras.layers.Embedding(model.source_vocab_size, model.embed_dim, mask_zero=True,
                                                    name="source_embedding", dtype=model.dtype_policy)
    model.target_embedding = keras.layers.Embedding(model.target_vocab_size, model.embed_dim,
                                                    name="target_embedding", dtype=model.dtype_policy)


def make_rnn(cell, units, name, bidirectional=False, dtype=None, wrapper_name=None):
    """A ``GRU``/``LSTM`` layer returning sequences and state(s), optionally bidirectional.

    The layer's ``cell`` attribute is also what a decoder steps with, so the same weights run
    over a whole sequence (parallel teacher forcing) or one step at a time. A bidirectional
    wrapper is named ``wrapper_name`` (default ``<name>_bidirectional``).
    """
    layer_class = keras.layers.GRU if cell == "gru" else keras.layers.LSTM
    rnn = layer_class(units, return_sequences=True, return_state=True, name=name, dtype=dtype)
    if bidirectional:
        return keras.layers.Bidirectional(rnn, name=wrapper_name or f"{name}_bidirectional", dtype=dtype)
    return rnn


def make_cell(cell, units, name, dtype=None):
    """A ``GRUCell``/``LSTMCell``, for a decoder that only ever steps (its input needs the last output)."""
    cell_class = keras.layers.GRUCell if cell == "gru" else keras.layers.LSTMCell
    return cell_class(units, name=name, dtype=dtype)


def setup_rnn_encoder_decoder(model, source_vocab_size, target_vocab_size, embed_dim, hidden_size, cell,
                              num_layers, bidirectional, dropout, encoder_units=None):
    """``set_rnn_arguments``, then every layer of a stacked RNN encoder-decoder, in this order.

    Sets ``source_embedding, target_embedding``, ``encoder_layers`` (``num_layers`` RNN layers,
    ``encoder_units`` per direction), ``decoder_layers`` (``num_layers`` RNN layers of
    ``hidden_size`` units, steppable through their ``cell``), ``output_projection`` (to the target
    vocabulary) and the dropout layers ``embedding_dropout, layer_dropout, output_dropout``.
    """
    set_rnn_arguments(model, source_vocab_size, target_vocab_size, embed_dim, hidden_size, cell, num_layers,
                      bidirectional, dropout, encoder_units)
    dtype = model.dtype_policy
    make_embeddings(model)
    model.encoder_layers = [make_rnn(model.cell, model.encoder_units, f"encoder_{i}", model.bidirectional, dtype)
                            for i in range(model.num_layers)]
    model.decoder_layers = [make_rnn(model.cell, model.hidden_size, f"decoder_{i}", dtype=dtype)
                            for i in range(model.num_layers)]
    model.output_projection = keras.layers.Dense(model.target_vocab_size, name="output_projection", dtype=dtype)
    model.embedding_dropout = keras.layers.Dropout(model.dropout, name="embedding_dropout", dtype=dtype)
    model.layer_dropout = keras.layers.Dropout(model.dropout, name="layer_dropout", dtype=dtype)
    model.output_dropout = keras.layers.Dropout(model.dropout, name="output_dropout", dtype=dtype)


# -- running ----------------------------------------------------------------------------------
def source_mask(source):
    """``[B, Ts]`` bool, True at real tokens (padding has id ``PAD_ID``)."""
    return ops.not_equal(source, PAD_ID)


@kernels.replaceable
def run_layer(layer, inputs, mask=None, initial_state=None, training=None):
    """``[outputs, *states]`` of a ``GRU``/``LSTM`` layer, or a ``Bidirectional`` one, over
    ``inputs [B, T, D]``: the layer's own call, ``layer(inputs, mask=mask, initial_state=...,
    training=training)``, which steps its cell over time.

    Keras' cells, gates in Keras' order (``x_t`` the input, ``h_{t-1}`` the previous state,
    ``sigma`` the logistic sigmoid, ``*`` element-wise)::

        GRU (Cho et al. 2014, eq. 5-8; Keras' default ``reset_after``, the reset gate applied
        after the recurrent product, as cuDNN does):
            z_t  = sigma(W_z x_t + U_z h_{t-1} + b_z)                        update gate
            r_t  = sigma(W_r x_t + U_r h_{t-1} + b_r)                        reset gate
            h~_t = tanh(W_h x_t + b_h + r_t * (U_h h_{t-1} + b'_h))          candidate
            h_t  = z_t * h_{t-1} + (1 - z_t) * h~_t
        LSTM (Hochreiter and Schmidhuber 1997, with the forget gate of Gers et al. 2000):
            i_t, f_t, o_t = sigma(W_{i,f,o} x_t + U_{i,f,o} h_{t-1} + b_{i,f,o})
            g_t  = tanh(W_g x_t + U_g h_{t-1} + b_g)
            c_t  = f_t * c_{t-1} + i_t * g_t,    h_t = o_t * tanh(c_t)

    ``mask [B, T]`` (True at real steps) makes a padded step keep the state; padding comes after
    the real tokens, so each row's final state is the one after its last real token, and a
    ``Bidirectional`` layer's backward half starts there. What a layer returns at padded steps
    is not used by any caller (Keras repeats the last real output; a bidirectional layer has
    zeros). ``initial_state``: the list of start states (``[h]`` or ``[h, c]``), zeros if None.

    References:
        Cho et al. Learning Phrase Representations using RNN Encoder-Decoder for Statistical
        Machine Translation. EMNLP 2014, sec. 2.3. https://arxiv.org/abs/1406.1078
        Hochreiter, Schmidhuber. Long Short-Term Memory. Neural Computation 1997.
        Gers, Schmidhuber, Cummins. Learning to Forget: Continual Prediction with LSTM. 2000.
    """
    kwargs = {} if initial_state is None else {"initial_state": initial_state}
    return list(layer(inputs, mask=mask, training=training, **kwargs))


def run_encoder(layers, inputs, mask, bidirectional, dropout_layer, training=None):
    """Runs stacked (bidirectional) RNN layers over ``inputs [B, Ts, D]``.

    Returns ``(outputs [B, Ts, H'], finals)``: ``finals`` has one list of state tensors per
    layer (``[h]`` or ``[h, c]``), forward and backward states concatenated when bidirectional.
    Dropout (``dropout_layer``) is applied between layers, not after the top one.
    """
    x, finals = inputs, []
    for index, layer in enumerate(layers):
        outputs = run_layer(layer, x, mask=mask, training=training)
        x, states = outputs[0], list(outputs[1:])
        if bidirectional:
            half = len(states) // 2
            states = [ops.concatenate([f, b], axis=-1) for f, b in zip(states[:half], states[half:])]
        finals.append(states)
        if index < len(layers) - 1:
            x = dropout_layer(x, training=training)
    return x, finals


def run_decoder(layers, inputs, states, per_layer, dropout_layer, training=None):
    """Runs stacked RNN layers over a whole (teacher-forced) sequence ``inputs [B, Tt, D]``.

    ``states`` is the flat tuple of initial states (``per_layer`` tensors per layer). No mask:
    padding comes after the real tokens, so earlier steps do not see it (as in ``step_cells``).
    Returns the top layer's outputs ``[B, Tt, H]``.
    """
    x = inputs
    for index, layer in enumerate(layers):
        initial = list(states[index * per_layer:(index + 1) * per_layer])
        x = run_layer(layer, x, initial_state=initial, training=training)[0]
        if index < len(layers) - 1:
            x = dropout_layer(x, training=training)
    return x


def step_cells(cells, inputs, states, per_layer, dropout_layer, training=None):
    """One step of stacked RNN cells: ``inputs [B, D]``, flat ``states`` -> ``(h_top, new_states)``."""
    x, new_states = inputs, []
    for index, cell in enumerate(cells):
        previous = list(states[index * per_layer:(index + 1) * per_layer])
        x, state = cell(x, previous, training=training)
        new_states.extend(state if isinstance(state, (list, tuple)) else [state])
        if index < len(cells) - 1:
            x = dropout_layer(x, training=training)
    return x, tuple(new_states)


def reverse_padded(sequences, lengths):
    """Reverses each row of ``sequences [B, T, ...]`` within its first ``lengths [B]`` steps.

    Padding stays at the end: ``[a, b, c, 0, 0]`` -> ``[c, b, a, 0, 0]``.
    """
    steps = ops.arange(ops.shape(sequences)[1], dtype="int32")[None, :]
    lengths = ops.cast(lengths, "int32")[:, None]
    index = ops.where(steps < lengths, lengths - 1 - steps, steps)
    if len(sequences.shape) > 2:
        index = ops.reshape(index, (*ops.shape(index), *([1] * (len(sequences.shape) - 2))))
        index = ops.broadcast_to(index, ops.shape(sequences))
    return ops.take_along_axis(sequences, index, axis=1)
