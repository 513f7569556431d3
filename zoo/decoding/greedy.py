"""Token-by-token decoding in one ``tf.while_loop``: greedy and sampling. Batched, no Python per step."""

import tensorflow as tf

from zoo.decoding.beam_search import top_k_rows
from zoo.tokens import BOS_ID, EOS_ID, PAD_ID


def _decode_loop(model, source, max_length, choose, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID, scores=True):
    """Runs ``decode_step`` until every sequence produced ``<eos>`` or ``max_length`` steps.

    ``choose(logits [B, V] float32, step) -> tokens [B] int32`` picks the next tokens.
    Returns ``(ids [B, T], attention [B, T, Ts], lengths [B], logprob [B])``: tokens after a
    sequence's ``<eos>`` are ``pad_id`` and their attention rows 0; ``lengths`` count tokens
    up to and including ``<eos>``; ``logprob`` is the model's log-probability of the tokens
    (``logit - logsumexp(logits)`` of each chosen one), zeros with ``scores=False``: a
    while-loop variable is not pruned, so a caller that drops it says so and the loop
    leaves out its pass over the ``[B, V]`` logits.
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
    attention = tf.reshape(tf.transpose(attention_ta.gather(tf.range(step)), (1, 0, 2)),
                           [batch, step, tf.shape(source)[1]])
    return ids, attention, lengths, logprob


def greedy_decode(model, source, max_length, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID):
    """Greedy decoding of ``source [B, Ts]`` (int, 0 = padding): the most likely token at each step.

    Returns:
        ``(ids [B, T] int32, attention [B, T, Ts] float32, lengths [B] int32)``: tokens after
        a sequence's ``<eos>`` are ``pad_id`` and their attention rows are 0; ``lengths``
        count the tokens up to and including ``<eos>``.
    """
    ids, attention, lengths, _ = _decode_loop(
        model, source, max_length, lambda logits, step: tf.argmax(logits, axis=-1, output_type=tf.int32),
        bos_id, eos_id, pad_id, scores=False)
    return ids, attention, lengths


def greedy_decode_with_scores(model, source, max_length, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID):
    """``greedy_decode`` plus the log-probability ``[B]`` of each decoded sequence."""
    return _decode_loop(model, source, max_length,
                        lambda logits, step: tf.argmax(logits, axis=-1, output_type=tf.int32), bos_id, eos_id, pad_id)


def filter_logits(logits, top_k=0, top_p=1.0):
    """Keeps the ``top_k`` most likely tokens (0 = all) and the smallest set whose probability
    reaches ``top_p`` (1.0 = all); the rest get -inf."""
    neg_inf = tf.constant(float("-inf"), logits.dtype)
    if top_k and top_k > 0:
        width = logits.shape[-1]
        k = min(int(top_k), width) if width is not None else tf.minimum(tf.constant(top_k, tf.int32), tf.shape(logits)[-1])
        kth = top_k_rows(logits, k)[0][:, -1:]
        logits = tf.where(logits < kth, neg_inf, logits)
    if top_p is not None and top_p < 1.0:
        sorted_logits = tf.sort(logits, axis=-1, direction="DESCENDING")
        probs = tf.nn.softmax(sorted_logits, axis=-1)
        before = tf.cumsum(probs, axis=-1, exclusive=True)  # mass of the tokens ranked higher
        keep_sorted = before < top_p  # always keeps the most likely token
        cutoff = tf.reduce_min(tf.where(keep_sorted, sorted_logits, tf.reduce_max(sorted_logits, -1, keepdims=True)),
                               axis=-1, keepdims=True)
        logits = tf.where(logits < cutoff, neg_inf, logits)
    return logits


def sample_decode(model, source, max_length, temperature=1.0, top_k=0, top_p=1.0, seed=0,
                  bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID):
    """Ancestral sampling with temperature, top-k and nucleus (top-p) filtering.

    Reproducible: the same ``seed`` gives the same samples (stateless random ops, one seed
    per step). Returns what ``greedy_decode`` returns.
    """
    if temperature <= 0:
        raise ValueError(f"decoding.temperature must be > 0 (use strategy=greedy for argmax). "
                         f"Received: temperature={temperature}")

    def choose(logits, step):
        filtered = filter_logits(logits / temperature, top_k=top_k, top_p=top_p)
        return tf.cast(tf.random.stateless_categorical(filtered, 1, seed=tf.stack([tf.cast(seed, tf.int32), step]),
                                                       dtype=tf.int32)[:, 0], tf.int32)

    ids, attention, lengths, _ = _decode_loop(model, source, max_length, choose, bos_id, eos_id, pad_id, scores=False)
    return ids, attention, lengths
