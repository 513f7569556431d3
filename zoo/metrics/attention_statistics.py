"""How sharp attention is: mean entropy and mean maximum weight of the rows of real output tokens."""

from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np


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
