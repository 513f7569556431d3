"""Alignment accuracy: the share of correctly emitted digits whose most-attended position lies inside
that digit's gold box (an image) or span (an utterance); ``zoo.metrics.alignment`` says how."""

from __future__ import annotations

from typing import Optional

from zoo.metrics.alignment import alignment_scores
from zoo.metrics.metric import register


def alignment_accuracy(attention, regions, hypotheses, references) -> float:
    """The share of correctly emitted digits (``zoo.metrics.alignment.matched_digits``) whose
    attention row peaks inside the digit's gold region; 0 when no digit was emitted correctly.

    ``attention``: per example ``[T_out, h, w]`` (regions: boxes ``(x0, y0, x1, y1)`` in grid cells)
    or ``[T_out, F]`` (regions: spans ``(f0, f1)`` in frames), a batch array or a list."""
    hits, _ = alignment_scores(attention, regions, hypotheses, references)
    return float(hits.mean()) if hits.size else 0.0


@register("alignment_accuracy", scale=1, higher_is_better=True, label="alignment accuracy (peak in the gold region)",
          in_summary=True)
def score(hypotheses, references, attention=None, regions=None, **inputs) -> Optional[float]:
    if attention is None or regions is None:
        return None  # text tasks have no gold regions
    return alignment_accuracy(attention, regions, hypotheses, references)
