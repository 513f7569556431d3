"""Token-by-token decoding in one ``tf.while_loop``, batched: the loop every one-hypothesis search
shares (``decode_loop``), and greedy decoding, the most likely token at each step.

Sampling (``zoo.decoding.sampling``) runs the same loop with another choice of token.
"""

import tensorflow as tf

from zoo.tokens import BOS_ID, EOS_ID, PAD_ID


def _as_source(part):
    """A source tensor as models read it: integers (token ids, image pixels) as int32, floats as they are."""
    part = tf.convert_to_tensor(part)
    return tf.cast(part, tf.int32) if part.dtype.is_integer else part


def decode_loop(model, source, max_length, choose, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID, scores=True):
    """Runs ``decode_step`` until every sequence produced ``<eos>`` or ``max_length`` steps.

    ``choose(logits [B, V] float32, step) -> tokens [B] int32`` picks the next tokens.
    Returns ``(ids [B, T], attention [B, T, Ts], lengths [B], logprob [B])``: tokens after a
    sequence's ``<eos>`` are ``pad_id`` and their attention rows 0; ``lengths`` count tokens
    up to and including ``<eos>``; ``logprob`` is the model's log-probability of the tokens
    (``logit - logsumexp(logits)`` of each chosen one), zeros with ``scores=False``: a
    while-loop variable is not pruned, so a caller that drops it says so and the loop
    leaves out its pass over the ``[B, V]`` logits.
    """
    # a tensor, or a tuple of them (audio: features and their frame counts)
    source = tuple(map(_as_source, source)) if isinstance(source, tuple) else _as_source(source)
    batch = tf.shape(source[0] if isinstance(source, tuple) else source)[0]
    model.ensure_built()
    memory = model.encode(source, training=False)
    max_length = tf.cast(max_length, tf.int32)
    state = model.initial_state(memory, max_length=max_length)

    ids_ta = tf.TensorArray(tf.int32, size=max_length, element_shape=tf.TensorShape([None]))
    attention_ta = tf.TensorArray(tf.float32, size=max_length, element_shape=tf.TensorShape([None, None]))
    token = tf.fill([batch], tf.constant(bos_id, tf.int32))
    finished = tf.zeros([batch], tf.bool)
    lengths = tf.zeros([batch], tf.int32)
    logprob = tf.zeros([batch], tf.float32)

    def cond(step, token, state, finished, lengths, logprob, ids_ta, attention_ta):
        return tf.logical_and(step < max_length, tf.logical_not(tf.reduce_all(finished)))

    def body(step, token, state, finished, lengths, logprob, ids_ta, attention_ta):
        logits, new_state, attention = model.decode_step(token, state, memory, training=False)
        logits = tf.cast(logits, tf.float32)
        next_token = choose(logits, step)
        if scores:
            step_logprob = tf.gather(logits, next_token, batch_dims=1) - tf.reduce_logsumexp(logits, axis=-1)
            logprob = logprob + tf.where(finished, 0.0, step_logprob)
        next_token = tf.where(finished, tf.constant(pad_id, tf.int32), next_token)
        attention = tf.where(finished[:, None], tf.zeros_like(attention), tf.cast(attention, tf.float32))
        lengths = lengths + tf.cast(tf.logical_not(finished), tf.int32)
        finished = tf.logical_or(finished, tf.equal(next_token, eos_id))
        ids_ta = ids_ta.write(step, next_token)
        attention_ta = attention_ta.write(step, attention)
        new_state = tf.nest.map_structure(lambda n, o: tf.reshape(n, tf.shape(o)), new_state, state)
        return step + 1, next_token, new_state, finished, lengths, logprob, ids_ta, attention_ta

    step, _, _, _, lengths, logprob, ids_ta, attention_ta = tf.while_loop(
        cond, body, (tf.constant(0), token, state, finished, lengths, logprob, ids_ta, attention_ta))
    ids = tf.reshape(tf.transpose(ids_ta.gather(tf.range(step))), [batch, step])
    # Ts: the positions attended over, the memory's (an image model's grid cells, not the source's rows)
    attention = tf.reshape(tf.transpose(attention_ta.gather(tf.range(step)), (1, 0, 2)),
                           [batch, step, tf.shape(memory["memory_mask"])[1]])
    return ids, attention, lengths, logprob


def greedy_decode(model, source, max_length, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID):
    """Greedy decoding of ``source [B, Ts]`` (int, 0 = padding): ``y_t = argmax_v p(v | y_<t, x)``,
    the most likely token at each step, fed back as the next step's input.

    Returns:
        ``(ids [B, T] int32, attention [B, T, Ts] float32, lengths [B] int32)``: tokens after
        a sequence's ``<eos>`` are ``pad_id`` and their attention rows are 0; ``lengths``
        count the tokens up to and including ``<eos>``.
    """
    ids, attention, lengths, _ = decode_loop(
        model, source, max_length, lambda logits, step: tf.argmax(logits, axis=-1, output_type=tf.int32),
        bos_id, eos_id, pad_id, scores=False)
    return ids, attention, lengths


def greedy_decode_with_scores(model, source, max_length, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID):
    """``greedy_decode`` plus the log-probability ``[B]`` of each decoded sequence."""
    return decode_loop(model, source, max_length,
                       lambda logits, step: tf.argmax(logits, axis=-1, output_type=tf.int32), bos_id, eos_id, pad_id)
