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


def log_test_report(task, metrics, signatures, outputs, tracking_cfg, workdir: str, model=None) -> None:
    """``test_*`` metrics, signature tags, predictions.csv and attention plots, into the active run;
    the explorer also shows ``model``'s layers and heads where it has ``attention_maps``."""
    import zoo.evaluation

    sources, references = task.splits["test"]
    count = int(tracking_cfg.attention_plots)
    zoo.evaluation.log_outputs("test", sources, references, metrics, signatures, outputs, count,
                               int(tracking_cfg.predictions), workdir, attribution=task.attribution,
                               target_tokenizer=task.target_tokenizer,
                               extra_views=layer_and_head_views(model, task, outputs, count))


def layer_and_head_views(model, task, outputs, count: int):
    """For a model with ``attention_maps`` (the Transformer): per example, every layer's encoder
    self-attention, decoder self-attention and cross-attention, the heads' average then each head,
    teacher-forced on the output the run decoded (``<bos> y_1 .. y_{n-1}`` in, rows ``y_1 .. y_n``).
    None for other models."""
    if model is None or not hasattr(model, "attention_maps") or not count:
        return None
    import numpy as np
    import tensorflow as tf

    from zoo.plots.explorer import view
    from zoo.tokens import BOS_ID

    def real(tokens):
        return [t for t in tokens if t not in (b"", "")]

    views = []
    for i in range(min(count, len(outputs["source_tokens"]))):
        source, target = real(outputs["source_tokens"][i]), real(outputs["target_tokens"][i])
        if not target:
            views.append([])
            continue
        source_ids = task.source_tokenizer.lookup(tf.constant([source]))
        target_ids = task.target_tokenizer.lookup(tf.constant([target]))
        target_in = tf.concat([tf.fill([1, 1], tf.cast(BOS_ID, target_ids.dtype)), target_ids[:, :-1]], axis=1)
        maps = model.attention_maps((tf.cast(source_ids, "int32"), tf.cast(target_in, "int32")))
        labels = {"encoder": ("encoder self-attention", source, source),
                  "self": ("decoder self-attention", target, target),
                  "cross": ("cross-attention", target, source)}
        example = []
        for kind, (name, rows, columns) in labels.items():
            for layer, weights in enumerate(maps[kind], start=1):
                w = np.asarray(weights)[0]  # [H, rows, columns]
                example.append(view(f"{name}, layer {layer}, heads' average", rows, columns, w.mean(0)))
                example += [view(f"{name}, layer {layer}, head {h}", rows, columns, w[h - 1])
                            for h in range(1, w.shape[0] + 1)]
        views.append(example)
    return views


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
