"""How sharp attention is: mean entropy, mean maximum weight and the share of exactly-zero weights
of the rows of real output tokens."""

from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np


def attention_statistics(attention: Sequence[np.ndarray], target_tokens: Sequence[Sequence], source_tokens: Sequence[Sequence]) -> Dict[str, float]:
    """Mean entropy (nats), mean maximum weight and share of exactly-zero weights of the attention
    rows of real output tokens, over their real source tokens.

    A sharp alignment has low entropy and a max weight near 1; uniform attention over n
    source tokens has entropy ``log n``. Entropy takes ``0 log 0 = 0``, so the exact zeros of a
    sparse normaliser (``normalizer=sparsemax`` or ``entmax15``) count as they should: a row
    spread evenly over 2 of 10 sources has entropy ``log 2``. ``attention_zero_share`` is the
    fraction of those weights that are exactly 0: 0 under softmax (unless it underflows), the
    sparsity under a sparse normaliser.
    """
    entropies: List[float] = []
    maxima: List[float] = []
    zeros: List[float] = []
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
            zeros.append(float(np.mean(row == 0)))
    if not entropies:
        return {"attention_entropy": 0.0, "attention_max_weight": 0.0, "attention_zero_share": 0.0}
    return {"attention_entropy": float(np.mean(entropies)), "attention_max_weight": float(np.mean(maxima)),
            "attention_zero_share": float(np.mean(zeros))}
