"""Metrics and evaluation: scoring translations, ``evaluate(cfg)`` for evaluate.py."""

from zoo.evaluation.metrics import bleu, chrf, exact_match, text_metrics
from zoo.evaluation.scoring import score_split

__all__ = ["bleu", "chrf", "exact_match", "text_metrics", "score_split"]
