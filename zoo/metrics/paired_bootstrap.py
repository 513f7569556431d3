"""Paired bootstrap (Koehn 2004) of the BLEU difference between two systems on the same sentences."""

from __future__ import annotations

from typing import Dict, Sequence

import numpy as np


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
