"""Beam search (Sutskever et al. 2014; Wu et al. 2016, GNMT) in one ``tf.while_loop``, batched.

Works for every ``Seq2SeqModel`` through ``encode`` / ``initial_state`` / ``decode_step``; plain
TensorFlow ops only, so it runs inside a SavedModel.

References:
    Sutskever, Vinyals and Le 2014, "Sequence to Sequence Learning with Neural Networks", sec. 3.2
    (a left-to-right beam search over the decoder's log-probabilities).
    Wu et al. 2016, "Google's Neural Machine Translation System", sec. 7, eq. 14 (the length
    penalty ``lp`` and coverage penalty ``cp``).
"""

import tensorflow as tf

from zoo import kernels
from zoo.tokens import BOS_ID, EOS_ID

NEG = -1e9  # the score of a hypothesis that does not exist (a dead beam, an empty finished slot)


def length_penalty(length, alpha):
    """GNMT: ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (Wu et al. 2016, eq. 14). ``alpha = 0``: no penalty;
    larger ``alpha`` favours longer hypotheses, which a plain sum of log-probabilities penalises."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def coverage_penalty(coverage, source_mask, beta):
    """GNMT: ``cp(X; Y) = beta * sum_i log(min(sum_j p_ij, 1))`` over the real source positions ``i``
    (Wu et al. 2016, eq. 14), ``p_ij`` the attention of target word ``j`` on source word ``i``:
    at most 0, lower for a hypothesis that left source words unattended."""
    clipped = tf.math.log(tf.clip_by_value(coverage, 1e-10, 1.0))
    return beta * tf.reduce_sum(tf.where(source_mask, clipped, 0.0), axis=-1)


@kernels.replaceable
def best_continuations(logits, scores, n):
    """The ``n`` best continuations of each sentence's ``K`` hypotheses: ``(values [B, n], indices
    [B, n])`` of ``top_k`` over the ``K V`` sums ``scores[b, h] + log p(v | y_h)``, ``logits [B K, V]``,
    ``scores [B, K]`` (each hypothesis' log-probability so far). An index is ``h V + v``: hypothesis
    ``h`` continued with word ``v``; equal sums go to the lower index, as ``top_k`` orders them."""
    batch = tf.shape(scores)[0]
    vocab = tf.shape(logits)[-1]
    log_probs = tf.reshape(tf.nn.log_softmax(logits), [batch, -1, vocab])  # [B, K, V]
    totals = tf.reshape(scores[:, :, None] + log_probs, [batch, -1])  # [B, K V]
    return tf.math.top_k(totals, k=n)


def _gather_beams(tensor, indices):
    """``tensor [B, K, ...]``, ``indices [B, K']`` -> ``[B, K', ...]``."""
    return tf.gather(tensor, indices, batch_dims=1)


def beam_search(model, source, max_length, beam_size=4, alpha=0.0, beta=0.0, nbest=True,
                bos_id=BOS_ID, eos_id=EOS_ID):
    """Beam search over ``source [B, Ts]`` (int, 0 = padding): the ``K = beam_size`` most likely
    hypotheses are kept alive, step by step, instead of greedy decoding's one.

    At each step the ``2K`` best continuations of the ``K`` live hypotheses are ranked by their
    log-probability ``log p(y_1..t | x)`` (``best_continuations``). An ``<eos>`` among the first ``K``
    of them finishes a hypothesis, scored ``s(Y, X) = log p(Y | X) / lp(Y) + cp(X; Y)`` (GNMT, Wu
    et al. 2016, eq. 14); the best ``K`` that did not end stay alive. With ``beam_size=1`` and
    ``alpha = beta = 0`` this is exactly greedy decoding. Hypotheses that never produced ``<eos>``
    compete, scored at their length, when fewer than ``K`` finished.

    The search stops after ``max_length`` steps, or earlier once no live hypothesis can still win:
    a live hypothesis' log-probability only falls as it grows, ``lp`` is at most ``lp(max_length)``
    and ``cp`` at most 0, so ``max(live log p) / lp(max_length)`` bounds every score it can reach.

    - ``nbest=True`` (``translate_nbest``, the n-best list): stop once the ``K``-th finished
      hypothesis beats that bound; all ``K`` entries are final.
    - ``nbest=False`` (``decode``, a SavedModel's ``translate``): only the best is wanted, so stop
      once the *best* finished hypothesis beats it: the same best hypothesis, often fewer steps.

    Returns a dict:
        ``ids [B, T]``, ``attention [B, T, Ts]``, ``lengths [B]``, ``score [B]`` of the best
        hypothesis; with ``nbest``, also ``nbest_ids [B, K, T]``, ``nbest_lengths [B, K]``,
        ``nbest_scores [B, K]`` (sorted, best first) and ``logprob [B, K]``, the model
        log-probability of each n-best entry.

    References:
        Sutskever et al. 2014, sec. 3.2; Wu et al. 2016 (GNMT), sec. 7, eq. 14.
    """
    source = tf.cast(source, tf.int32)
    # Static sizes where the source has them: a traced batch of one must not turn into an unknown
    # size that broadcasts against the loop's [1, ...] tensors (tf.while_loop refuses the change).
    batch = source.shape[0] if source.shape[0] is not None else tf.shape(source)[0]
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
    # Ts: the positions attended over, the memory's (an image model's grid cells, not the source's rows)
    attended = tf.cast(sentences["memory_mask"], tf.bool)  # [B, Ts]
    src_len = attended.shape[1] if attended.shape[1] is not None else tf.shape(attended)[1]
    source_mask = tf.repeat(attended[:, None, :], k, axis=1)  # [B, K, Ts]

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

    # Which finished hypothesis must be out of every live one's reach before the search stops:
    # the K-th for the n-best list, the best when the best alone is wanted (see the docstring).
    decisive = -1 if nbest else 0

    def cond(step, token, state, alive_seq, alive_logp, alive_attn, fin_score, *rest):
        reachable = tf.reduce_max(alive_logp, axis=1)  # the best score a live hypothesis can still reach
        if use_length:
            reachable = reachable / length_penalty(max_length, alpha)
        settled = tf.reduce_all(fin_score[:, decisive] >= reachable)
        return tf.logical_and(step < max_length, tf.logical_not(settled))

    def body(step, token, state, *rest):
        return advance(step, state, *model.decode_step(token, state, memory, training=False), *rest)

    def first_step(step, token, state, *rest):
        """Step 0: the K hypotheses of a sentence are one (``<bos>``; all but the first score NEG), so
        the model steps once per sentence and its result is repeated K times, where ``body`` would
        run K identical rows: the same results, a K-th of the work."""
        start = model.initial_state(sentences, max_length=max_length)
        logits, new_state, attention = model.decode_step(token[::k], start, sentences, training=False)
        return advance(step, state, repeat(logits), repeat(new_state), repeat(attention), *rest)

    def advance(step, state, logits, new_state, attention, alive_seq, alive_logp, alive_attn, fin_score, alive_cov,
                fin_seq, fin_attn, fin_logp, fin_len):
        logits = tf.cast(logits, tf.float32)
        attention = tf.reshape(tf.cast(attention, tf.float32), [batch, k, src_len])[:, :, :width]
        # The 2K best continuations over all K V (hypothesis score + log-probability of the word):
        # 2K, so that K remain alive even if K of them end with <eos>.
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
