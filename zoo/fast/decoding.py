"""Faster rankings and filters for the searches of ``zoo.decoding``, each equal to its reference.

- ``top_k_rows`` (replaces ``zoo.decoding.sampling.top_k_rows``): the ``k`` largest of wide rows
  through the maxima of slices of each row (top-k sampling's filter; the narrow sums of beam search).
- ``best_continuations`` (replaces ``zoo.decoding.beam_search.best_continuations``): beam search's
  ranking of the ``K V`` continuations without writing out the log-softmax over wide vocabularies.
- ``nucleus`` (replaces ``zoo.decoding.sampling.nucleus``): the top-p cutoff of wide rows from
  weighted histograms of the logits' bits, without a sort.

TensorFlow's CPU ``TopKV2`` (``tf.math.top_k``, and ``tf.sort``, which runs on it) costs about 2 ns
a value, so over 8,000-word rows the ranking and the sort dominate a decoding step; the three
replacements read the wide rows with cheap reductions and rank only what can win. None of them has
a gradient of its own (decoding is forward only), so they stay in exported SavedModels too.
Equal to the reference in values and indices (ties to the lower index): ``tests/fast/test_decoding.py``.
Measurements: ``docs/performance.md`` (2026-11-26 entries).
"""

import tensorflow as tf

from zoo import kernels
from zoo.decoding import sampling


def slice_width(width, k):
    """The slice width ``top_k_rows`` takes for rows of ``width`` values and ``k`` best, or ``None``
    (plain ``top_k``): rows of at least 2,048 values, in slices of the largest power of two from 8
    to 64 up to ``sqrt(width / 4)`` that leaves at least ``max(16, 4 k)`` slices. Measured (``[64,
    W]`` rows in a loop, k = 8; best of slices of 4 to 128): W = 1.6-3.2 K best at 16-32, 8,000 at
    32-64, and k = 40 at 8,000 at 16-32. Below 2,048 values the slices' ten small ops cost more
    than they save inside a decoding loop: beam-4's sums over d2l's 201 words (``[64, 804]``), 126
    against ``top_k``'s 152 us alone, made small beam-4 searches 0.3-0.6 ms slower (80 rounds)."""
    if width < 2048:
        return None
    chunk = 64
    while chunk > 8 and (chunk * chunk * 4 > width or width < max(16, 4 * k) * chunk):
        chunk //= 2
    return chunk if width >= max(16, 4 * k) * chunk else None


@kernels.replaces("zoo.decoding.sampling.top_k_rows")
def top_k_rows(values, k):
    """``tf.math.top_k(values [R, V], k)`` (values and indices, ties to the lower index) through the
    maxima of slices of each row, ``slice_width`` wide.

    Each of a row's ``k`` largest values lies in one of the ``k`` slices with the largest maxima (a
    slice ranked lower has ``k`` slices above it, each holding a larger value), so ``top_k`` runs
    over ``k * chunk`` gathered values instead of ``V``: TensorFlow's CPU ``TopKV2`` costs about
    2 ns a value, a ``reduce_max`` pass far less. Measured: ``[256, 8000]``, ``k = 8`` about 10 ->
    under 1 ms; ``[64, 8000]``, ``k = 40`` (top-k sampling, where fixed 64-wide slices left it to
    ``top_k``) 936 -> 417 us a step, base-size sampling with ``top_k=40`` over 64 sentences, 20
    steps: luong 98.8 -> 90.1 ms, transformer 178.2 -> 169.0 (2026-11-26). Narrow rows (static
    width; ``slice_width``) use ``top_k`` directly.
    """
    width = values.shape[-1]
    if width is None or not isinstance(k, int):
        return tf.math.top_k(values, k=k)
    chunk = slice_width(width, k)
    if chunk is None:
        return tf.math.top_k(values, k=k)
    slices = -(-width // chunk)
    if slices * chunk != width:  # the last slice padded with -inf: never above a real value
        values = tf.pad(values, [[0, 0], [0, slices * chunk - width]], constant_values=float("-inf"))
    blocks = tf.reshape(values, [-1, slices, chunk])
    _, best = tf.math.top_k(tf.reduce_max(blocks, axis=-1), k=k)
    best = tf.sort(best, axis=-1)  # in index order: ties among the gathered values go to the lower index
    top, where = tf.math.top_k(tf.reshape(tf.gather(blocks, best, batch_dims=1), [-1, k * chunk]), k=k)
    return top, tf.gather(best, where // chunk, batch_dims=1) * chunk + where % chunk


@kernels.replaces("zoo.decoding.beam_search.best_continuations")
def best_continuations(logits, scores, n, chunk=64):
    """The ``n`` best of ``scores[b, h] + log_softmax(logits)[b h, v]`` over each sentence's ``K V``
    continuations (``logits [B K, V]``, ``scores [B, K]``): ``(values [B, n], indices [B, n])``, an
    index ``h V + v``, ties to the lower index, as ``top_k`` of the ``[B, K V]`` sums would give.

    Where ``V`` is wide (static, >= ``16 * chunk``), neither the log-softmax nor
    the sums are written out: within a hypothesis the order of its continuations is that of its
    logits, so the ``n`` best lie in the ``n`` ``chunk``-wide slices of logits whose maxima, each
    plus its hypothesis' ``score - logsumexp``, rank highest. The log-normaliser comes from one
    ``Softmax`` (a oneDNN primitive on CPU) read at each row's largest logit, ``max - log p_max``
    (``p_max >= 1 / V``: no underflow), as the training loss takes it. Measured at ``[256, 8000]``,
    ``n = 8`` (base size, beam 4): the ``LogSoftmax``, the ``[64, 32000]`` sums and ``top_k_rows``
    2.2 ms, this 1.4 ms. Narrower vocabularies rank the written-out sums (``top_k_rows``).

    The first ranking over ``K V`` values per sentence instead of a top-k per hypothesis then one
    over ``K 2K``: the small seq2seq's beam-4 over 64 sentences for 9 steps, 6.9-7.2 -> 6.2-6.6 ms.
    """
    width = logits.shape[-1]
    k = scores.shape[-1]
    if width is None or k is None or width < 16 * chunk:
        batch = tf.shape(scores)[0]
        vocab = tf.shape(logits)[-1] if width is None else width
        total = tf.reshape(scores[:, :, None] + tf.reshape(tf.nn.log_softmax(logits), [batch, -1, vocab]), [batch, -1])
        return top_k_rows(total, n)
    slices = -(-width // chunk)
    padded = logits
    if slices * chunk != width:  # the last slice padded with -inf: never above a real logit
        padded = tf.pad(logits, [[0, 0], [0, slices * chunk - width]], constant_values=float("-inf"))
    blocks = tf.reshape(padded, [-1, slices, chunk])  # [B K, S, chunk]
    maxima = tf.reduce_max(blocks, axis=-1)  # [B K, S]
    top_slice = tf.argmax(maxima, axis=-1, output_type=tf.int32)  # where each row's largest logit lies
    largest = tf.gather(maxima, top_slice, batch_dims=1)
    at = top_slice * chunk + tf.argmax(tf.gather(blocks, top_slice, batch_dims=1), axis=-1, output_type=tf.int32)
    p_max = tf.gather(tf.nn.softmax(logits), at, batch_dims=1)
    # The sums in float64, where the sum of two float32 values is exact: two words of one hypothesis
    # keep their logits' order (in float32, logits 3e-7 apart plus a score of -7 round to one value),
    # so beam search of size 1 stays greedy decoding exactly. They are [B K, S] and [B, n chunk] values.
    offset = tf.cast(tf.reshape(scores, [-1]) - (largest - tf.math.log(p_max)), tf.float64)  # score - lse
    ranked = tf.reshape(tf.cast(maxima, tf.float64) + offset[:, None], [-1, k * slices])  # slices' best, [B, K S]
    _, best = tf.math.top_k(ranked, k=n)
    best = tf.sort(best, axis=-1)  # in index order: ties among the gathered values go to the lower index
    gathered = (tf.cast(tf.gather(tf.reshape(blocks, [-1, k * slices, chunk]), best, batch_dims=1), tf.float64)
                + tf.gather(tf.reshape(offset, [-1, k]), best // slices, batch_dims=1)[:, :, None])
    values, where = tf.math.top_k(tf.reshape(gathered, [-1, n * chunk]), k=n)
    slot = tf.gather(best, where // chunk, batch_dims=1)  # h S + s
    return tf.cast(values, tf.float32), (slot // slices) * width + (slot % slices) * chunk + where % chunk


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


@kernels.replaces("zoo.decoding.sampling.nucleus")
def nucleus(logits, top_p):
    """bool ``[B, V]``: the tokens of the nucleus (top-p) of each row of ``logits [B, V]``, the set the
    reference's sort and exclusive cumulative sum give: a token is kept when the probability of the
    tokens ranked strictly above it is under ``top_p`` (so the most likely token always, and tokens
    tied at the cutoff alike).

    Without the sort: the logits as unsigned integers in float order (``key``), the cutoff ``T`` is
    the largest integer with at least ``top_p`` of the probability at keys ``>= T``, found eleven
    bits at a time from the top: a weighted histogram per row (``DenseBincount``) of the next digit
    of the keys that share the digits found so far, its suffix sums, the largest digit keeping
    ``top_p`` at or above. The masses in float64. A token is kept where ``key >= T``. TensorFlow's CPU
    sort of ``[64, 8000]`` rows (a ``TopKV2`` of every value) took 18 ms of the 21 ms of a top-p
    filter; this takes 9.5. Its three histograms cost more than a sort of narrow rows (``[64, W]``
    in a loop: W = 201 1.8 against 0.36 ms, 1,000 2.8 against 2.4; 2,048 3.8 against 5.0), so rows
    under 2,048 values (static width) take the reference's sort.
    """
    logits = tf.cast(logits, tf.float32)
    width = logits.shape[-1]
    if width is None or width < 2048:
        return sampling.nucleus.reference(logits, top_p)
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
