"""Alignment mass: the mean attention weight inside each correctly emitted digit's gold box or span;
``zoo.metrics.alignment`` says how."""

from __future__ import annotations

from typing import Optional

from zoo.metrics.alignment import alignment_scores
from zoo.metrics.metric import register


def alignment_mass(attention, regions, hypotheses, references) -> float:
    """The mean, over correctly emitted digits, of the share of the attention row's weight inside the
    digit's gold region (1: all of it there); 0 when no digit was emitted correctly. Arguments as
    ``zoo.metrics.alignment_accuracy.alignment_accuracy``."""
    _, masses = alignment_scores(attention, regions, hypotheses, references)
    return float(masses.mean()) if masses.size else 0.0


@register("alignment_mass", scale=1, higher_is_better=True, label="alignment mass (weight in the gold region)")
def score(hypotheses, references, attention=None, regions=None, **inputs) -> Optional[float]:
    if attention is None or regions is None:
        return None
    return alignment_mass(attention, regions, hypotheses, references)
