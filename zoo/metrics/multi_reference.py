"""Multi-reference scoring: each distinct source against every reference it has in the split.

Tatoeba gives many sentences several translations (a third of the English sentences of fra-eng),
and its splits keep them together. Scoring each pair alone counts a correct translation as wrong
against the other references of its source. The metrics ``bleu_multiref`` and ``chrf_multiref``
score each distinct source once, against all its references.
"""

from __future__ import annotations

from typing import Dict, Sequence, Tuple


def multi_reference(sources: Sequence[str], hypotheses: Sequence[str], references: Sequence[str]
                    ) -> Tuple[list, list]:
    """One hypothesis per distinct source with every reference of that source in the split.

    Returns ``(hypotheses, reference_streams)`` for sacreBLEU: streams padded with ``None`` where
    a source has fewer references (sacreBLEU skips those).
    """
    order, refs, hyps = [], {}, {}
    for source, hypothesis, reference in zip(sources, hypotheses, references):
        if source not in refs:
            order.append(source)
            refs[source], hyps[source] = [], hypothesis
        if reference not in refs[source]:
            refs[source].append(reference)
    width = max((len(r) for r in refs.values()), default=0)
    streams = [[refs[s][i] if i < len(refs[s]) else None for s in order] for i in range(width)]
    return [hyps[s] for s in order], streams


def corpus_score(metric, sources: Sequence[str], hypotheses: Sequence[str], references: Sequence[str]):
    """``metric`` (a sacreBLEU metric object) over the distinct sources, each against all its
    references; None when no source repeats (then it equals the single-reference score)."""
    distinct_hyps, streams = multi_reference(sources, hypotheses, references)
    if len(streams) < 2:
        return None
    return float(metric.corpus_score(distinct_hyps, streams).score)


def multi_reference_metrics(sources: Sequence[str], hypotheses: Sequence[str], references: Sequence[str]
                            ) -> Tuple[Dict[str, float], Dict[str, str]]:
    """``bleu_multiref`` and ``chrf_multiref`` (sacreBLEU, with signatures) over the distinct
    sources of a split, each against all its references; empty when no source repeats."""
    import sacrebleu

    distinct_hyps, streams = multi_reference(sources, hypotheses, references)
    if len(streams) < 2:
        return {}, {}
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    metrics = {"bleu_multiref": float(bleu.corpus_score(distinct_hyps, streams).score),
               "chrf_multiref": float(chrf.corpus_score(distinct_hyps, streams).score),
               "distinct_sources": float(len(distinct_hyps))}
    return metrics, {"bleu_multiref_signature": str(bleu.get_signature()),
                     "chrf_multiref_signature": str(chrf.get_signature())}
