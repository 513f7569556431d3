"""Scoring a classifier (``task: classify``: ``data=listops``): accuracy, the majority-class baseline and
``predictions.csv``, the one path used by training (``zoo.training.classify``) and ``evaluate.py``."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Callable, Dict, Sequence, Tuple

import numpy as np

from zoo.tracking import log_files, log_scores


def accuracy(predicted: Sequence[int], labels: Sequence[int]) -> float:
    """The share of ``predicted`` class ids equal to ``labels``."""
    labels = np.asarray(labels)
    return float(np.mean(np.asarray(predicted) == labels)) if len(labels) else 0.0


def score_classifier(classify_fn: Callable, task, split: str, batch_size: int = 256) -> Tuple[Dict[str, float], dict]:
    """``({"accuracy", "majority_accuracy"}, outputs)`` of ``split``: ``classify_fn`` (the SavedModel's
    ``classify`` or the in-memory ``Classifier``'s) on its texts; ``outputs`` the class ids and probabilities."""
    from zoo.data.classification import majority_accuracy
    from zoo.export.classifier import classify_batched

    texts, labels = task.splits[split]
    outputs = classify_batched(classify_fn, texts, batch_size=batch_size)
    return {"accuracy": accuracy(outputs["class_id"], labels), "majority_accuracy": majority_accuracy(task, split)}, \
        outputs


def write_predictions(path, task, split: str, outputs, limit: int) -> str:
    """``predictions.csv``: the first ``limit`` examples of ``split``: text, label, prediction, its probability."""
    texts, labels = task.splits[split]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label", "prediction", "probability", "correct"])
        for text, label, predicted, probabilities in list(zip(texts, labels, outputs["class_id"],
                                                               outputs["probabilities"]))[:limit]:
            writer.writerow([text, task.classes[label], task.classes[predicted], f"{probabilities[predicted]:.4f}",
                             int(label == predicted)])
    return str(path)


def log_classifier_outputs(split: str, task, metrics, outputs, n_predictions: int, workdir: str) -> None:
    """``<split>_accuracy``, ``<split>_majority_accuracy`` and ``predictions.csv`` into the active MLflow run."""
    log_scores(split, metrics)
    if n_predictions:
        log_files([write_predictions(Path(workdir) / "predictions.csv", task, split, outputs, n_predictions)])


def evaluate_classify(cfg, saved_dir: str, data_cfg, log_run_id, uri: str, workdir: str) -> Dict[str, float]:
    """``evaluate.py`` on a classifier's SavedModel: scores ``cfg.split`` of ``data_cfg`` and logs
    ``<split>_*`` to the run (``run_id``) or to a new run of ``<experiment>-evaluation``."""
    import tensorflow as tf
    from omegaconf import OmegaConf

    from zoo.data import load_task
    from zoo.errors import ConfigError
    from zoo.evaluation.logged_run import evaluation_run

    decoding = OmegaConf.to_container(cfg.decoding) if OmegaConf.is_config(cfg.decoding) else dict(cfg.decoding or {})
    if cfg.interactive or any(v is not None for v in decoding.values()) or cfg.get("compare_to") is not None:
        raise ConfigError("interactive, decoding overrides and compare_to are for translation models; a classifier "
                          "answers with one class: use its SavedModel's classify(text).")
    saved = tf.saved_model.load(saved_dir)
    task = load_task(data_cfg)
    metrics, outputs = score_classifier(saved.classify, task, cfg.split, int(cfg.batch_size))
    print(f"\n{cfg.split} split of {data_cfg.name}: {len(task.splits[cfg.split][0])} examples   "
          f"accuracy = {metrics['accuracy']:.4f}   majority class = {metrics['majority_accuracy']:.4f}")
    if cfg.log:
        with evaluation_run(cfg, uri, log_run_id, data_cfg.name):
            log_classifier_outputs(cfg.split, task, metrics, outputs, int(cfg.tracking.predictions), workdir)
    return {f"{cfg.split}_{k}": v for k, v in metrics.items()}
