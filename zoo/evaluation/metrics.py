"""Text metrics: exact match, sacreBLEU BLEU and chrF (with their signatures)."""

from __future__ import annotations

from typing import Dict, Sequence, Tuple


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        return 0.0
    return sum(h == r for h, r in zip(hypotheses, references)) / len(references)


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> Tuple[float, str]:
    """Corpus BLEU (sacreBLEU defaults, 0-100) and its signature."""
    import sacrebleu

    metric = sacrebleu.metrics.BLEU()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


def chrf(hypotheses: Sequence[str], references: Sequence[str]) -> Tuple[float, str]:
    """Corpus chrF (sacreBLEU defaults, 0-100) and its signature."""
    import sacrebleu

    metric = sacrebleu.metrics.CHRF()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return float(score.score), str(metric.get_signature())


def text_metrics(hypotheses: Sequence[str], references: Sequence[str]) -> Tuple[Dict[str, float], Dict[str, str]]:
    """``({"exact_match", "bleu", "chrf"}, {"bleu_signature", "chrf_signature"})``."""
    b, b_sig = bleu(hypotheses, references)
    c, c_sig = chrf(hypotheses, references)
    return ({"exact_match": exact_match(hypotheses, references), "bleu": b, "chrf": c},
            {"bleu_signature": b_sig, "chrf_signature": c_sig})
