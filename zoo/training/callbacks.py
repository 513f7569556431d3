"""Keras callbacks: per-epoch task metric, throughput, and MLflow logging."""

from __future__ import annotations

import time
from typing import Callable, Dict, Optional

import keras


class EpochMetrics(keras.callbacks.Callback):
    """Adds ``val_<metric>`` (by decoding the validation split) and ``train_tokens_per_sec``
    to the epoch logs, so the progress bar shows them, and logs the epoch to MLflow.

    Args:
        evaluate_fn: ``() -> {metric: value}`` on the validation split (decodes for real).
        tokens_per_epoch: target tokens the loss sees per epoch.
        log_to_mlflow: log ``train_loss``, ``val_loss``, ``val_*``, ``train_tokens_per_sec``.
    """

    def __init__(self, evaluate_fn: Callable[[], Dict[str, float]], tokens_per_epoch: float, log_to_mlflow=True):
        super().__init__()
        self.evaluate_fn = evaluate_fn
        self.tokens_per_epoch = float(tokens_per_epoch)
        self.log_to_mlflow = log_to_mlflow
        self._start: Optional[float] = None
        self._train_seconds: Optional[float] = None
        self._batches = 0
        self.history = []
        self.train_steps = 0  # training steps, all epochs
        self.train_step_seconds = 0.0  # their wall time, validation excluded

    def on_train_batch_end(self, batch, logs=None):
        self._batches = batch + 1

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()
        self._train_seconds = None
        self._batches = 0

    def on_test_begin(self, logs=None):
        if self._start is not None and self._train_seconds is None:
            self._train_seconds = time.perf_counter() - self._start

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        seconds = self._train_seconds or (time.perf_counter() - self._start)
        self.train_steps += self._batches
        self.train_step_seconds += seconds
        logs["train_tokens_per_sec"] = self.tokens_per_epoch / max(seconds, 1e-9)
        for name, value in self.evaluate_fn().items():
            logs[f"val_{name}"] = value
        record = {"train_loss": float(logs["loss"]), "train_tokens_per_sec": float(logs["train_tokens_per_sec"]),
                  "epoch_seconds": float(time.perf_counter() - self._start)}
        for key, value in logs.items():
            if key.startswith("val_"):
                record[key] = float(value)
        self.history.append(record)
        if self.log_to_mlflow:
            import mlflow

            mlflow.log_metrics(record, step=epoch + 1)


class TimeBudget(keras.callbacks.Callback):
    """Stops training at an epoch end when another epoch would pass ``minutes`` of training."""

    def __init__(self, minutes: float):
        super().__init__()
        self.seconds = float(minutes) * 60.0
        self.stopped_early = False

    def on_train_begin(self, logs=None):
        self._start = time.perf_counter()
        self._last = self._start

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        epoch_seconds, self._last = now - self._last, now
        if now - self._start + epoch_seconds > self.seconds:
            self.model.stop_training = True
            self.stopped_early = True


def input_seconds_per_batch(dataset, max_batches: Optional[int] = None) -> float:
    """Seconds the input pipeline alone takes to produce one batch of ``dataset``.

    Iterates ``max_batches`` batches (all of them when None) with nothing else running, shuffle
    buffer fill included. Training overlaps this work with the step (``prefetch``), so
    ``input_seconds_per_batch / seconds_per_step`` bounds the share of step time spent waiting
    for input from above: it is what the wait would be with no overlap at all.
    """
    start = time.perf_counter()
    batches = 0
    for _ in (dataset.take(max_batches) if max_batches else dataset):
        batches += 1
    return (time.perf_counter() - start) / max(batches, 1)
