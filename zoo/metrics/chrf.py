"""Corpus chrF with sacreBLEU's defaults (0-100) and its signature."""

from __future__ import annotations

from typing import Sequence, Tuple

from zoo.metrics.metric import register


def chrf(hypotheses: Sequence[str], references: Sequence[str]) -> Tuple[float, str]:
    """Corpus chrF (sacreBLEU defaults, 0-100) and its signature."""
    import sacrebleu

    metric = sacrebleu.metrics.CHRF()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


@register("chrf", scale=100, higher_is_better=True, label="chrF", by_length=True, in_summary=True)
def score(hypotheses, references, **inputs):
    return chrf(hypotheses, references)[0]
