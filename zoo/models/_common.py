"""Helpers shared by the models (private): argument checks, stacked RNNs, attention plumbing.

Backend-neutral (``keras.ops`` only), like the rest of ``zoo.models``.
"""

import inspect
import numbers

import keras
from keras import ops

# Argument checks, Keras style: the same ones the attention layers use.
from zoo.attention._validation import _invalid, boolean, choice, positive_int  # noqa: F401

RNN_CELLS = ("gru", "lstm")


def rate(name, value):
    """Returns ``float(value)`` if it is a number in [0, 1), else raises naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise _invalid(name, "a float in [0, 1)", value)
    return float(value)


def create_alignment_attention(model_name, attention, options):
    """The alignment attention layer ``attention`` named ``attention``, or a clear error."""
    import zoo.attention as zoo_attention

    if attention not in zoo_attention.alignment_names():
        raise ValueError(f"Unknown alignment attention '{attention}' for model {model_name}. "
                         f"Available: {', '.join(zoo_attention.alignment_names())}")
    if not isinstance(options, dict):
        raise _invalid("attention_options", "a dict of keyword arguments for the attention layer", options)
    return zoo_attention.create(attention, name="attention", **options)


# -- attention plumbing -----------------------------------------------------------------------
def takes_positions(attention):
    """True if the layer's ``attend`` takes the query position (``position_offset``), e.g. local-m."""
    return "position_offset" in inspect.signature(attention.attend).parameters


def head_mean(weights):
    """``[B, Tq, Tv]`` attention weights: multi-head ``[B, H, Tq, Tv]`` averaged over heads."""
    return ops.mean(weights, axis=1) if len(weights.shape) == 4 else weights


def attention_row(weights):
    """``[B, Tv]`` from the weights of one query step (``[B, 1, Tv]`` or ``[B, H, 1, Tv]``)."""
    return ops.squeeze(head_mean(weights), 1)


# -- stacked RNNs -----------------------------------------------------------------------------
def states_per_layer(cell):
    """How many state tensors a layer of ``cell`` carries: 1 for GRU (h), 2 for LSTM (h, c)."""
    return 2 if cell == "lstm" else 1


def setup_rnn_encoder_decoder(model, source_vocab_size, target_vocab_size, embed_dim, hidden_size, cell,
                              num_layers, bidirectional, dropout):
    """Validates the shared RNN arguments and gives ``model`` its embeddings and RNN stacks.

    Sets ``source_vocab_size, target_vocab_size, embed_dim, hidden_size, cell, num_layers,
    bidirectional, dropout, source_embedding, target_embedding, encoder_layers, decoder_layers,
    output_projection, embedding_dropout, layer_dropout, output_dropout, per_layer``; a
    bidirectional encoder has ``hidden_size // 2`` units per direction.
    """
    model.source_vocab_size = positive_int("source_vocab_size", source_vocab_size)
    model.target_vocab_size = positive_int("target_vocab_size", target_vocab_size)
    model.embed_dim = positive_int("embed_dim", embed_dim)
    model.hidden_size = positive_int("hidden_size", hidden_size)
    model.cell = choice("cell", cell, RNN_CELLS)
    model.num_layers = positive_int("num_layers", num_layers)
    model.bidirectional = boolean("bidirectional", bidirectional)
    if model.bidirectional and hidden_size % 2:
        raise ValueError("Received an invalid value for argument `hidden_size`, expected an even integer "
                         "with bidirectional=True (each encoder direction has hidden_size // 2 units). "
                         f"Received: hidden_size={hidden_size}")
    dtype = model.dtype_policy
    model.source_embedding = keras.layers.Embedding(source_vocab_size, embed_dim, mask_zero=True,
                                                    name="source_embedding", dtype=dtype)
    model.target_embedding = keras.layers.Embedding(target_vocab_size, embed_dim, name="target_embedding",
                                                    dtype=dtype)
    encoder_units = hidden_size // 2 if model.bidirectional else hidden_size
    model.encoder_layers = [make_rnn(model.cell, encoder_units, f"encoder_{i}", model.bidirectional, dtype)
                            for i in range(num_layers)]
    model.decoder_layers = [make_rnn(model.cell, hidden_size, f"decoder_{i}", dtype=dtype)
                            for i in range(num_layers)]
    model.dropout = rate("dropout", dropout)
    model.output_projection = keras.layers.Dense(target_vocab_size, name="output_projection", dtype=dtype)
    model.embedding_dropout = keras.layers.Dropout(model.dropout, name="embedding_dropout", dtype=dtype)
    model.layer_dropout = keras.layers.Dropout(model.dropout, name="layer_dropout", dtype=dtype)
    model.output_dropout = keras.layers.Dropout(model.dropout, name="output_dropout", dtype=dtype)
    model.per_layer = states_per_layer(model.cell)


def make_rnn(cell, units, name, bidirectional=False, dtype=None):
    """A ``GRU``/``LSTM`` layer returning sequences and state(s), optionally bidirectional.

    The layer's ``cell`` attribute is also what a decoder steps with, so the same weights run
    over a whole sequence (parallel teacher forcing) or one step at a time.
    """
    layer_class = keras.layers.GRU if cell == "gru" else keras.layers.LSTM
    rnn = layer_class(units, return_sequences=True, return_state=True, name=name, dtype=dtype)
    if bidirectional:
        return keras.layers.Bidirectional(rnn, name=f"{name}_bidirectional", dtype=dtype)
    return rnn


def run_encoder(layers, inputs, mask, bidirectional, dropout_layer, training=None):
    """Runs stacked (bidirectional) RNN layers over ``inputs [B, Ts, D]``.

    Returns ``(outputs [B, Ts, H'], finals)``: ``finals`` has one list of state tensors per
    layer (``[h]`` or ``[h, c]``), forward and backward states concatenated when bidirectional.
    Dropout (``dropout_layer``) is applied between layers, not after the top one.
    """
    x, finals = inputs, []
    for index, layer in enumerate(layers):
        outputs = layer(x, mask=mask, training=training)
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
        x = layer(x, initial_state=initial, training=training)[0]
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
