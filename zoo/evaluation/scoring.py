"""Scoring a translate function on a split: the one path used by training and evaluate.py."""

from __future__ import annotations

from typing import Callable, Dict, Sequence, Tuple

from zoo.evaluation.metrics import text_metrics


def score_split(translate_fn: Callable, sources: Sequence[str], references: Sequence[str],
                batch_size: int = 256) -> Tuple[Dict[str, float], Dict[str, str], Dict[str, list]]:
    """Translates ``sources`` with ``translate_fn`` (the SavedModel's ``translate`` or the
    in-memory ``Translator.translate``) and scores them against ``references``.

    Returns ``(metrics, signatures, outputs)``; ``outputs`` holds per-sentence ``text``,
    ``attention``, ``source_tokens``, ``target_tokens``.
    """
    from zoo.export.translator import translate_batched

    outputs = translate_batched(translate_fn, sources, batch_size=batch_size)
    metrics, signatures = text_metrics(outputs["text"], references)
    return metrics, signatures, outputs
