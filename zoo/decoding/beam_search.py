"""Batched beam search in one ``tf.while_loop``, with GNMT length and coverage penalties.

Works for every ``Seq2SeqModel`` through ``encode`` / ``initial_state`` / ``decode_step``;
no custom ops, so it runs inside a SavedModel.
"""

import tensorflow as tf

from zoo.tokens import BOS_ID, EOS_ID, PAD_ID

NEG = -1e9


def length_penalty(length, alpha):
    """GNMT: ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (Wu et al. 2016, eq. 14)."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def coverage_penalty(coverage, source_mask, beta):
    """GNMT: ``cp(X; Y) = beta * sum_i log(min(sum_j p_ij, 1))`` over real source positions."""
    clipped = tf.math.log(tf.clip_by_value(coverage, 1e-10, 1.0))
    return beta * tf.reduce_sum(tf.where(source_mask, clipped, 0.0), axis=-1)


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


def _gather_beams(tensor, indices):
    """``tensor [B, K, ...]``, ``indices [B, K']`` -> ``[B, K', ...]``."""
    return tf.gather(tensor, indices, batch_dims=1)


def beam_search(model, source, max_length, beam_size=4, alpha=0.0, beta=0.0, nbest=True,
                bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID):
    """Beam search over ``source [B, Ts]`` (int, 0 = padding).

    At each step the ``2K`` best continuations of the ``K`` live hypotheses are ranked by
    log-probability; an ``<eos>`` among the first ``K`` of them finishes a hypothesis (scored
    ``log p / lp(|Y|) + cp``), the best ``K`` others stay alive. Search stops after
    ``max_length`` steps or when no live hypothesis can beat the K-th finished one. With
    ``beam_size=1`` and ``alpha=beta=0`` this is exactly greedy decoding. Hypotheses that
    never produced ``<eos>`` compete, scored at their length, when fewer than K finished.

    ``nbest=False``: only the best hypothesis is wanted (``decode``, a SavedModel's ``translate``),
    so the search stops once no live hypothesis can beat each sentence's best finished one (a live
    score only falls as it grows, and ``lp`` and ``cp`` only lower it further), not its K-th: the
    same best hypothesis, fewer steps. Beam-4 over 256 dates test sentences (max_length 14), models
    trained 3 epochs: ``bahdanau`` 14 -> 11 steps, 195.7 -> 158.7 ms; ``transformer`` 12 -> 11 steps,
    138.4 -> 128.9 ms (greedy: 69.4 and 56.7 ms; docs/performance.md).

    Returns a dict:
        ``ids [B, T]``, ``attention [B, T, Ts]``, ``lengths [B]``, ``score [B]`` of the best
        hypothesis; with ``nbest``, also ``nbest_ids [B, K, T]``, ``nbest_lengths [B, K]``,
        ``nbest_scores [B, K]`` (sorted, best first) and ``logprob [B, K]``, the model
        log-probability of each n-best entry.
    """
    source = tf.cast(source, tf.int32)
    # Static sizes where the source has them: a traced batch of one must not turn into an unknown
    # size that broadcasts against the loop's [1, ...] tensors (tf.while_loop refuses the change).
    batch, src_len = [size if size is not None else tf.shape(source)[axis]
                      for axis, size in enumerate(source.shape.as_list())]
    k = int(beam_size)
    if k < 1:
        raise ValueError(f"decoding.beam_size must be >= 1. Received: beam_size={beam_size}")
    max_length = tf.cast(max_length, tf.int32)
    alpha_value, beta_value = alpha, beta
    alpha = tf.constant(float(alpha), tf.float32)
    beta = tf.constant(float(beta), tf.float32)
    model.ensure_built()
    sentences = model.encode(source, training=False)  # [B, ...]
    rows = tf.repeat(tf.range(batch), k)  # [B*K]: each row K times; one gather per tensor below

    def repeat(structure):
        return tf.nest.map_structure(lambda x: tf.gather(x, rows), structure)

    # What the step reads for K hypotheses per sentence: the memory repeated K times, or (models that
    # group hypotheses) each sentence once, its K rows attending as its K queries.
    memory = model.hypotheses_memory(sentences, k)
    state = repeat(model.initial_state(sentences, max_length=max_length))  # [B*K, ...]
    source_mask = tf.repeat(tf.not_equal(source, pad_id)[:, None, :], k, axis=1)  # [B, K, Ts]

    positions = tf.range(max_length)
    alive_seq = tf.zeros([batch, k, max_length], tf.int32)
    # A model without attention (``has_attention = False``: all-zero rows) has nothing to carry: its
    # n-best attention is zeros, made at the end; the loop moves no [B, K, T, Ts] tensors.
    track = bool(getattr(model, "has_attention", True)) or float(beta_value) != 0.0
    width = src_len if track else 0
    alive_attn = tf.zeros([batch, k, max_length, width], tf.float32)
    alive_cov = tf.zeros([batch, k, src_len], tf.float32)
    alive_logp = tf.tile(tf.concat([[0.0], tf.fill([k - 1], NEG)], 0)[None, :], [batch, 1])
    fin_seq = tf.zeros([batch, k, max_length], tf.int32)
    fin_attn = tf.zeros([batch, k, max_length, width], tf.float32)
    fin_score = tf.fill([batch, k], NEG)
    fin_logp = tf.fill([batch, k], NEG)
    fin_len = tf.zeros([batch, k], tf.int32)
    token = tf.fill([batch * k], tf.constant(bos_id, tf.int32))
    rank = tf.range(2 * k)[None, :]

    # With alpha = 0 (beta = 0) the length (coverage) penalty is exactly 1 (0): its ops, and the
    # coverage of every hypothesis, are left out of the loop (the per-step work of a small model).
    use_length, use_coverage = float(alpha_value) != 0.0, float(beta_value) != 0.0

    def penalised(logp, length, coverage, mask):
        if use_length:
            logp = logp / length_penalty(length, alpha)
        if use_coverage:
            logp = logp + coverage_penalty(coverage, mask, beta)
        return logp

    def cond(step, token, state, alive_seq, alive_logp, alive_attn, fin_score, *rest):
        best_possible = tf.reduce_max(alive_logp, axis=1)
        if use_length:
            best_possible = best_possible / length_penalty(max_length, alpha)
        done = tf.reduce_all(fin_score[:, -1 if nbest else 0] >= best_possible)
        return tf.logical_and(step < max_length, tf.logical_not(done))

    def body(step, token, state, *rest):
        return advance(step, state, *model.decode_step(token, state, memory, training=False), *rest)

    def first_step(step, token, state, *rest):
        """Step 0: the K hypotheses of a sentence are one (``<bos>``; all but the first score NEG), so
        the model steps once per sentence and the result is repeated K times, where ``body`` would
        run K identical rows. The same results; beam-4 over 64 sentences at 20 steps (base size),
        old and new in one process: seq2seq 187.7 -> 183.8 ms, luong 206.4 -> 199.5, bahdanau 310.6 ->
        299.9, transformer 408.3 -> 390.7 (at d2l's sizes, 9 steps, the same within noise)."""
        start = model.initial_state(sentences, max_length=max_length)
        logits, new_state, attention = model.decode_step(token[::k], start, sentences, training=False)
        return advance(step, state, repeat(logits), repeat(new_state), repeat(attention), *rest)

    def advance(step, state, logits, new_state, attention, alive_seq, alive_logp, alive_attn, fin_score, alive_cov,
                fin_seq, fin_attn, fin_logp, fin_len):
        logits = tf.cast(logits, tf.float32)
        attention = tf.reshape(tf.cast(attention, tf.float32), [batch, k, src_len])[:, :, :width]
        # The 2K best continuations over all K * V (hypothesis score + log-probability): one ranking
        # of the K V values per sentence (``best_continuations``: slice maxima where V is large).
        # Ranking each hypothesis' 2K best tokens first and normalising only those took a top-k over
        # [B K, V], a second over [B, K 2K] and a log-sum-exp of four ops a step: small seq2seq,
        # beam-4 over 64 sentences for 9 steps, 6.9-7.2 -> 6.2-6.6 ms; base the same within the noise.
        vocab = tf.shape(logits)[-1] if logits.shape[-1] is None else int(logits.shape[-1])
        cand_logp, cand_index = best_continuations(logits, alive_logp, 2 * k)  # [B, 2K]
        parent, cand_token = cand_index // vocab, cand_index % vocab
        at_step = tf.equal(positions, step)[None, None, :]
        cand_seq = tf.where(at_step, cand_token[:, :, None], _gather_beams(alive_seq, parent))
        if track:
            cand_attn_step = _gather_beams(attention, parent)
            cand_attn = tf.where(at_step[..., None], cand_attn_step[:, :, None, :], _gather_beams(alive_attn, parent))
        else:
            cand_attn = tf.zeros([batch, 2 * k, max_length, 0], tf.float32)
        cand_cov = _gather_beams(alive_cov, parent) + cand_attn_step if use_coverage else alive_cov
        is_eos = tf.equal(cand_token, eos_id)

        # Live hypotheses: the best K candidates that did not end.
        live_logp, live_index = tf.math.top_k(tf.where(is_eos, NEG, cand_logp), k=k)
        new_alive_seq = _gather_beams(cand_seq, live_index)
        new_alive_attn = _gather_beams(cand_attn, live_index) if track else alive_attn
        new_alive_cov = _gather_beams(cand_cov, live_index) if use_coverage else alive_cov
        flat_parent = tf.reshape(_gather_beams(parent, live_index) + tf.range(batch)[:, None] * k, [-1])
        new_state = tf.nest.map_structure(lambda s: tf.gather(s, flat_parent), new_state)
        new_state = tf.nest.map_structure(lambda n, o: tf.reshape(n, tf.shape(o)), new_state, state)
        next_token = tf.reshape(_gather_beams(cand_token, live_index), [-1])

        # Finished hypotheses: an <eos> ranked among the first K candidates. Without one, the
        # finished set stays as it is (top-k of it and 2K NEG scores is itself: it is sorted, and
        # ties go to the lower index), so its update runs only at steps where something finishes.
        finishing = tf.logical_and(is_eos, rank < k)
        length = step + 1

        def finish():
            mask = _gather_beams(source_mask, parent) if use_coverage else None
            score = tf.where(finishing, penalised(cand_logp, length, cand_cov, mask), NEG)
            all_score = tf.concat([fin_score, score], axis=1)
            new_fin_score, fin_index = tf.math.top_k(all_score, k=k)
            return (new_fin_score,
                    _gather_beams(tf.concat([fin_seq, cand_seq], 1), fin_index),
                    _gather_beams(tf.concat([fin_attn, cand_attn], 1), fin_index) if track else fin_attn,
                    _gather_beams(tf.concat([fin_logp, tf.where(finishing, cand_logp, NEG)], 1), fin_index),
                    _gather_beams(tf.concat([fin_len, tf.fill([batch, 2 * k], length)], 1), fin_index))

        new_fin_score, new_fin_seq, new_fin_attn, new_fin_logp, new_fin_len = tf.cond(
            tf.reduce_any(finishing), finish, lambda: (fin_score, fin_seq, fin_attn, fin_logp, fin_len))
        return (step + 1, next_token, new_state, new_alive_seq, live_logp, new_alive_attn, new_fin_score,
                new_alive_cov, new_fin_seq, new_fin_attn, new_fin_logp, new_fin_len)

    loop_vars = (tf.constant(0), token, state, alive_seq, alive_logp, alive_attn, fin_score, alive_cov,
                 fin_seq, fin_attn, fin_logp, fin_len)
    loop_vars = tf.cond(cond(*loop_vars), lambda: first_step(*loop_vars), lambda: loop_vars)  # the loop's own test
    (steps, _, _, alive_seq, alive_logp, alive_attn, fin_score, alive_cov, fin_seq, fin_attn, fin_logp,
     fin_len) = tf.while_loop(cond, body, loop_vars)

    # Live hypotheses that never ended compete where fewer than K finished.
    alive_score = penalised(alive_logp, steps, alive_cov, source_mask)
    missing = fin_score <= NEG / 2
    alive_score = tf.where(tf.reduce_any(missing, axis=1, keepdims=True), alive_score, NEG)
    alive_score = tf.where(alive_logp <= NEG / 2, NEG, alive_score)
    all_score = tf.concat([fin_score, alive_score], 1)
    scores, index = tf.math.top_k(all_score, k=k)
    nbest_ids = _gather_beams(tf.concat([fin_seq, alive_seq], 1), index)[:, :, :steps]
    if track:
        nbest_attn = _gather_beams(tf.concat([fin_attn, alive_attn], 1), index)[:, :, :steps]
    else:
        nbest_attn = tf.zeros([batch, k, steps, src_len], tf.float32)
    nbest_len = _gather_beams(tf.concat([fin_len, tf.fill([batch, k], steps)], 1), index)
    nbest_logp = _gather_beams(tf.concat([fin_logp, alive_logp], 1), index)
    best = {"ids": nbest_ids[:, 0], "attention": nbest_attn[:, 0], "lengths": nbest_len[:, 0], "score": scores[:, 0]}
    if not nbest:  # the other entries may not be the K best: the search stopped before they were
        return best
    return {**best, "nbest_ids": nbest_ids, "nbest_lengths": nbest_len, "nbest_scores": scores, "logprob": nbest_logp}
