"""Evidence: how often the most-attended story sentence is a gold supporting sentence.

For story QA (``data=story_qa``): each question has gold supporting sentences; a reader's
``sentence_attention [H, S]`` gives, per hop, a distribution over the story's sentences. The
score is the share of (question, hop) pairs whose most-attended sentence is a supporting one
(``evidence_by_hop`` gives it per hop). It says whether attention looks at the right place,
beside whether the answer is right.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from zoo.metrics.metric import register


def evidence_hits(sentence_attention: Sequence[np.ndarray], supporting: Sequence[Sequence[int]]) -> np.ndarray:
    """``[N, H]`` booleans: hop ``h``'s most-attended sentence of question ``n`` is in ``supporting[n]``.

    ``sentence_attention[n]`` is ``[H, S_n]`` (or ``[S_n]``: one hop); ties go to the first sentence.
    """
    if len(sentence_attention) != len(supporting):
        raise ValueError(f"{len(sentence_attention)} attentions for {len(supporting)} supporting sets")
    rows = []
    for weights, gold in zip(sentence_attention, supporting):
        weights = np.asarray(weights, dtype=np.float64)
        weights = weights[None, :] if weights.ndim == 1 else weights
        rows.append([int(np.argmax(hop)) in set(int(i) for i in gold) for hop in weights])
    return np.asarray(rows, dtype=bool).reshape(len(rows), -1)


def evidence(sentence_attention, supporting) -> float:
    """The share of (question, hop) pairs whose most-attended sentence is gold evidence."""
    hits = evidence_hits(sentence_attention, supporting)
    return float(hits.mean()) if hits.size else 0.0


def evidence_by_hop(sentence_attention, supporting) -> List[float]:
    hits = evidence_hits(sentence_attention, supporting)
    return [float(v) for v in hits.mean(axis=0)] if hits.size else []


@register("evidence", scale=1, higher_is_better=True, label="evidence (top sentence is gold)")
def score(hypotheses, references, sentence_attention=None, supporting=None, **inputs) -> Optional[float]:
    if sentence_attention is None or supporting is None:
        return None  # a translation has no supporting sentences
    return evidence(sentence_attention, supporting)
