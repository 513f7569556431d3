"""Ancestral sampling with temperature, top-k and nucleus (top-p) filtering.

At each step the next token is drawn from the model's distribution ``p(v | y_<t, x)``, sharpened or
flattened by a temperature ``T`` (``softmax(z / T)``) and cut to its most likely tokens: the ``k``
most likely (top-k, Fan et al. 2018) and/or the smallest set holding probability ``p`` (the
nucleus, Holtzman et al. 2020). The cut keeps the sample away from the long tail of unlikely
tokens, whose summed probability is large enough to derail a sentence.

References:
    Fan, Lewis and Dauphin 2018, "Hierarchical Neural Story Generation", sec. 5.4 (top-k sampling).
    Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration", sec. 3.1, eq. 2-3
    (nucleus sampling).
"""

import tensorflow as tf

from zoo import kernels
from zoo.decoding.greedy import decode_loop
from zoo.tokens import BOS_ID, EOS_ID, PAD_ID


@kernels.replaceable
def top_k_rows(values, k):
    """``(values [R, k], indices [R, k])``: the ``k`` largest of each row of ``values [R, V]``, largest
    first, equal values to the lower index (``tf.math.top_k``)."""
    return tf.math.top_k(values, k=k)


@kernels.replaceable
def nucleus(logits, top_p):
    """bool ``[B, V]``: the tokens of the nucleus ``V^(p)`` of each row of ``logits [B, V]``, the
    smallest set of most likely tokens with ``sum_{v in V^(p)} p(v) >= p`` (Holtzman et al. 2020,
    eq. 2).

    By its definition: sort the probabilities, most likely first; a token is kept while the
    probability of the tokens ranked strictly above it is still under ``p`` (an exclusive cumulative
    sum), so the most likely token always is. Every token as likely as the least likely kept one is
    kept too: equal logits are cut alike, whatever order the sort gave them.
    """
    logits = tf.cast(logits, tf.float32)
    order = tf.argsort(logits, axis=-1, direction="DESCENDING")  # most likely first
    ranked = tf.gather(logits, order, batch_dims=1)
    probs = tf.gather(tf.nn.softmax(logits), order, batch_dims=1)
    # The probability ranked higher, summed in float64: over thousands of tokens a float32 sum drifts
    # by more than the gap between two neighbouring cut points, and the cut would move a token.
    above = tf.cumsum(tf.cast(probs, tf.float64), axis=-1, exclusive=True)
    # The least likely logit kept; the most likely stands in for the tokens cut (so it is always kept).
    cutoff = tf.reduce_min(tf.where(above < top_p, ranked, ranked[:, :1]), axis=-1, keepdims=True)
    return logits >= cutoff


def filter_logits(logits, top_k=0, top_p=1.0):
    """Keeps the ``top_k`` most likely tokens (0 = all; ``top_k_rows``) and, of those, the nucleus
    of probability ``top_p`` (1.0 = all; ``nucleus``); the rest get ``-inf``: probability 0 and the
    others renormalised, ``p'(v) = p(v) / sum_{v' kept} p(v')`` (Holtzman et al. 2020, eq. 3)."""
    neg_inf = tf.constant(float("-inf"), logits.dtype)
    if top_k and top_k > 0:
        width = logits.shape[-1]
        k = min(int(top_k), width) if width is not None else tf.minimum(tf.constant(top_k, tf.int32), tf.shape(logits)[-1])
        kth = top_k_rows(logits, k)[0][:, -1:]  # the k-th largest logit of each row
        logits = tf.where(logits < kth, neg_inf, logits)
    if top_p is not None and top_p < 1.0:
        logits = tf.where(nucleus(logits, top_p), logits, neg_inf)
    return logits


def sample_decode(model, source, max_length, temperature=1.0, top_k=0, top_p=1.0, seed=0,
                  bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID):
    """Ancestral sampling of ``source [B, Ts]``: ``y_t ~ softmax(filter(z_t / T))``, each token drawn
    from the model's distribution at temperature ``T = temperature`` (below 1 sharper, towards greedy;
    above 1 flatter), cut by ``filter_logits`` (``top_k``, ``top_p``).

    Reproducible: the same ``seed`` gives the same samples (stateless random ops, seeded by
    ``(seed, step)``). Returns what ``greedy_decode`` returns.
    """
    if temperature <= 0:
        raise ValueError(f"decoding.temperature must be > 0 (use strategy=greedy for argmax). "
                         f"Received: temperature={temperature}")

    def choose(logits, step):
        filtered = filter_logits(logits / temperature, top_k=top_k, top_p=top_p)
        return tf.cast(tf.random.stateless_categorical(filtered, 1, seed=tf.stack([tf.cast(seed, tf.int32), step]),
                                                       dtype=tf.int32)[:, 0], tf.int32)

    ids, attention, lengths, _ = decode_loop(model, source, max_length, choose, bos_id, eos_id, pad_id, scores=False)
    return ids, attention, lengths
