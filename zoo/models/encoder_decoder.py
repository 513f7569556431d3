"""The interface every registered encoder-decoder model keeps."""

import keras
from keras import ops, tree

from zoo.models.exported_model import ExportedModel

HYPOTHESES = "hypotheses"  # the memory's key for rows per sentence (``Seq2SeqModel.hypotheses_memory``)


class Seq2SeqModel(ExportedModel):
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

    Optionally, a model splits the step into its features and the output projection, so that
    training projects onto the vocabulary once after the time loop, and only at real target
    tokens: ``decode_features(token, state, memory, training)`` -> ``(features [B, F], state,
    attention [B, Ts])``, ``output_logits(features [..., F], training)`` -> ``logits [..., V]``
    (the same function at every position: no state, no mixing across positions; whatever of the
    output side does not feed back into the decoder state belongs here, e.g. ``bahdanau``'s deep
    output readout and dropout) and ``feature_size`` (``F``). Then ``decode_step`` is the two
    together (it need not be written), and
    ``teacher_forced_features(source, target_in, training)`` -> ``(features [B, Tt, F],
    attention)`` gives what ``output_logits`` turns into the teacher-forced logits.
    ``supports_features`` says whether a model does.

    Beam search steps the decoder on ``K`` rows per sentence (its hypotheses, a sentence's rows
    next to each other) over ``hypotheses_memory(memory, K)``: by default every tensor of the
    memory repeated ``K`` times. A model whose step reads the memory only through attention may
    set ``groups_hypotheses``: the memory then stays one row per sentence, marked with the group
    size (``memory[HYPOTHESES] = K``), and the step attends with a sentence's ``K`` rows as that
    sentence's ``K`` queries (``zoo.models.alignment.attend_step``): the same numbers, each source
    read once for its ``K`` hypotheses instead of ``K`` times.

    ``call((source, target_in))`` returns logits ``[B, Tt, V]`` for teacher forcing, and
    ``call(..., return_features=True)`` the features ``[B, Tt, F]`` (models with features; the
    training step gathers the real tokens' rows before ``output_logits`` and the loss). The
    default teacher forcing runs ``decode_features`` (else ``decode_step``) over time with
    ``keras.ops.scan``, so training and decoding share one step function.
    ``attention_weights((source, target_in))`` returns the cross-attention ``[B, Tt, Ts]`` of
    teacher-forced decoding, for plots.

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
    groups_hypotheses = False  # True: ``hypotheses_memory`` keeps one row per sentence (see above)

    def encode(self, source, training=None):
        raise NotImplementedError

    def initial_state(self, memory, max_length=None):
        raise NotImplementedError

    def hypotheses_memory(self, memory, copies):
        """The memory ``decode_step`` reads for ``copies`` rows per sentence (each sentence's rows
        next to each other, as ``ops.repeat(rows, copies, axis=0)`` orders them): every tensor
        repeated ``copies`` times, or, where ``groups_hypotheses``, ``memory`` as it is with
        ``HYPOTHESES: copies`` added."""
        if self.groups_hypotheses:
            return {**memory, HYPOTHESES: int(copies)}
        return tree.map_structure(lambda x: ops.repeat(x, copies, axis=0), memory)

    def decode_step(self, token, state, memory, training=None):
        """``(logits [B, V], state, attention [B, Ts])``; by default ``output_logits`` of ``decode_features``."""
        if not self.supports_features:
            raise NotImplementedError
        features, state, attention = self.decode_features(token, state, memory, training=training)
        return self.output_logits(features, training=training), state, attention

    def decode_features(self, token, state, memory, training=None):
        """Optional: ``(features [B, F], state, attention [B, Ts])``, one step before the output projection."""
        raise NotImplementedError

    def output_logits(self, features, training=None):
        """Optional (with ``decode_features``): ``logits [..., V]`` of ``features [..., F]``, position by position."""
        raise NotImplementedError

    @property
    def supports_features(self):
        """True if the model splits its step into ``decode_features`` and ``output_logits``."""
        return type(self).decode_features is not Seq2SeqModel.decode_features

    def teacher_forced(self, source, target_in, training=None):
        """``(logits [B, Tt, V], attention [B, Tt, Ts])`` with the true previous tokens as inputs."""
        if self.supports_features:
            features, attention = self.teacher_forced_features(source, target_in, training=training)
            return self.output_logits(features, training=training), attention
        return self._step_loop(self.decode_step, self.target_vocab_size, "float32", source, target_in, training)

    def teacher_forced_features(self, source, target_in, training=None):
        """``(features [B, Tt, F], attention [B, Tt, Ts])``: ``decode_features`` over time (models with features)."""
        if not self.supports_features:
            raise NotImplementedError(f"{type(self).__name__} has no decode_features")
        return self._step_loop(self.decode_features, self.feature_size, self.compute_dtype, source, target_in,
                               training)

    def _step_loop(self, step_fn, width, dtype, source, target_in, training):
        """``step_fn`` (``decode_step`` or ``decode_features``) over the target steps: its first
        outputs ``[B, Tt, width]`` in ``dtype`` and the attention ``[B, Tt, Ts]``. ``target_in`` is
        ``[B, Tt]`` (the tokens) or ``[B, Tt, ...]`` (per-step inputs computed before the loop, for a
        ``step_fn`` that takes them in place of the token)."""
        self.ensure_built()
        memory = self.encode(source, training=training)
        state = self.initial_state(memory, max_length=ops.shape(target_in)[1])
        tokens = ops.swapaxes(target_in, 0, 1)  # time-major [Tt, B, ...]
        batch = ops.shape(source)[0]
        if self.time_loop == "bounded":
            return self._bounded_loop(step_fn, width, dtype, tokens, state, memory, batch, ops.shape(source)[1],
                                      training)
        # keras.ops.scan on TensorFlow stacks outputs shaped like the carry, so the carry holds
        # the step outputs too and every step's carry is stacked.
        init = (state, ops.zeros((batch, width), dtype), ops.zeros((batch, ops.shape(source)[1])))

        def step(carry, token):
            output, new_state, attention = step_fn(token, carry[0], memory, training=training)
            new_carry = (new_state, ops.cast(output, dtype), ops.cast(attention, "float32"))
            return new_carry, new_carry

        # On TensorFlow ``unroll`` is the while loop's ``parallel_iterations`` (Keras' default, 1,
        # runs one step's ops at a time); 32 as Keras' own RNN loop: a step's ops that do not wait
        # on the previous step (input reads, output writes, their gradients) overlap with it.
        # Other backends would unroll the loop: for them, 1.
        unroll = 32 if keras.backend.backend() == "tensorflow" else 1
        _, (_, outputs, attention) = ops.scan(step, init, tokens, unroll=unroll)
        return ops.transpose(outputs, (1, 0, 2)), ops.transpose(attention, (1, 0, 2))

    def _bounded_loop(self, step_fn, width, dtype, tokens, state, memory, batch, source_length, training):
        """``_step_loop`` as a while loop of at most ``Tt`` steps (XLA can differentiate it)."""
        length = ops.shape(tokens)[0]

        def body(t, state, outputs, attention):
            step_output, state, step_attention = step_fn(ops.take(tokens, t, axis=0), state, memory,
                                                         training=training)
            row = ops.reshape(t, (1, 1))  # scatter index: step t of the time-major outputs
            outputs = ops.scatter_update(outputs, row, ops.expand_dims(ops.cast(step_output, dtype), 0))
            attention = ops.scatter_update(attention, row, ops.expand_dims(ops.cast(step_attention, "float32"), 0))
            return t + 1, state, outputs, attention

        init = (ops.convert_to_tensor(0, "int32"), state, ops.zeros((length, batch, width), dtype),
                ops.zeros((length, batch, source_length)))
        _, _, outputs, attention = ops.while_loop(lambda t, *_: t < length, body, init, maximum_iterations=length)
        return ops.transpose(outputs, (1, 0, 2)), ops.transpose(attention, (1, 0, 2))

    def call(self, inputs, training=None, return_features=False):
        """Teacher-forced logits ``[B, Tt, V]``, or with ``return_features`` the features ``[B, Tt, F]``."""
        source, target_in = inputs
        if return_features:
            features, _ = self.teacher_forced_features(source, target_in, training=training)
            return features
        logits, _ = self.teacher_forced(source, target_in, training=training)
        return logits

    def attention_weights(self, inputs):
        source, target_in = inputs
        _, attention = self.teacher_forced(source, target_in, training=False)
        return attention
