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

    Token id 0 is padding in both vocabularies.
    """

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

    def call(self, inputs, training=None):
        source, target_in = inputs
        logits, _ = self.teacher_forced(source, target_in, training=training)
        return logits

    def attention_weights(self, inputs):
        source, target_in = inputs
        _, attention = self.teacher_forced(source, target_in, training=False)
        return attention
