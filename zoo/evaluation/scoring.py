"""Scoring a translate function on a split: the one path used by training and evaluate.py."""

from __future__ import annotations

from typing import Callable, Dict, Sequence, Tuple

from zoo.evaluation.metrics import attention_statistics, text_metrics, token_accuracy


def _decode(tokens) -> list:
    return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in tokens]


def multi_reference(sources: Sequence[str], hypotheses: Sequence[str], references: Sequence[str]
                    ) -> Tuple[list, list]:
    """One hypothesis per distinct source with every reference of that source in the split.

    Tatoeba gives many sentences several translations (a third of the English sentences of
    fra-eng), and its splits keep them together. Scoring each pair alone counts a correct
    translation as wrong against the other references of its source. Returns ``(hypotheses,
    reference_streams)`` for sacreBLEU: streams padded with ``None`` where a source has fewer
    references (sacreBLEU skips those).
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


def score_split(translate_fn: Callable, sources: Sequence[str], references: Sequence[str],
                batch_size: int = 256, reference_tokens: Sequence[Sequence[str]] = None,
                ) -> Tuple[Dict[str, float], Dict[str, str], Dict[str, list]]:
    """Translates ``sources`` with ``translate_fn`` (the SavedModel's ``translate`` or the
    in-memory ``Translator.translate``) and scores them against ``references``.

    ``reference_tokens`` (the references in the target tokenizer's tokens) adds
    ``token_accuracy``. When a source occurs more than once (Tatoeba), ``bleu_multiref`` and
    ``chrf_multiref`` score each distinct source against all its references. Returns ``(metrics, signatures, outputs)``; ``outputs`` holds
    per-sentence ``text``, ``attention``, ``source_tokens``, ``target_tokens``.
    """
    from zoo.export.translator import translate_batched

    outputs = translate_batched(translate_fn, sources, batch_size=batch_size)
    metrics, signatures = text_metrics(outputs["text"], references)
    multi_metrics, multi_signatures = multi_reference_metrics(list(sources), outputs["text"], list(references))
    metrics.update(multi_metrics)
    signatures.update(multi_signatures)
    if reference_tokens is not None:
        hyp_tokens = [[t for t in _decode(row) if t and t != "<eos>"] for row in outputs["target_tokens"]]
        metrics["token_accuracy"] = token_accuracy(hyp_tokens, reference_tokens)
    metrics.update(attention_statistics(outputs["attention"], outputs["target_tokens"], outputs["source_tokens"]))
    return metrics, signatures, outputs
