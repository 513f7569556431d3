"""Multi-reference BLEU: each distinct source of a split against all its references (sacreBLEU, 0-100)."""

from __future__ import annotations

from zoo.metrics.metric import register
from zoo.metrics.multi_reference import corpus_score


@register("bleu_multiref", scale=100, higher_is_better=True, label="BLEU (all references)", in_summary=True)
def score(hypotheses, references, sources=None, **inputs):
    import sacrebleu

    if sources is None:
        return None
    return corpus_score(sacrebleu.metrics.BLEU(), sources, hypotheses, references)
