"""Stage ``score``: the trained model's translations scored, per epoch (validation) and at the end.

The one module of the engine that calls ``zoo.evaluation``.
"""

from __future__ import annotations

import os
from typing import Callable, Dict


def validation_metric(translate_fn: Callable, task) -> Callable[[], Dict[str, float]]:
    """``() -> {task.metric: value}``: decodes the validation split for real (each epoch)."""
    from zoo.evaluation import score_split

    sources, references = task.splits["val"]

    def score() -> Dict[str, float]:
        metrics, _, _ = score_split(translate_fn, sources, references)
        return {task.metric: metrics[task.metric]}

    return score


def score_test(translate_fn: Callable, task):
    """``(metrics, signatures, outputs)`` of the test split."""
    from zoo.evaluation import score_split

    sources, references = task.splits["test"]
    return score_split(translate_fn, sources, references,
                       reference_tokens=task.target_tokenizer.python_split(references))


def log_test_report(task, metrics, signatures, outputs, tracking_cfg, workdir: str) -> None:
    """``test_*`` metrics, signature tags, predictions.csv and attention plots, into the active run."""
    import zoo.evaluation

    sources, references = task.splits["test"]
    zoo.evaluation.log_outputs("test", sources, references, metrics, signatures, outputs,
                               int(tracking_cfg.attention_plots), int(tracking_cfg.predictions), workdir,
                               attribution=task.attribution, target_tokenizer=task.target_tokenizer)


def examples(translate_fn: Callable, pairs, k: int, workdir: str):
    """``cfg.examples`` translated: d2l's printout, ``examples.csv`` (its path, or None) and
    ``example_bleu_<i>`` / ``example_bleu_mean``."""
    from zoo.evaluation.examples import format_examples, score_examples, write_examples

    rows, metrics = score_examples(translate_fn, pairs, k)
    if not rows:
        return None, {}
    print(format_examples(rows), flush=True)
    path = os.path.join(workdir, "examples.csv")
    write_examples(path, rows)
    return path, metrics
