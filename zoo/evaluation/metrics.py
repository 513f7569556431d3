"""Text metrics: exact match, sacreBLEU BLEU and chrF (with signatures), token accuracy,
length ratio, attention statistics, a paired bootstrap of the BLEU difference, and d2l's
sentence BLEU."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Dict, List, Sequence, Tuple

import numpy as np


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        return 0.0
    return sum(h == r for h, r in zip(hypotheses, references)) / len(references)


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> Tuple[float, str]:
    """Corpus BLEU (sacreBLEU defaults, 0-100) and its signature."""
    import sacrebleu

    metric = sacrebleu.metrics.BLEU()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


D2L_PUNCTUATION = ",.!?;:"  # the word tokenizer's set (zoo.data.tokenizers.PUNCTUATION); d2l's is ,.!?


def d2l_tokens(text: str) -> List[str]:
    """d2l's words: no-break spaces are spaces, lowercased, a space before ``, . ! ? ; :``, split
    on spaces. ``"Va !"``, ``"va!"`` and ``"va !"`` all give ``["va", "!"]``."""
    text = re.sub(r"[\u00a0\u202f]", " ", text).lower()
    return re.sub(f"([{re.escape(D2L_PUNCTUATION)}])", r" \1", text).split()


def d2l_bleu(hypothesis: str, reference: str, k: int = 2) -> float:
    """Sentence BLEU as *Dive into Deep Learning* (r0.17, sec. 9.7) defines it, in [0, 1]:

    ``exp(min(0, 1 - len_label / len_pred)) * prod_{n=1}^{k} p_n^(1 / 2^n)``, where ``p_n`` is the
    number of the hypothesis' n-grams found in the reference (each reference n-gram used at most
    as often as it occurs there) over the hypothesis' n-grams, ``len_pred - n + 1``. Tokens are
    ``d2l_tokens``. n stops at the hypothesis length (a 1-word hypothesis has no bigram; d2l's
    code divides by zero there); an empty hypothesis scores 0. Example: ``"il est riche ."`` vs
    ``"il est calme ."``, k=2: ``(3/4)^(1/2) * (1/3)^(1/4) = 0.658``.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"Received an invalid value for argument `k`, expected a positive integer. Received: k={k!r}")
    pred, label = d2l_tokens(hypothesis), d2l_tokens(reference)
    if not pred:
        return 0.0
    score = math.exp(min(0.0, 1.0 - len(label) / len(pred)))
    for n in range(1, min(k, len(pred)) + 1):
        available = Counter(tuple(label[i:i + n]) for i in range(len(label) - n + 1))
        matches = 0
        for i in range(len(pred) - n + 1):
            gram = tuple(pred[i:i + n])
            if available[gram] > 0:
                available[gram] -= 1
                matches += 1
        score *= (matches / (len(pred) - n + 1)) ** (0.5 ** n)
    return score


def chrf(hypotheses: Sequence[str], references: Sequence[str]) -> Tuple[float, str]:
    """Corpus chrF (sacreBLEU defaults, 0-100) and its signature."""
    import sacrebleu

    metric = sacrebleu.metrics.CHRF()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


def length_ratio(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Hypothesis length / reference length in sacreBLEU's tokens (BLEU's brevity ratio)."""
    import sacrebleu

    score = sacrebleu.metrics.BLEU().corpus_score(list(hypotheses), [list(references)])
    return float(score.sys_len) / max(1, float(score.ref_len))


def token_accuracy(hypothesis_tokens: Sequence[Sequence[str]], reference_tokens: Sequence[Sequence[str]]) -> float:
    """Share of reference tokens matched at the same position by the hypothesis."""
    total = sum(len(r) for r in reference_tokens)
    correct = sum(sum(h == r for h, r in zip(hyp, ref)) for hyp, ref in zip(hypothesis_tokens, reference_tokens))
    return correct / max(1, total)


def attention_statistics(attention: Sequence[np.ndarray], target_tokens: Sequence[Sequence], source_tokens: Sequence[Sequence]) -> Dict[str, float]:
    """Mean entropy (nats) and mean maximum weight of the attention rows of real output tokens.

    A sharp alignment has low entropy and a max weight near 1; uniform attention over n
    source tokens has entropy ``log n``.
    """
    entropies: List[float] = []
    maxima: List[float] = []
    for weights, tgt, src in zip(attention, target_tokens, source_tokens):
        n_out = sum(1 for t in tgt if t not in (b"", ""))
        n_in = sum(1 for t in src if t not in (b"", ""))
        rows = np.asarray(weights, dtype=np.float64)[:n_out, :n_in]
        for row in rows:
            if row.sum() <= 0:
                continue
            p = row / row.sum()
            entropies.append(float(-(p[p > 0] * np.log(p[p > 0])).sum()))
            maxima.append(float(row.max()))
    if not entropies:
        return {"attention_entropy": 0.0, "attention_max_weight": 0.0}
    return {"attention_entropy": float(np.mean(entropies)), "attention_max_weight": float(np.mean(maxima))}


def paired_bootstrap_bleu(hypotheses_a: Sequence[str], hypotheses_b: Sequence[str], references: Sequence[str],
                          samples: int = 1000, seed: int = 0) -> Dict[str, float]:
    """Paired bootstrap (Koehn 2004) of ``BLEU(a) - BLEU(b)`` over resampled test sentences.

    Returns the observed difference, the 95% confidence interval and the share of samples in
    which ``a`` is not better (a one-sided p-value for "a beats b").
    """
    import sacrebleu

    metric = sacrebleu.metrics.BLEU()
    refs = [list(references)]
    stats_a = np.asarray(metric._extract_corpus_statistics(list(hypotheses_a), refs))
    stats_b = np.asarray(metric._extract_corpus_statistics(list(hypotheses_b), refs))
    score = lambda stats: metric._compute_score_from_stats(list(stats.sum(axis=0))).score  # noqa: E731
    observed = score(stats_a) - score(stats_b)
    rng = np.random.default_rng(seed)
    n = len(references)
    diffs = np.empty(samples)
    for i in range(samples):
        idx = rng.integers(0, n, size=n)
        diffs[i] = score(stats_a[idx]) - score(stats_b[idx])
    low, high = np.percentile(diffs, [2.5, 97.5])
    return {"bleu_diff": float(observed), "bleu_diff_ci_low": float(low), "bleu_diff_ci_high": float(high),
            "bleu_diff_p_value": float(np.mean(diffs <= 0))}


def text_metrics(hypotheses: Sequence[str], references: Sequence[str]) -> Tuple[Dict[str, float], Dict[str, str]]:
    """``({"exact_match", "bleu", "chrf", "length_ratio"}, {"bleu_signature", "chrf_signature"})``."""
    b, b_sig = bleu(hypotheses, references)
    c, c_sig = chrf(hypotheses, references)
    return ({"exact_match": exact_match(hypotheses, references), "bleu": b, "chrf": c,
             "length_ratio": length_ratio(hypotheses, references)},
            {"bleu_signature": b_sig, "chrf_signature": c_sig})
