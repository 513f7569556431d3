"""The fast path of ``zoo.models.recurrent.rnn.run_layer``: whole-sequence GRU/LSTM layers on TensorFlow with
every step's input product in one matmul before the time loop, and the loop's gradient written out.

Same weights, same numbers (up to float32 rounding) as Keras' layer, which ``run_layer``'s reference
calls: ``tests/fast/test_rnn.py``. Measured (``docs/performance.md``, 2026-11-24 evening and
2026-11-25 evening; 2-core Zen 4, float32, old and new alternating in one process):

- **one input product over all steps**: Keras' layer multiplies each step's input by the input
  kernel inside its loop, so that kernel's gradient is one small product per step, summed; here it
  is one product over ``[B T, D]``. Training steps: base ``seq2seq`` 183 -> 161 ms, ``luong`` 189 ->
  169, ``bahdanau`` 319 -> 294, small ``luong`` 17.2 -> 14.1.
- **the time loop's gradient written out** (``_gru_sequences``, ``_lstm_sequences``): differentiating
  a ``while_loop``, TensorFlow keeps every intermediate of every step and adds the recurrent
  kernel's gradient up step by step (one GRU layer of 16 units, batch 64: 24 us a step forward, 106
  us forward and backward). Here the forward loop keeps the gates (by reference: a ``TensorArray``
  write copies nothing), the backward loop reads them and runs ``SigmoidGrad`` / ``TanhGrad``, and
  the recurrent kernel's gradient is one product over all steps after it. Small ``luong`` 8.87 ->
  6.95 ms a step, ``seq2seq`` 7.42 -> 5.93, ``bahdanau`` 10.81 -> 10.27.
- **the moves to time-major and back by TensorFlow's own transpose** on the bits as int32
  (``_transpose``): oneDNN's transpose, the x86 default, pays a fixed cost many times a small
  copy's: ``[64, 9, 96]`` 47 us -> under 5, ``[64, 20, 768]`` 170 -> 137 us.

A SavedModel's functions (traced within ``kernels.exporting()``) run the same loops forward only, with no
custom gradient in the graph, so exports keep this speed and load without a warning.

Where it does not apply (another backend, a GPU where Keras' cuDNN kernel is faster, dropout in
training, a GRU without ``reset_after``, other activations, a stateful or unrolled layer, a
``Bidirectional`` one merged other than by ``concat`` or given initial states), the reference runs.
"""

import keras
import tensorflow as tf
from keras import ops

from zoo import kernels
from zoo.fast.attention import int32_transpose
from zoo.models.recurrent import rnn


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


@kernels.replaces("zoo.models.recurrent.rnn.run_layer")  # in exports too, forward only (_with_own_gradient)
def run_layer(layer, inputs, mask=None, initial_state=None, training=None):
    """``rnn.run_layer``: by ``_projected_rnn`` where every part of ``layer`` is plain (``mask`` must
    then be True on a prefix of each row: right padding, as everywhere in ``zoo``); otherwise the
    reference. Outputs at padded steps are zero."""
    bidirectional = isinstance(layer, keras.layers.Bidirectional)
    parts = (layer.forward_layer, layer.backward_layer) if bidirectional else (layer,)
    directions = (False, True) if bidirectional else (False,)  # go_backwards of each part
    if not (all(_plain_cell(part, training) and part.go_backwards == backwards
                for part, backwards in zip(parts, directions))
            and (not bidirectional or (layer.merge_mode == "concat" and initial_state is None))):
        return rnn.run_layer.reference(layer, inputs, mask=mask, initial_state=initial_state, training=training)
    lengths = None if mask is None else ops.sum(ops.cast(mask, "int32"), axis=1)  # right padding: the real steps
    if not bidirectional:
        return _projected_rnn(layer, inputs, lengths, initial_state)
    forward = _projected_rnn(parts[0], inputs, lengths)
    backward = _projected_rnn(parts[1], inputs, lengths, reverse=True)
    return [ops.concatenate([forward[0], backward[0]], axis=-1), *forward[1:], *backward[1:]]


def _transpose(x, perm):
    """``tf.transpose(x, perm)``; for float32, by TensorFlow's own kernel on the bits as int32 (forward
    and backward), which oneDNN does not take over."""
    if x.dtype != tf.float32:
        return tf.transpose(x, perm)
    return int32_transpose(x, perm)


def _projected_rnn(layer, inputs, lengths=None, initial_state=None, reverse=False):
    """``layer``'s numbers over ``inputs [B, T, D]`` (up to rounding), with the input products of
    every step in one matmul before the time loop.

    Padding comes after the real tokens (``lengths [B]`` real steps per row): the loop needs no
    mask, each row's final state is read at its last real step, and ``reverse`` (a bidirectional
    layer's backward half) reverses each row within its length, runs forwards and reverses the
    outputs back. Outputs at padded steps are zero. Returns ``[outputs, *states]``.
    """
    cell = layer.cell
    units, lstm = cell.units, isinstance(layer, keras.layers.LSTM)
    dtype = cell.compute_dtype  # the weights as the layer's call sees them (autocast under mixed precision)
    kernel, recurrent_kernel = ops.cast(cell.kernel, dtype), ops.cast(cell.recurrent_kernel, dtype)
    inputs = ops.cast(inputs, dtype)
    if reverse:  # not rnn.reverse_padded (a take_along_axis): with its gradient, small luong's step 7.9 -> 10.3 ms
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

    projected = _transpose(projected, (1, 0, 2))  # time-major, as the time loop reads it
    if lstm:
        sequences = _lstm_sequences(projected, *states, recurrent_kernel)
    else:
        if recurrent_bias is None:
            recurrent_bias = tf.zeros((3 * units,), dtype)
        sequences = _gru_sequences(projected, states[0], recurrent_kernel, recurrent_bias)
    outputs = _transpose(sequences[0], (1, 0, 2))  # [B, T, units]
    if lengths is None:
        return [outputs, *(seq[-1] for seq in sequences)]
    rows = tf.range(tf.shape(lengths)[0], dtype=lengths.dtype)
    last = tf.stack([tf.maximum(lengths - 1, 0), rows], axis=1)  # (step, row) of each row's last real step
    empty = tf.equal(lengths, 0)[:, None]
    finals = [tf.where(empty, start, tf.gather_nd(seq, last)) for seq, start in zip(sequences, states)]
    outputs = outputs * tf.sequence_mask(lengths, tf.shape(inputs)[1], dtype)[:, :, None]
    return [tf.reverse_sequence(outputs, lengths, seq_axis=1, batch_axis=0) if reverse else outputs, *finals]


# The two time loops of ``_projected_rnn``, each with its gradient written out (``tf.custom_gradient``;
# forward only when a SavedModel is traced).
# Differentiating the loop itself, TensorFlow keeps every intermediate of every step and adds up the
# recurrent kernel's gradient step by step; here the forward loop keeps the gates (by reference: a
# ``TensorArray`` write copies nothing), the backward loop reads them and runs the gates' derivatives
# (``SigmoidGrad``, ``TanhGrad``), and the recurrent kernel's gradient is one product over all steps
# after it. Inputs time-major: ``projected [T, B, G]`` (every step's input product and input bias),
# states ``[B, units]``. Returns the sequence of each state, ``[T, B, units]``. Gates in Keras'
# order: GRU z, r, h; LSTM i, f, c, o (no slice's gradient to pay for: the backward loop is ours).

def _loop(body, steps, carry, backwards=False):
    """``tf.while_loop`` over ``steps`` time steps (from the last when ``backwards``): ``body(t, *carry)``."""
    first = steps - 1 if backwards else 0
    done = (lambda t, *_: t >= 0) if backwards else (lambda t, *_: t < steps)
    out = tf.while_loop(done, lambda t, *c: (t + (-1 if backwards else 1), *body(t, *c)), (first, *carry),
                        maximum_iterations=steps)
    return out[1:]


def _arrays(count, dtype, steps, element_shape=None):
    """``count`` ``TensorArray``s of ``steps`` elements, read more than once (eager ones clear a read element)."""
    return tuple(tf.TensorArray(dtype, size=steps, element_shape=element_shape, clear_after_read=False)
                 for _ in range(count))


def _with_own_gradient(loop, *args):
    """``loop(*args)`` (which returns ``(outputs, grad)``) under ``tf.custom_gradient``; when a SavedModel
    is traced (``kernels.exporting()``) its outputs alone, with no custom gradient in the graph: an
    exported model is not differentiated, and loading it then warns of nothing."""
    if kernels.is_exporting():
        return loop(*args)[0]
    return tf.custom_gradient(loop)(*args)


def _gru_sequences(projected, h0, kernel, bias):
    """A GRU (Keras' ``reset_after``: ``h~ = tanh(x_h + r (h W_h + b_h))``, ``h' = z h + (1 - z) h~``)."""
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

    return [_with_own_gradient(gru, projected, h0, kernel, bias)]


def _lstm_sequences(projected, h0, c0, kernel):
    """An LSTM (``c' = f c + i tanh(g)``, ``h' = o tanh(c')``): the sequences of ``h`` and ``c``."""
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

    return list(_with_own_gradient(lstm, projected, h0, c0, kernel))
