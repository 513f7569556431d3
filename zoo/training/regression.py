"""Kernel regression as attention pooling: ``python train.py experiment=nadaraya_watson``.

Reproduces d2l's experiment (sec. 10.2): average pooling vs non-parametric vs parametric
Nadaraya-Watson attention pooling, each scored by test MSE against the noise-free function.
"""

from __future__ import annotations

import csv
import tempfile
import time
from pathlib import Path
from typing import Dict

import numpy as np
from omegaconf import DictConfig, OmegaConf

OBJECTIVE = "test_mse_parametric"  # the value train.py returns: the learned kernel's test error


def leave_one_out(x_train, y_train):
    """For training: each training point queries all the others (d2l excludes the point itself)."""
    n = len(x_train)
    others = ~np.eye(n, dtype=bool)
    keys = np.stack([x_train[row] for row in others])  # [n, n-1]
    values = np.stack([y_train[row] for row in others])
    return x_train[:, None], keys, values


def train_regression(cfg: DictConfig) -> Dict[str, float]:
    import keras
    import mlflow

    import zoo.models
    from zoo.data.kernel_regression import generate
    from zoo.plots.regression import regression_attention, regression_fits
    from zoo.tracking import log_config, mlflow_run, resolve_tracking_uri, ui_command
    from zoo.training.log import run_name
    from zoo.training.model import make_optimizer

    keras.utils.set_random_seed(int(cfg.seed))
    data = generate(n_train=int(cfg.data.n_train), noise=float(cfg.data.noise), x_max=float(cfg.data.x_max),
                    step=float(cfg.data.step), seed=int(cfg.data.seed))
    x_train, y_train, x_test, y_test = data["x_train"], data["y_train"], data["x_test"], data["y_test"]
    test_inputs = (x_test[None, :], x_train[None, :], y_train[None, :])
    kwargs = {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k not in ("name", "task")}

    uri = resolve_tracking_uri(cfg.tracking.uri)
    started = time.perf_counter()
    with mlflow_run(uri, cfg.tracking.experiment, run_name=run_name(cfg)) as run:
        print(f"MLflow run {run.info.run_id} in {uri}", flush=True)
        log_config(cfg)
        predictions, weights = {}, {}
        predictions["average pooling"] = np.full_like(x_test, y_train.mean())
        fixed = zoo.models.create("nadaraya_watson", parametric=False, **kwargs)
        predictions["non-parametric"] = keras.ops.convert_to_numpy(fixed(test_inputs))[0]
        weights["non-parametric"] = keras.ops.convert_to_numpy(fixed.attention_weights(test_inputs))[0]

        learned = zoo.models.create("nadaraya_watson", parametric=True, **kwargs)
        learned.compile(optimizer=make_optimizer(cfg.optimizer), loss="mse")
        queries, keys, values = leave_one_out(x_train, y_train)
        # One batch holds all training points, as in d2l: each epoch is one gradient step.
        history = learned.fit((queries, keys, values), y_train[:, None], batch_size=len(x_train),
                              epochs=int(cfg.trainer.epochs), verbose=int(cfg.trainer.verbose))
        for epoch, loss in enumerate(history.history["loss"], start=1):
            mlflow.log_metric("train_loss", float(loss), step=epoch)
        predictions["parametric"] = keras.ops.convert_to_numpy(learned(test_inputs))[0]
        weights["parametric"] = keras.ops.convert_to_numpy(learned.attention_weights(test_inputs))[0]

        metrics = {f"test_mse_{name.replace(' ', '_').replace('-', '_')}": float(np.mean((pred - y_test) ** 2))
                   for name, pred in predictions.items()}
        metrics["learned_w"] = float(keras.ops.convert_to_numpy(learned.pooling.w))
        metrics["total_seconds"] = time.perf_counter() - started
        mlflow.log_metrics(metrics)
        mlflow.set_tag("zoo.objective", OBJECTIVE)
        with tempfile.TemporaryDirectory() as workdir:
            plots = Path(workdir) / "plots"
            plots.mkdir()
            regression_fits(x_train, y_train, x_test, y_test, predictions, str(plots / "fits.png"))
            for name, w in weights.items():
                regression_attention(w, x_test, x_train, str(plots / f"attention_{name}.png"),
                                     title=f"{name} attention pooling")
            mlflow.log_artifacts(str(plots), "plots")
            path = Path(workdir) / "predictions.csv"
            with open(path, "w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f)
                writer.writerow(["x", "truth", *predictions])
                for i, x in enumerate(x_test):
                    writer.writerow([float(x), float(y_test[i]), *(float(p[i]) for p in predictions.values())])
            mlflow.log_artifact(str(path))
            model_path = Path(workdir) / "model.keras"
            learned.save(model_path)
            mlflow.log_artifact(str(model_path), "keras_model")

    for key, value in metrics.items():
        if key.startswith("test_mse"):
            print(f"{key:<32} {value:.4f}")
    print(f"learned w = {metrics['learned_w']:.3f}")
    print(f"MLflow run id: {run.info.run_id}")
    print(f"Open the MLflow UI: {ui_command(uri)}", flush=True)
    return {**metrics, "run_id": run.info.run_id, "objective": OBJECTIVE}
