"""Multi-reference chrF: each distinct source of a split against all its references (sacreBLEU, 0-100)."""

from __future__ import annotations

from zoo.metrics.metric import register
from zoo.metrics.multi_reference import corpus_score


@register("chrf_multiref", scale=100, higher_is_better=True, label="chrF (all references)")
def score(hypotheses, references, sources=None, **inputs):
    import sacrebleu

    if sources is None:
        return None
    return corpus_score(sacrebleu.metrics.CHRF(), sources, hypotheses, references)
