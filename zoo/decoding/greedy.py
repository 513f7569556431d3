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


def _suffix_sums(mass, block=64):
    """``sum_{j >= i} mass[:, j]`` of ``mass [B, N]`` (float64, ``N`` a multiple of ``block``) by
    two small products with triangular ones, where TensorFlow's ``Cumsum`` scans at about 4 ns a value."""
    width = mass.shape[-1]
    within = tf.linalg.band_part(tf.ones([block, block], mass.dtype), -1, 0)  # [j, i] = 1 where j >= i
    blocks = tf.reshape(mass, [-1, width // block, block])
    later = tf.linalg.band_part(tf.ones([width // block] * 2, mass.dtype), -1, 0) - tf.eye(width // block, dtype=mass.dtype)
    suffix = tf.reshape(tf.matmul(tf.reshape(blocks, [-1, block]), within), tf.shape(blocks))
    return tf.reshape(suffix + tf.matmul(tf.reduce_sum(blocks, -1), later)[:, :, None], tf.shape(mass))


# (shift, bits) of each digit of the 32-bit keys, most significant first: three histograms of at most 2,048 bins
_DIGITS = ((21, 11), (10, 11), (0, 10))


def nucleus(logits, top_p):
    """bool ``[B, V]``: the tokens of the nucleus (top-p) of each row of ``logits [B, V]``: a token is
    kept when the probability of the tokens ranked strictly above it is under ``top_p`` (so the most
    likely token always, and tokens tied at the cutoff alike), the set a sort and an exclusive
    cumulative sum of the sorted probabilities give.

    Without the sort: the logits as unsigned integers in float order (``key``), the cutoff ``T`` is
    the largest integer with at least ``top_p`` of the probability at keys ``>= T``, found eleven
    bits at a time from the top: a weighted histogram per row (``DenseBincount``) of the next digit
    of the keys that share the digits found so far, its suffix sums, the largest digit keeping
    ``top_p`` at or above. The masses in float64. A token is kept where ``key >= T``. TensorFlow's CPU
    sort of ``[64, 8000]`` rows (a ``TopKV2`` of every value) took 18 ms of the 21 ms of a top-p
    filter; this takes 9.5. Its three histograms cost more than a sort of narrow rows (``[64, W]``
    in a loop: W = 201 1.8 against 0.36 ms, 1,000 2.8 against 2.4; 2,048 3.8 against 5.0), so rows
    under 2,048 values (static width) are sorted, their cumulative sum in float64 as well.
    """
    logits = tf.cast(logits, tf.float32)
    width = logits.shape[-1]
    if width is None or width < 2048:
        ranked = tf.sort(logits, axis=-1, direction="DESCENDING")
        before = tf.cumsum(tf.cast(tf.nn.softmax(ranked), tf.float64), axis=-1, exclusive=True)  # mass ranked higher
        cutoff = tf.reduce_min(tf.where(before < top_p, ranked, ranked[:, :1]), axis=-1, keepdims=True)
        return logits >= cutoff
    probs = tf.cast(tf.nn.softmax(logits), tf.float64)
    logits = tf.where(tf.equal(logits, 0.0), tf.zeros_like(logits), logits)  # -0.0 and 0.0: one value, as they compare
    bits = tf.bitcast(logits, tf.int32)
    # non-negative floats: the top bit set; negative ones: every bit flipped (a larger magnitude, a smaller key)
    key = tf.bitcast(tf.where(bits >= 0, tf.bitwise.bitwise_xor(bits, tf.constant(-2 ** 31, tf.int32)),
                              tf.bitwise.invert(bits)), tf.uint32)
    batch = tf.shape(logits)[0]
    cutoff = tf.zeros([batch, 1], tf.uint32)  # the digits found so far
    above = tf.zeros([batch, 1], tf.float64)  # the probability at keys above every key with those digits
    for level, (shift, digit_bits) in enumerate(_DIGITS):
        size = 2 ** digit_bits
        digit = tf.cast(tf.bitwise.right_shift(key, tf.constant(shift, tf.uint32)), tf.int32)
        if shift + digit_bits < 32:
            digit = tf.bitwise.bitwise_and(digit, size - 1)
        if level:  # keys with other digits above this one go to an extra bin, left out
            same = tf.equal(tf.bitwise.right_shift(key, tf.constant(shift + digit_bits, tf.uint32)), cutoff)
            digit = tf.where(same, digit, size)
        mass = tf.raw_ops.DenseBincount(input=digit, size=size + 1, weights=probs, binary_output=False)[:, :size]
        at_or_above = above + _suffix_sums(mass)  # non-increasing in the digit
        best = tf.maximum(tf.reduce_sum(tf.cast(at_or_above >= top_p, tf.int32), axis=1, keepdims=True) - 1, 0)
        above = tf.gather(tf.concat([at_or_above, above], axis=1), best + 1, batch_dims=1)
        cutoff = cutoff * size + tf.cast(best, tf.uint32)
    return key >= cutoff


def filter_logits(logits, top_k=0, top_p=1.0):
    """Keeps the ``top_k`` most likely tokens (0 = all) and the smallest set whose probability
    reaches ``top_p`` (1.0 = all; ``nucleus``); the rest get -inf."""
    neg_inf = tf.constant(float("-inf"), logits.dtype)
    if top_k and top_k > 0:
        width = logits.shape[-1]
        k = min(int(top_k), width) if width is not None else tf.minimum(tf.constant(top_k, tf.int32), tf.shape(logits)[-1])
        kth = top_k_rows(logits, k)[0][:, -1:]
        logits = tf.where(logits < kth, neg_inf, logits)
    if top_p is not None and top_p < 1.0:
        logits = tf.where(nucleus(logits, top_p), logits, neg_inf)
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
