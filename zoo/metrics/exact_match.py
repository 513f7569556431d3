"""Exact match: the share of hypotheses equal to their reference, character for character."""

from __future__ import annotations

from typing import Sequence

from zoo.metrics.metric import register


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        return 0.0
    return sum(h == r for h, r in zip(hypotheses, references)) / len(references)


@register("exact_match", scale=1, higher_is_better=True, label="exact match", by_length=True)
def score(hypotheses, references, **inputs):
    return exact_match(hypotheses, references)
