"""The interface every registered encoder-decoder model keeps, and the model registry."""

import keras
from keras import ops

from zoo.registry import Registry

MODELS = Registry("model")
register_model = MODELS.register


class Seq2SeqModel(keras.Model):
    """An encoder-decoder that is trained with teacher forcing and decoded step by step.

    Subclasses implement three methods, which are all a decoder (greedy, beam search, the
    exported SavedModel) needs:

    - ``encode(source, training)`` -> ``memory``: a dict of tensors computed once per source
      sequence (encoder outputs, their mask, prepared attention keys, ...).
    - ``initial_state(memory, max_length)`` -> the decoder state: a tuple (or dict) of tensors
      whose shapes stay the same at every step (``max_length`` bounds the steps, e.g. for a
      preallocated key/value cache).
    - ``decode_step(token, state, memory, training)`` -> ``(logits [B, V], state,
      attention [B, Ts])`` for one target step.

    ``call((source, target_in))`` returns logits ``[B, Tt, V]`` for teacher forcing; the
    default runs ``decode_step`` over time with ``keras.ops.scan``, so training and decoding
    share one step function. ``attention_weights((source, target_in))`` returns the
    cross-attention ``[B, Tt, Ts]`` of teacher-forced decoding, for plots.

    ``time_loop`` picks that loop: ``"scan"`` (the default) or ``"bounded"``, a
    ``keras.ops.while_loop`` whose ``maximum_iterations`` is the target length, with the step
    outputs written into preallocated ``[Tt, B, ...]`` tensors. XLA differentiates only the
    second (a while loop's gradient keeps each step's values in lists whose size must be known
    when compiling), and only with a static batch size (otherwise a ``Dense`` on a ``[B, 1, H]``
    query computes its transpose permutation at run time, a value the gradient loop cannot get as
    a constant). The training engine sets it for its XLA step (``trainer.jit_compile``), whose
    batches are padded to full rows. Same numbers as the scan.

    Token id 0 is padding in both vocabularies.
    """

    time_loop = "scan"  # or "bounded" (XLA): how ``teacher_forced`` runs ``decode_step`` over time

    @property
    def _default_save_signature(self):
        # Keras (TensorFlow backend) would trace ``call`` as a serving function whenever a
        # SavedModel holds this model; the exported entry points are the translator's.
        return None

    def ensure_built(self):
        """Builds the weights (their shapes do not depend on the data) if not built yet."""
        if not self.built:
            self.build(None)
        return self

    def encode(self, source, training=None):
        raise NotImplementedError

    def initial_state(self, memory, max_length=None):
        raise NotImplementedError

    def decode_step(self, token, state, memory, training=None):
        raise NotImplementedError

    def teacher_forced(self, source, target_in, training=None):
        """``(logits [B, Tt, V], attention [B, Tt, Ts])`` with the true previous tokens as inputs."""
        self.ensure_built()
        memory = self.encode(source, training=training)
        state = self.initial_state(memory, max_length=ops.shape(target_in)[1])
        tokens = ops.transpose(target_in)  # time-major [Tt, B]
        batch = ops.shape(source)[0]
        if self.time_loop == "bounded":
            return self._bounded_teacher_forced(tokens, state, memory, batch, ops.shape(source)[1], training)
        # keras.ops.scan on TensorFlow stacks outputs shaped like the carry, so the carry holds
        # the step outputs too and every step's carry is stacked.
        init = (state, ops.zeros((batch, self.target_vocab_size)),
                ops.zeros((batch, ops.shape(source)[1])))

        def step(carry, token):
            logits, new_state, attention = self.decode_step(token, carry[0], memory, training=training)
            new_carry = (new_state, ops.cast(logits, "float32"), ops.cast(attention, "float32"))
            return new_carry, new_carry

        _, (_, logits, attention) = ops.scan(step, init, tokens)
        return ops.transpose(logits, (1, 0, 2)), ops.transpose(attention, (1, 0, 2))

    def _bounded_teacher_forced(self, tokens, state, memory, batch, source_length, training):
        """``teacher_forced`` as a while loop of at most ``Tt`` steps (XLA can differentiate it)."""
        length = ops.shape(tokens)[0]

        def body(t, state, logits, attention):
            step_logits, state, step_attention = self.decode_step(ops.take(tokens, t, axis=0), state, memory,
                                                                  training=training)
            row = ops.reshape(t, (1, 1))  # scatter index: step t of the time-major outputs
            logits = ops.scatter_update(logits, row, ops.expand_dims(ops.cast(step_logits, "float32"), 0))
            attention = ops.scatter_update(attention, row, ops.expand_dims(ops.cast(step_attention, "float32"), 0))
            return t + 1, state, logits, attention

        init = (ops.convert_to_tensor(0, "int32"), state, ops.zeros((length, batch, self.target_vocab_size)),
                ops.zeros((length, batch, source_length)))
        _, _, logits, attention = ops.while_loop(lambda t, *_: t < length, body, init, maximum_iterations=length)
        return ops.transpose(logits, (1, 0, 2)), ops.transpose(attention, (1, 0, 2))

    def call(self, inputs, training=None):
        source, target_in = inputs
        logits, _ = self.teacher_forced(source, target_in, training=training)
        return logits

    def attention_weights(self, inputs):
        source, target_in = inputs
        _, attention = self.teacher_forced(source, target_in, training=False)
        return attention
