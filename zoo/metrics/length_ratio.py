"""Length ratio: hypothesis length over reference length in sacreBLEU's tokens (BLEU's brevity ratio)."""

from __future__ import annotations

from typing import Sequence

from zoo.metrics.metric import register


def length_ratio(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Hypothesis length / reference length in sacreBLEU's tokens (BLEU's brevity ratio)."""
    import sacrebleu

    score = sacrebleu.metrics.BLEU().corpus_score(list(hypotheses), [list(references)])
    return float(score.sys_len) / max(1, float(score.ref_len))


@register("length_ratio", scale=1, higher_is_better=None, label="length ratio")
def score(hypotheses, references, **inputs):
    return length_ratio(hypotheses, references)
