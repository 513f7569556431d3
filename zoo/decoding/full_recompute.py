"""Greedy decoding that re-runs the whole decoder on the prefix at every step.

The reference that cached incremental decoding is checked and benchmarked against: same
tokens, ``O(T^2)`` work instead of ``O(T)``.
"""

import tensorflow as tf

from zoo.tokens import BOS_ID, EOS_ID, PAD_ID


def full_recompute_greedy(model, source, max_length, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID):
    """``(ids [B, T], lengths [B])`` by calling ``model((source, prefix))`` for each new token."""
    source = tf.cast(source, tf.int32)
    batch = tf.shape(source)[0]
    model.ensure_built()
    prefix = tf.fill([batch, 1], tf.constant(bos_id, tf.int32))
    finished = tf.zeros([batch], tf.bool)
    lengths = tf.zeros([batch], tf.int32)
    max_length = tf.cast(max_length, tf.int32)

    def cond(step, prefix, finished, lengths):
        return tf.logical_and(step < max_length, tf.logical_not(tf.reduce_all(finished)))

    def body(step, prefix, finished, lengths):
        logits = model((source, prefix), training=False)[:, -1]
        token = tf.argmax(logits, axis=-1, output_type=tf.int32)
        token = tf.where(finished, tf.constant(pad_id, tf.int32), token)
        lengths = lengths + tf.cast(tf.logical_not(finished), tf.int32)
        finished = tf.logical_or(finished, tf.equal(token, eos_id))
        return step + 1, tf.concat([prefix, token[:, None]], axis=1), finished, lengths

    # Only the prefix's length grows; the batch keeps its static size (a recurrent decoder's own loop
    # inside the body is traced with it, and a batch of one left unknown no longer matches it).
    rows = source.shape[0]
    _, prefix, _, lengths = tf.while_loop(
        cond, body, (tf.constant(0), prefix, finished, lengths),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([rows, None]), tf.TensorShape([rows]),
                          tf.TensorShape([rows])))
    return prefix[:, 1:], lengths
