"""Kernel regression as attention pooling: ``python train.py experiment=nadaraya_watson``.

Reproduces d2l's experiment (sec. 10.2): average pooling vs non-parametric vs parametric
Nadaraya-Watson attention pooling, each scored by test MSE against the noise-free function. The
run is the one lifecycle of every task (``zoo.training.lifecycle.run``); ``RegressionKind`` is what
this task hands it.
"""

from __future__ import annotations

import csv
import dataclasses
import time
from pathlib import Path
from typing import Dict, Optional

import numpy as np

from zoo.config import model_kwargs
from zoo.training.fit import FitResult, LoopState
from zoo.training.lifecycle import TaskKind
from zoo.training.model import create_model, make_optimizer

OBJECTIVE = "test_mse_parametric"  # the value train.py returns: the learned kernel's test error


def leave_one_out(x_train, y_train):
    """For training: each training point queries all the others (d2l excludes the point itself)."""
    n = len(x_train)
    others = ~np.eye(n, dtype=bool)
    keys = np.stack([x_train[row] for row in others])  # [n, n-1]
    values = np.stack([y_train[row] for row in others])
    return x_train[:, None], keys, values


@dataclasses.dataclass
class RegressionTask:
    """The arrays of ``zoo.data.kernel_regression`` as the run records a task: sizes, splits, source."""

    arrays: Dict[str, np.ndarray]
    fingerprint: Optional[str] = None  # generated from a seed, no corpus file
    attribution: Optional[str] = None

    def stats(self) -> Dict[str, object]:
        return {"train_examples": len(self.arrays["x_train"]), "test_examples": len(self.arrays["x_test"])}

    def split_texts(self):
        for split in ("train", "test"):
            x, y = self.arrays[f"x_{split}"], self.arrays[f"y_{split}"]
            yield split, [f"{a!r} {b!r}" for a, b in zip(x.tolist(), y.tolist())], {"examples": len(x)}


@dataclasses.dataclass
class RegressionData:
    task: RegressionTask

    def __getitem__(self, key: str) -> np.ndarray:
        return self.task.arrays[key]

    @property
    def test_inputs(self):
        """One batch: every test point queries every training point."""
        return self["x_test"][None, :], self["x_train"][None, :], self["y_train"][None, :]


class RegressionKind(TaskKind):
    """Kernel regression for the run lifecycle (``zoo.training.lifecycle.run``): d2l's three estimators,
    the learned one trained with Keras ``fit`` (one batch of every training point, one step an epoch),
    each scored by test MSE against the noise-free function; plots, predictions and the Keras file."""

    def build_data(self, runtime) -> RegressionData:
        from zoo.data.kernel_regression import generate

        d = self.cfg.data
        return RegressionData(RegressionTask(generate(n_train=int(d.n_train), noise=float(d.noise),
                                                      x_max=float(d.x_max), step=float(d.step), seed=int(d.seed))))

    def _create(self, parametric: bool):
        return create_model(str(self.cfg.model.name), parametric=parametric, **model_kwargs(self.cfg.model))

    def build_model(self, data, runtime):
        """The learned estimator, compiled and built; the fixed one (``parametric=False``) is kept beside it."""
        self.fixed = self._create(parametric=False)
        learned = self._create(parametric=True)
        learned.compile(optimizer=make_optimizer(self.cfg.optimizer), loss="mse")
        learned(data.test_inputs)  # built: the run records its parameter count
        return learned, None

    def metric(self, data) -> str:
        return OBJECTIVE[len("test_"):]

    def fit(self, data, model, optimizer, runtime, *, on_epoch, stop, checkpoint_dir, state, best_weights):
        """Keras ``fit`` on every training point at once, as in d2l; each epoch's loss is then logged."""
        started = time.perf_counter()
        queries, keys, values = leave_one_out(data["x_train"], data["y_train"])
        history = model.fit((queries, keys, values), data["y_train"][:, None], batch_size=len(data["x_train"]),
                            epochs=int(self.cfg.trainer.epochs), verbose=int(self.cfg.trainer.verbose))
        seconds = time.perf_counter() - started
        records = [{"train_loss": float(loss)} for loss in history.history["loss"]]
        for epoch, record in enumerate(records, start=1):
            on_epoch(record, epoch)
        state = LoopState(epoch=len(records), history=records, elapsed_seconds=seconds, train_step_seconds=seconds,
                          train_steps=len(records))
        return FitResult(state=state, train_seconds=seconds, traces=0, shapes=0)

    def fit_metrics(self, data, fitted) -> Dict[str, float]:
        return {}

    def score(self, data, model, workdir: str) -> Dict[str, float]:
        import keras

        from zoo.plots.regression import regression_attention, regression_fits
        from zoo.training import log

        inputs, x_test, y_test = data.test_inputs, data["x_test"], data["y_test"]
        predictions = {"average pooling": np.full_like(x_test, data["y_train"].mean())}
        weights = {}
        for name, estimator in (("non-parametric", self.fixed), ("parametric", model)):
            predictions[name] = keras.ops.convert_to_numpy(estimator(inputs))[0]
            weights[name] = keras.ops.convert_to_numpy(estimator.attention_weights(inputs))[0]
        metrics = {f"test_mse_{name.replace(' ', '_').replace('-', '_')}": float(np.mean((pred - y_test) ** 2))
                   for name, pred in predictions.items()}
        metrics["learned_w"] = float(keras.ops.convert_to_numpy(model.pooling.w))
        log.log_metrics(metrics)
        plots = Path(workdir) / "plots"
        plots.mkdir()
        regression_fits(data["x_train"], data["y_train"], x_test, y_test, predictions, str(plots / "fits.png"))
        for name, w in weights.items():
            regression_attention(w, x_test, data["x_train"], str(plots / f"attention_{name}.png"),
                                 title=f"{name} attention pooling")
        path = Path(workdir) / "predictions.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["x", "truth", *predictions])
            for i, x in enumerate(x_test):
                writer.writerow([float(x), float(y_test[i]), *(float(p[i]) for p in predictions.values())])
        log.log_files([str(plots), str(path)])
        return metrics

    def export(self, data, model, config_yaml: str, workdir: str) -> Dict[str, str]:
        """``keras_model/``: the learned estimator's ``model.keras`` and the run's ``config.yaml``."""
        folder = Path(workdir) / "keras_model"
        folder.mkdir()
        model.save(folder / "model.keras")
        (folder / "config.yaml").write_text(config_yaml, encoding="utf-8")
        return {"keras_model": str(folder)}

    def summary(self, data, metrics: Dict[str, float], epochs: int, train_seconds: float) -> str:
        return (f"{OBJECTIVE} = {metrics[OBJECTIVE]:.4f}   learned w = {metrics['learned_w']:.3f}   "
                f"({epochs} epochs, {train_seconds:.0f} s training)")

    def report(self, data, result, summary: str):
        lines = [f"{key:<32} {value:.4f}" for key, value in result.items() if key.startswith("test_mse")]
        return [*lines, f"learned w = {result['learned_w']:.3f}"]
