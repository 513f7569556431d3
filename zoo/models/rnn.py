"""The RNN encoder-decoder builder of ``bahdanau``, ``luong`` and ``seq2seq``: sizes, layers, runners.

One convention for every RNN model: ``hidden_size`` is the decoder RNN's width (its state and
output); the encoder has ``encoder_units`` units per direction, which each model derives from
``hidden_size`` (``luong`` and ``seq2seq``: ``hidden_size // 2`` per direction when bidirectional,
so that the memory is ``hidden_size`` wide; ``bahdanau``: ``hidden_size`` per direction, bridged
to the decoder). Every layer gets the model's ``dtype_policy``.

``setup_rnn_encoder_decoder`` makes all the layers at once (``luong``, ``seq2seq``); a model
whose older ``.keras`` files and seeded initial weights depend on another creation order
(``bahdanau``) calls its steps (``set_rnn_arguments``, ``make_embeddings``, ``make_rnn``,
``make_cell``) in its own order. Backend-neutral (``keras.ops``), except ``run_layer``'s fast path
on TensorFlow (``_projected_rnn``): whole-sequence GRU/LSTM layers with every step's input product
in one matmul before the time loop and the loop's gradient written out, the same numbers as the
Keras layer up to rounding.
"""

import keras
from keras import ops

from zoo.attention.base_attention import move_axes
from zoo.checks import boolean, choice, enforce, positive_int
from zoo.models.common import rate
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


def _plain_cell(layer, training):
    """True when ``layer`` (a ``GRU``/``LSTM`` layer) runs as ``_projected_rnn`` runs it: default
    activations, the GRU's reset gate after the product, no dropout in training, not stateful,
    returning sequences and states, and no GPU (there Keras' cuDNN kernel is faster than any loop).
    ``run_layer`` also wants each part's direction as ``Bidirectional`` makes it."""
    if not isinstance(layer, (keras.layers.GRU, keras.layers.LSTM)) or layer.stateful or layer.unroll:
        return False
    if not (layer.return_sequences and layer.return_state):  # the [outputs, *states] of every caller
        return False
    cell = layer.cell
    if isinstance(layer, keras.layers.GRU) and not cell.reset_after:
        return False
    if cell.activation is not keras.activations.tanh or cell.recurrent_activation is not keras.activations.sigmoid:
        return False
    if training and (cell.dropout or cell.recurrent_dropout):
        return False
    return keras.backend.backend() == "tensorflow" and not keras.distribution.list_devices("gpu")


def _projected_rnn(layer, inputs, lengths=None, initial_state=None, reverse=False):
    """``layer``'s numbers over ``inputs [B, T, D]`` (up to rounding), with the input products of
    every step in one matmul before the time loop.

    Keras' layer multiplies each step's input by the input kernel inside its loop, so the
    gradient of that kernel is a product per step, summed across steps; here it is one product
    over all steps. Padding comes after the real tokens (``lengths [B]`` real steps per row): the
    loop needs no mask, each row's final state is read at its last real step, and ``reverse`` (a
    bidirectional layer's backward half) reverses each row within its length, runs forwards and
    reverses the outputs back. Outputs at padded steps are zero. Returns ``[outputs, *states]``.
    The time loop's gradient is written out (``_gru_sequences``, ``_lstm_sequences``).
    """
    import tensorflow as tf  # _plain_cell: TensorFlow only

    cell = layer.cell
    units, lstm = cell.units, isinstance(layer, keras.layers.LSTM)
    dtype = cell.compute_dtype  # the weights as the layer's call sees them (autocast under mixed precision)
    kernel, recurrent_kernel = ops.cast(cell.kernel, dtype), ops.cast(cell.recurrent_kernel, dtype)
    inputs = ops.cast(inputs, dtype)
    if reverse:  # not reverse_padded (a take_along_axis): with its gradient, small luong's step 7.9 -> 10.3 ms
        inputs = tf.reverse_sequence(inputs, lengths, seq_axis=1, batch_axis=0)
    projected = ops.matmul(inputs, kernel)  # [B, T, gates * units]: every step at once
    recurrent_bias = None
    if cell.use_bias:
        bias = ops.cast(cell.bias, dtype)
        if not lstm:  # GRU, reset after: an input bias and a recurrent bias
            bias, recurrent_bias = bias[0], bias[1]
        projected = projected + bias
    zeros = ops.zeros((ops.shape(inputs)[0], units), dtype)
    states = [ops.cast(s, dtype) for s in initial_state] if initial_state is not None else (
        [zeros, zeros] if lstm else [zeros])

    projected = move_axes(projected, (1, 0, 2), own_kernel=True)  # time-major, as the time loop reads it
    if lstm:
        sequences = _lstm_sequences(projected, *states, recurrent_kernel)
    else:
        if recurrent_bias is None:
            recurrent_bias = tf.zeros((3 * units,), dtype)
        sequences = _gru_sequences(projected, states[0], recurrent_kernel, recurrent_bias)
    outputs = move_axes(sequences[0], (1, 0, 2), own_kernel=True)  # [B, T, units]
    if lengths is None:
        return [outputs, *(seq[-1] for seq in sequences)]
    rows = tf.range(tf.shape(lengths)[0], dtype=lengths.dtype)
    last = tf.stack([tf.maximum(lengths - 1, 0), rows], axis=1)  # (step, row) of each row's last real step
    empty = tf.equal(lengths, 0)[:, None]
    finals = [tf.where(empty, start, tf.gather_nd(seq, last)) for seq, start in zip(sequences, states)]
    outputs = outputs * tf.sequence_mask(lengths, tf.shape(inputs)[1], dtype)[:, :, None]
    return [tf.reverse_sequence(outputs, lengths, seq_axis=1, batch_axis=0) if reverse else outputs, *finals]


# The two time loops of ``_projected_rnn``, each with its gradient written out (``tf.custom_gradient``).
# Differentiating the loop itself, TensorFlow keeps every intermediate of every step and adds up the
# recurrent kernel's gradient step by step; here the forward loop keeps the gates (by reference: a
# ``TensorArray`` write copies nothing), the backward loop reads them and runs the gates' derivatives
# (``SigmoidGrad``, ``TanhGrad``), and the recurrent kernel's gradient is one product over all steps
# after it. Inputs time-major: ``projected [T, B, G]`` (every step's input product and input bias),
# states ``[B, units]``. Returns the sequence of each state, ``[T, B, units]``. Gates in Keras'
# order: GRU z, r, h; LSTM i, f, c, o (no slice's gradient to pay for: the backward loop is ours).

def _loop(body, steps, carry, backwards=False):
    """``tf.while_loop`` over ``steps`` time steps (from the last when ``backwards``): ``body(t, *carry)``."""
    import tensorflow as tf

    first = steps - 1 if backwards else 0
    done = (lambda t, *_: t >= 0) if backwards else (lambda t, *_: t < steps)
    out = tf.while_loop(done, lambda t, *c: (t + (-1 if backwards else 1), *body(t, *c)), (first, *carry),
                        maximum_iterations=steps)
    return out[1:]


def _arrays(count, dtype, steps, element_shape=None):
    """``count`` ``TensorArray``s of ``steps`` elements, read more than once (eager ones clear a read element)."""
    import tensorflow as tf

    return tuple(tf.TensorArray(dtype, size=steps, element_shape=element_shape, clear_after_read=False)
                 for _ in range(count))


def _gru_sequences(projected, h0, kernel, bias):
    """A GRU (Keras' ``reset_after``: ``h~ = tanh(x_h + r (h W_h + b_h))``, ``h' = z h + (1 - z) h~``)."""
    import tensorflow as tf

    @tf.custom_gradient
    def gru(projected, h0, kernel, bias):
        steps, units, dtype = tf.shape(projected)[0], h0.shape[-1], projected.dtype
        inputs = tf.TensorArray(dtype, size=steps).unstack(projected)

        def step(t, hs, gates, candidates, inners, previous, h):
            x_zr, x_h = tf.split(inputs.read(t), [2 * units, units], axis=-1)
            inner_zr, inner_h = tf.split(tf.nn.bias_add(tf.matmul(h, kernel), bias), [2 * units, units], axis=-1)
            zr = tf.sigmoid(x_zr + inner_zr)
            r = zr[:, units:]
            candidate = tf.tanh(x_h + r * inner_h)
            new = candidate + zr[:, :units] * (h - candidate)
            return (hs.write(t, new), gates.write(t, zr), candidates.write(t, candidate), inners.write(t, inner_h),
                    previous.write(t, h), new)

        hs, gates, candidates, inners, previous, _ = _loop(
            step, steps, (*_arrays(1, dtype, steps, h0.shape), *_arrays(4, dtype, steps), h0))

        def grad(d_hs):
            d_outputs = tf.TensorArray(dtype, size=steps).unstack(d_hs)

            def back(t, d_inners, d_candidates, dh):
                dh = dh + d_outputs.read(t)
                z, r = tf.split(gates.read(t), 2, axis=-1)
                candidate = candidates.read(t)
                dh_z = dh * z
                d_candidate = tf.raw_ops.TanhGrad(y=candidate, dy=dh - dh_z)  # before the tanh
                d_zr = tf.concat([tf.raw_ops.SigmoidGrad(y=z, dy=dh * (previous.read(t) - candidate)),
                                  tf.raw_ops.SigmoidGrad(y=r, dy=d_candidate * inners.read(t))], axis=-1)
                d_inner = tf.concat([d_zr, d_candidate * r], axis=-1)
                return (d_inners.write(t, d_inner), d_candidates.write(t, d_candidate),
                        dh_z + tf.matmul(d_inner, kernel, transpose_b=True))

            d_inners, d_candidates, dh0 = _loop(back, steps, (*_arrays(2, dtype, steps), tf.zeros_like(h0)),
                                                backwards=True)
            d_inners = d_inners.stack()  # [T, B, 3 units]
            d_projected = tf.concat([d_inners[..., :2 * units], d_candidates.stack()], axis=-1)
            d_kernel = tf.matmul(tf.reshape(previous.stack(), (-1, units)), tf.reshape(d_inners, (-1, 3 * units)),
                                 transpose_a=True)
            return d_projected, dh0, d_kernel, tf.reduce_sum(d_inners, axis=(0, 1))

        return hs.stack(), grad

    return [gru(projected, h0, kernel, bias)]


def _lstm_sequences(projected, h0, c0, kernel):
    """An LSTM (``c' = f c + i tanh(g)``, ``h' = o tanh(c')``): the sequences of ``h`` and ``c``."""
    import tensorflow as tf

    @tf.custom_gradient
    def lstm(projected, h0, c0, kernel):
        steps, units, dtype = tf.shape(projected)[0], h0.shape[-1], projected.dtype
        inputs = tf.TensorArray(dtype, size=steps).unstack(projected)

        def step(t, hs, cs, sigmoids, gs, tanh_cs, previous_h, previous_c, h, c):
            gates = inputs.read(t) + tf.matmul(h, kernel)
            sigmoid = tf.sigmoid(gates)  # i, f and o (and a sigmoid of g, unused)
            i, f, _, o = tf.split(sigmoid, 4, axis=-1)
            g = tf.tanh(gates[:, 2 * units:3 * units])
            c_new = f * c + i * g
            tanh_c = tf.tanh(c_new)
            h_new = o * tanh_c
            return (hs.write(t, h_new), cs.write(t, c_new), sigmoids.write(t, sigmoid), gs.write(t, g),
                    tanh_cs.write(t, tanh_c), previous_h.write(t, h), previous_c.write(t, c), h_new, c_new)

        hs, cs, sigmoids, gs, tanh_cs, previous_h, previous_c, _, _ = _loop(
            step, steps, (*_arrays(2, dtype, steps, h0.shape), *_arrays(5, dtype, steps), h0, c0))

        def grad(d_hs, d_cs):
            d_h_outputs = tf.TensorArray(dtype, size=steps).unstack(d_hs)
            d_c_outputs = tf.TensorArray(dtype, size=steps).unstack(d_cs)

            def back(t, d_gates, dh, dc):
                dh = dh + d_h_outputs.read(t)
                i, f, _, o = tf.split(sigmoids.read(t), 4, axis=-1)
                g, tanh_c = gs.read(t), tanh_cs.read(t)
                dc = dc + d_c_outputs.read(t) + tf.raw_ops.TanhGrad(y=tanh_c, dy=dh * o)
                d = tf.concat([tf.raw_ops.SigmoidGrad(y=i, dy=dc * g),
                               tf.raw_ops.SigmoidGrad(y=f, dy=dc * previous_c.read(t)),
                               tf.raw_ops.TanhGrad(y=g, dy=dc * i), tf.raw_ops.SigmoidGrad(y=o, dy=dh * tanh_c)],
                              axis=-1)
                return d_gates.write(t, d), tf.matmul(d, kernel, transpose_b=True), dc * f

            d_gates, dh0, dc0 = _loop(back, steps, (*_arrays(1, dtype, steps), tf.zeros_like(h0), tf.zeros_like(c0)),
                                      backwards=True)
            d_gates = d_gates.stack()  # [T, B, 4 units]: the gradient of ``projected`` too
            d_kernel = tf.matmul(tf.reshape(previous_h.stack(), (-1, units)), tf.reshape(d_gates, (-1, 4 * units)),
                                 transpose_a=True)
            return d_gates, dh0, dc0, d_kernel

        return (hs.stack(), cs.stack()), grad

    return list(lstm(projected, h0, c0, kernel))


def run_layer(layer, inputs, mask=None, initial_state=None, training=None, fast=True):
    """``layer(inputs, mask=mask, initial_state=initial_state, training=training)`` for a
    ``GRU``/``LSTM`` layer or a ``Bidirectional`` one: ``[outputs, *states]``. With ``fast`` and
    plain cells, by ``_projected_rnn`` (``mask`` must then be True on a prefix of each row: right
    padding); otherwise by the layer. Outputs at masked steps are zero either way in a
    bidirectional layer; a plain layer's are, in Keras, the last real output. No caller reads them."""
    bidirectional = isinstance(layer, keras.layers.Bidirectional)
    parts = (layer.forward_layer, layer.backward_layer) if bidirectional else (layer,)
    directions = (False, True) if bidirectional else (False,)  # go_backwards of each part
    if not (fast and all(_plain_cell(part, training) and part.go_backwards == backwards
                         for part, backwards in zip(parts, directions))
            and (not bidirectional or (layer.merge_mode == "concat" and initial_state is None))):
        kwargs = {} if initial_state is None else {"initial_state": initial_state}
        return list(layer(inputs, mask=mask, training=training, **kwargs))
    lengths = None if mask is None else ops.sum(ops.cast(mask, "int32"), axis=1)  # right padding: the real steps
    if not bidirectional:
        return _projected_rnn(layer, inputs, lengths, initial_state)
    forward = _projected_rnn(parts[0], inputs, lengths)
    backward = _projected_rnn(parts[1], inputs, lengths, reverse=True)
    return [ops.concatenate([forward[0], backward[0]], axis=-1), *forward[1:], *backward[1:]]


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
