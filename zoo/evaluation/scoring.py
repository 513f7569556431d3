"""Scoring a translate function on a split: the one path used by training and evaluate.py."""

from __future__ import annotations

from typing import Callable, Dict, Sequence, Tuple

from zoo.evaluation.metrics import attention_statistics, text_metrics, token_accuracy


def _decode(tokens) -> list:
    return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in tokens]


def score_split(translate_fn: Callable, sources: Sequence[str], references: Sequence[str],
                batch_size: int = 256, reference_tokens: Sequence[Sequence[str]] = None,
                ) -> Tuple[Dict[str, float], Dict[str, str], Dict[str, list]]:
    """Translates ``sources`` with ``translate_fn`` (the SavedModel's ``translate`` or the
    in-memory ``Translator.translate``) and scores them against ``references``.

    ``reference_tokens`` (the references in the target tokenizer's tokens) adds
    ``token_accuracy``. Returns ``(metrics, signatures, outputs)``; ``outputs`` holds
    per-sentence ``text``, ``attention``, ``source_tokens``, ``target_tokens``.
    """
    from zoo.export.translator import translate_batched

    outputs = translate_batched(translate_fn, sources, batch_size=batch_size)
    metrics, signatures = text_metrics(outputs["text"], references)
    if reference_tokens is not None:
        hyp_tokens = [[t for t in _decode(row) if t and t != "<eos>"] for row in outputs["target_tokens"]]
        metrics["token_accuracy"] = token_accuracy(hyp_tokens, reference_tokens)
    metrics.update(attention_statistics(outputs["attention"], outputs["target_tokens"], outputs["source_tokens"]))
    return metrics, signatures, outputs
