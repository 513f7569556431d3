"""Greedy decoding in one ``tf.while_loop``: batched, no Python per step."""

import tensorflow as tf

from zoo.data.tokenizers import BOS_ID, EOS_ID, PAD_ID


def greedy_decode(model, source, max_length, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID):
    """Decodes ``source [B, Ts]`` (int, 0 = padding) with the model's ``decode_step``.

    Stops when every sequence has produced ``<eos>`` or after ``max_length`` steps.

    Returns:
        ``(ids [B, T] int32, attention [B, T, Ts] float32, lengths [B] int32)``: tokens after
        a sequence's ``<eos>`` are ``pad_id`` and their attention rows are 0; ``lengths``
        count the tokens up to and including ``<eos>``.
    """
    source = tf.cast(source, tf.int32)
    batch = tf.shape(source)[0]
    model.ensure_built()
    memory = model.encode(source, training=False)
    max_length = tf.cast(max_length, tf.int32)
    state = model.initial_state(memory, max_length=max_length)

    ids_ta = tf.TensorArray(tf.int32, size=max_length, element_shape=tf.TensorShape([None]))
    attention_ta = tf.TensorArray(tf.float32, size=max_length, element_shape=tf.TensorShape([None, None]))
    token = tf.fill([batch], tf.constant(bos_id, tf.int32))
    finished = tf.zeros([batch], tf.bool)
    lengths = tf.zeros([batch], tf.int32)

    def cond(step, token, state, finished, lengths, ids_ta, attention_ta):
        return tf.logical_and(step < max_length, tf.logical_not(tf.reduce_all(finished)))

    def body(step, token, state, finished, lengths, ids_ta, attention_ta):
        logits, new_state, attention = model.decode_step(token, state, memory, training=False)
        next_token = tf.argmax(logits, axis=-1, output_type=tf.int32)
        next_token = tf.where(finished, tf.constant(pad_id, tf.int32), next_token)
        attention = tf.where(finished[:, None], tf.zeros_like(attention), attention)
        lengths = lengths + tf.cast(tf.logical_not(finished), tf.int32)
        finished = tf.logical_or(finished, tf.equal(next_token, eos_id))
        ids_ta = ids_ta.write(step, next_token)
        attention_ta = attention_ta.write(step, tf.cast(attention, tf.float32))
        new_state = tf.nest.map_structure(lambda n, o: tf.reshape(n, tf.shape(o)), new_state, state)
        return step + 1, next_token, new_state, finished, lengths, ids_ta, attention_ta

    step, _, _, _, lengths, ids_ta, attention_ta = tf.while_loop(
        cond, body, (tf.constant(0), token, state, finished, lengths, ids_ta, attention_ta))
    ids = tf.transpose(ids_ta.gather(tf.range(step)))  # [B, T]
    attention = tf.transpose(attention_ta.gather(tf.range(step)), (1, 0, 2))  # [B, T, Ts]
    ids = tf.reshape(ids, [batch, step])
    attention = tf.reshape(attention, [batch, step, tf.shape(source)[1]])
    return ids, attention, lengths
