"""Evaluation: scoring a split, scores by source length, a run's report files, ``evaluate(cfg)`` for evaluate.py.

The metrics themselves live in ``zoo.metrics`` (one module each); ``bleu``, ``chrf``, ``exact_match``
are re-exported here as before.
"""

from zoo.evaluation.report import Report, log_outputs, write_report
from zoo.evaluation.scoring import score_split, text_metrics
from zoo.metrics.bleu import bleu
from zoo.metrics.chrf import chrf
from zoo.metrics.exact_match import exact_match

__all__ = ["Report", "bleu", "chrf", "exact_match", "log_outputs", "score_split", "text_metrics", "write_report"]
