"""The training job behind ``python train.py``: ``train(cfg) -> metrics``."""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Dict

from omegaconf import DictConfig, OmegaConf, open_dict

from zoo.config import ConfigError, attention_config, quiet_tensorflow, validate_train
from zoo.evaluation.examples import format_examples, parse_examples, score_examples, write_examples

PYFUNC_REQUIREMENTS = ["tensorflow==2.21.0", "tensorflow-text==2.21.1", "mlflow==3.17.2", "pandas"]


def _resolve(cfg: DictConfig) -> DictConfig:
    """A resolved copy with the attention's full hyperparameters filled in from conf/attention."""
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    if cfg.model.get("attention") is not None:
        options = OmegaConf.to_container(cfg.model.attention_options) if cfg.model.get("attention_options") else {}
        merged = attention_config(cfg.model.attention, options)
        with open_dict(cfg):
            cfg.model.attention_options = {k: v for k, v in merged.items() if k not in ("name", "kind")}
    OmegaConf.set_struct(cfg, True)
    return cfg


OPTIMIZERS = ("adam", "adamw", "sgd")


def make_optimizer(optimizer_cfg, clipnorm=None):
    """``optimizer.name`` (adam | adamw | sgd) with ``optimizer.learning_rate``; gradient clipping by norm."""
    import keras

    from zoo.training.losses import WarmupSchedule

    classes = {"adam": keras.optimizers.Adam, "adamw": keras.optimizers.AdamW, "sgd": keras.optimizers.SGD}
    learning_rate = float(optimizer_cfg.learning_rate)
    warmup, decay = int(optimizer_cfg.get("warmup_steps") or 0), optimizer_cfg.get("decay") or "none"
    if warmup or decay != "none":
        learning_rate = WarmupSchedule(learning_rate, warmup, decay)
    return classes[optimizer_cfg.name](learning_rate=learning_rate, clipnorm=float(clipnorm) if clipnorm else None)


def build_model(cfg: DictConfig, task):
    import zoo.models

    kwargs = OmegaConf.to_container(cfg.model, resolve=True)
    name = kwargs.pop("name")
    kwargs.pop("task", None)
    model = zoo.models.create(name, source_vocab_size=task.source_tokenizer.vocab_size,
                              target_vocab_size=task.target_tokenizer.vocab_size, **kwargs)
    return model.ensure_built()


def train(cfg: DictConfig) -> Dict[str, float]:
    """Trains ``cfg.model`` on ``cfg.data``, tracks everything in MLflow, exports a SavedModel.

    Returns the final metrics (``test_exact_match``, ``test_bleu``, ...) plus ``run_id``.
    """
    validate_train(cfg)
    cfg = _resolve(cfg)
    example_pairs = parse_examples(cfg.get("examples"), cfg.get("examples_bleu_k", 2))
    if example_pairs and cfg.model.get("task") == "regression":
        raise ConfigError(f"examples need a translation model; model={cfg.model.name} is a regression model.")
    quiet_tensorflow()
    if cfg.model.get("task") == "regression":
        from zoo.training.regression import train_regression

        return train_regression(cfg)
    import keras
    import mlflow
    import tensorflow as tf

    from zoo.data import load_task, make_dataset
    from zoo.data.task import target_token_count
    from zoo.evaluation import score_split
    from zoo.export.translator import Translator
    from zoo.tracking import log_config, log_outputs, mlflow_run, resolve_tracking_uri, ui_command
    from zoo.training.callbacks import EpochMetrics, TimeBudget, input_seconds_per_batch
    from zoo.training.losses import MaskedCrossEntropy

    keras.utils.set_random_seed(int(cfg.seed))
    started = time.perf_counter()
    task = load_task(cfg.data)
    model = build_model(cfg, task)
    t = cfg.trainer
    model.compile(
        optimizer=make_optimizer(cfg.optimizer, clipnorm=t.clipnorm),
        loss=MaskedCrossEntropy(label_smoothing=float(t.get("label_smoothing") or 0.0)),
        jit_compile=bool(t.jit_compile),
    )
    max_target_length = int(cfg.decoding.max_length or task.max_target_length)
    translator = Translator(model, task.source_tokenizer, task.target_tokenizer,
                            task.max_source_length, max_target_length,
                            decoding=OmegaConf.to_container(cfg.decoding, resolve=True))
    train_ds = make_dataset(task, "train", int(t.batch_size), shuffle=True, seed=int(cfg.seed),
                            bucket_boundaries=t.bucket_boundaries)
    val_ds = make_dataset(task, "val", int(t.batch_size))
    train_batches = math.ceil(len(task.splits["train"][0]) / int(t.batch_size))
    tokens_per_epoch = target_token_count(task, "train")
    if t.steps_per_epoch:
        tokens_per_epoch *= min(1.0, int(t.steps_per_epoch) / train_batches)
        train_ds = train_ds.repeat()

    val_sources, val_references = task.splits["val"]

    def val_metrics():
        metrics, _, _ = score_split(translator.translate, val_sources, val_references)
        return {task.metric: metrics[task.metric]}

    uri = resolve_tracking_uri(cfg.tracking.uri)
    with mlflow_run(uri, cfg.tracking.experiment, run_name=cfg.tracking.run_name) as run:
        run_id = run.info.run_id
        print(f"MLflow run {run_id} in {uri}", flush=True)
        log_config(cfg, extra_tags={k: v for k, v in (("zoo.data_sha256", task.fingerprint),
                                                       ("zoo.data_attribution", task.attribution)) if v})
        mlflow.log_params({f"stats.{k}": v for k, v in task.stats().items()})
        mlflow.log_metric("num_params", model.count_params())
        epoch_metrics = EpochMetrics(val_metrics, tokens_per_epoch)
        callbacks = [epoch_metrics]
        if t.get("max_minutes"):
            callbacks.append(TimeBudget(float(t.max_minutes)))
        if t.early_stopping_patience:
            callbacks.append(keras.callbacks.EarlyStopping(monitor="val_loss", patience=int(t.early_stopping_patience),
                                                           min_delta=float(t.early_stopping_min_delta),
                                                           restore_best_weights=True))
        fit_started = time.perf_counter()
        # Bucketed batches have no known count; Keras warns when it finds the end of epoch 1.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        model.fit(train_ds, validation_data=val_ds, epochs=int(t.epochs),
                  steps_per_epoch=int(t.steps_per_epoch) if t.steps_per_epoch else None,
                  callbacks=callbacks, verbose=int(t.verbose), shuffle=False)  # the pipeline shuffles
        train_seconds = time.perf_counter() - fit_started
        # Input pipeline cost per batch, measured alone after training, against the step time.
        input_seconds = input_seconds_per_batch(train_ds, int(t.steps_per_epoch) if t.steps_per_epoch else None)
        step_seconds = epoch_metrics.train_step_seconds / max(epoch_metrics.train_steps, 1)
        mlflow.log_metrics({"input_seconds_per_batch": input_seconds, "train_seconds_per_step": step_seconds,
                            "input_wait_share_max": input_seconds / max(step_seconds, 1e-9)})

        test_sources, test_references = task.splits["test"]
        metrics, signatures, outputs = score_split(
            translator.translate, test_sources, test_references,
            reference_tokens=task.target_tokenizer.python_split(test_references))
        with tempfile.TemporaryDirectory() as workdir:
            log_outputs("test", test_sources, test_references, metrics, signatures, outputs,
                        int(cfg.tracking.attention_plots), int(cfg.tracking.predictions), workdir,
                        attribution=task.attribution, target_tokenizer=task.target_tokenizer)
            rows, example_metrics = score_examples(translator.translate, example_pairs, int(cfg.examples_bleu_k))
            if rows:  # cfg.examples: d2l-style printout, examples.csv, example_bleu_<i>
                print(format_examples(rows), flush=True)
                write_examples(os.path.join(workdir, "examples.csv"), rows)
                mlflow.log_artifact(os.path.join(workdir, "examples.csv"))
                mlflow.log_metrics(example_metrics)
            saved_dir = os.path.join(workdir, "saved_model")
            translator.save(saved_dir, config_yaml=OmegaConf.to_yaml(cfg, resolve=True))
            model.save(os.path.join(saved_dir, "assets.extra", "model.keras"))  # for perplexity, re-decoding
            mlflow.log_artifacts(saved_dir, "saved_model")
            vocab_dir = Path(workdir) / "vocab"
            for side, tok in (("source", task.source_tokenizer), ("target", task.target_tokenizer)):
                tok.save_artifacts(str(vocab_dir / side))
            mlflow.log_artifacts(str(vocab_dir), "vocab")
            if cfg.tracking.log_pyfunc:
                log_pyfunc(saved_dir)
        total_seconds = time.perf_counter() - started
        mlflow.log_metrics({"train_seconds": train_seconds, "total_seconds": total_seconds,
                            "epochs_trained": len(epoch_metrics.history)})

    result = {f"test_{k}": v for k, v in metrics.items()}
    result.update({"run_id": run_id, "train_seconds": train_seconds, **example_metrics})
    summary = f"test_{task.metric} = {metrics[task.metric]:.4f}"
    if task.metric != "bleu":
        summary += f"   test_bleu = {metrics['bleu']:.2f}"
    if "bleu_multiref" in metrics:
        summary += f"   test_bleu_multiref = {metrics['bleu_multiref']:.2f}"
    print(f"\n{summary}   test_chrf = {metrics['chrf']:.2f}   ({len(epoch_metrics.history)} epochs, "
          f"{train_seconds:.0f} s training)")
    print(f"MLflow run id: {run_id}")
    print(f"Open the MLflow UI: {ui_command(uri)}", flush=True)
    return result


def log_pyfunc(saved_dir: str) -> None:
    """Logs ``model/``: a pyfunc that serves the SavedModel (DataFrame ``source`` -> translations)."""
    import mlflow
    import pandas as pd
    from mlflow.models import infer_signature

    code = Path(__file__).resolve().parent.parent / "export" / "pyfunc_model.py"
    signature = infer_signature(pd.DataFrame({"source": ["9 may 2018"]}), pd.Series(["2018-05-09"], name="translation"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # MLflow's hints about type hints and input examples
        mlflow.pyfunc.log_model(name="model", python_model=str(code), artifacts={"saved_model": saved_dir},
                                pip_requirements=PYFUNC_REQUIREMENTS, signature=signature)
