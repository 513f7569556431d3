"""Corpus BLEU with sacreBLEU's defaults (0-100) and its signature."""

from __future__ import annotations

from typing import Sequence, Tuple

from zoo.metrics.metric import register


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> Tuple[float, str]:
    """Corpus BLEU (sacreBLEU defaults, 0-100) and its signature."""
    import sacrebleu

    metric = sacrebleu.metrics.BLEU()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


# BLEU counts word 4-grams: one-word references (data=reverse) score 0 whatever the model does.
@register("bleu", scale=100, higher_is_better=True, label="BLEU", by_length=True, in_summary=True,
          zero_is_undefined=True)
def score(hypotheses, references, **inputs):
    return bleu(hypotheses, references)[0]
