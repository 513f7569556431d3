"""Scoring a translate function on a split: the one path used by training and evaluate.py."""

from __future__ import annotations

from typing import Callable, Dict, Sequence, Tuple

import zoo.metrics
from zoo.metrics.attention_statistics import attention_statistics
from zoo.metrics.bleu import bleu
from zoo.metrics.chrf import chrf
from zoo.metrics.exact_match import exact_match
from zoo.metrics.length_ratio import length_ratio
from zoo.metrics.multi_reference import multi_reference, multi_reference_metrics
from zoo.metrics.token_accuracy import token_accuracy
from zoo.tokens import EOS

__all__ = ["multi_reference", "multi_reference_metrics", "score_split", "text_metrics"]


def _decode(tokens) -> list:
    return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in tokens]


def text_metrics(hypotheses: Sequence[str], references: Sequence[str]) -> Tuple[Dict[str, float], Dict[str, str]]:
    """``({"exact_match", "bleu", "chrf", "length_ratio"}, {"bleu_signature", "chrf_signature"})``."""
    b, b_sig = bleu(hypotheses, references)
    c, c_sig = chrf(hypotheses, references)
    return ({"exact_match": exact_match(hypotheses, references), "bleu": b, "chrf": c,
             "length_ratio": length_ratio(hypotheses, references)},
            {"bleu_signature": b_sig, "chrf_signature": c_sig})


def score_split(translate_fn: Callable, sources: Sequence[str], references: Sequence[str],
                batch_size: int = 256, reference_tokens: Sequence[Sequence[str]] = None,
                ) -> Tuple[Dict[str, float], Dict[str, str], Dict[str, list]]:
    """Translates ``sources`` with ``translate_fn`` (the SavedModel's ``translate`` or the
    in-memory ``Translator.translate``) and scores them against ``references``.

    ``reference_tokens`` (the references in the target tokenizer's tokens) adds
    ``token_accuracy``. When a source occurs more than once (Tatoeba), ``bleu_multiref`` and
    ``chrf_multiref`` score each distinct source against all its references. Every other metric
    of ``zoo.metrics`` scored by source length is scored here too, so the split has the overall
    value of each by-length column. Returns ``(metrics, signatures, outputs)``; ``outputs`` holds
    per-sentence ``text``, ``attention``, ``source_tokens``, ``target_tokens``.
    """
    from zoo.export.translator import translate_batched

    outputs = translate_batched(translate_fn, sources, batch_size=batch_size)
    metrics, signatures = text_metrics(outputs["text"], references)
    multi_metrics, multi_signatures = multi_reference_metrics(list(sources), outputs["text"], list(references))
    metrics.update(multi_metrics)
    signatures.update(multi_signatures)
    hyp_tokens = [[t for t in _decode(row) if t and t != EOS] for row in outputs["target_tokens"]]
    if reference_tokens is not None:
        metrics["token_accuracy"] = token_accuracy(hyp_tokens, reference_tokens)
    metrics.update(attention_statistics(outputs["attention"], outputs["target_tokens"], outputs["source_tokens"]))
    others = [name for name in zoo.metrics.by_length_names() if name not in metrics]
    metrics.update(zoo.metrics.score_all(outputs["text"], references, others, hypothesis_tokens=hyp_tokens,
                                         reference_tokens=reference_tokens, sources=list(sources)))
    return metrics, signatures, outputs
