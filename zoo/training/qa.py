"""The story-QA job (``task: qa`` models on ``data=story_qa``): the same stages and loop as translation.

What differs from ``job._train`` is small and lives here: the data (``zoo.data.story_qa``
batches ``((story [B, S, W], question [B, Wq]), answer [B, 1])``), the model's sizes
(``vocab_size`` and, where the model takes it, ``memory_size``), the exported module
(``zoo.export.reader.Reader``: raw story and question strings in) and the scoring
(``zoo.evaluation.qa``: accuracy and attention-as-evidence per kind of question). The loop is
``zoo.training.fit.fit`` unchanged: a QA model's ``call`` returns ``[B, 1, V]`` logits, so the
per-token loss against ``answer [B, 1]`` is the answer's cross-entropy, and ``model.losses``
(the self-attentive penalty) is added as for every model.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import shutil
import tempfile
import time
from typing import Dict, Optional

from omegaconf import OmegaConf

from zoo.config import model_kwargs
from zoo.training import checkpoint, log, resume
from zoo.training.data import epoch_seed
from zoo.training.fit import LoopState, fit
from zoo.training.model import create_model, make_optimizer
from zoo.training.signals import Interrupted, handle_signals

DATA_SIZES = ("vocab_size", "memory_size")  # from the data, never from a config


@dataclasses.dataclass
class QAData:
    """What ``fit`` asks of its data: epoch batches, validation batches, steps and examples per epoch."""

    task: object
    batch_size: int
    seed: int
    steps_per_epoch: Optional[int]
    bucket_boundaries: object
    train_arrays: dict
    val_arrays: dict

    @property
    def tokens_per_epoch(self) -> float:  # one answer token per question
        rows = len(self.train_arrays["answer"])
        return float(min(rows, self.steps_per_epoch * self.batch_size) if self.steps_per_epoch else rows)

    def train_batches(self, epoch: int, skip_steps: int = 0):
        from zoo.data.story_qa import make_dataset

        boundaries = self.bucket_boundaries if isinstance(self.bucket_boundaries, (list, tuple)) or \
            OmegaConf.is_list(self.bucket_boundaries) else None
        ds = make_dataset(self.task, "train", self.batch_size, shuffle=True, seed=epoch_seed(self.seed, epoch),
                          bucket_boundaries=boundaries, encoded=self.train_arrays)
        if self.steps_per_epoch:
            ds = ds.repeat().take(self.steps_per_epoch)
        if skip_steps:
            ds = ds.skip(skip_steps)
        return ds

    def val_batches(self):
        from zoo.data.story_qa import make_dataset

        return make_dataset(self.task, "val", self.batch_size, encoded=self.val_arrays)


def load_qa_data(cfg) -> QAData:
    from zoo.data import load_task
    from zoo.data.story_qa import arrays

    task = load_task(cfg.data)
    t = cfg.trainer
    return QAData(task=task, batch_size=int(t.batch_size), seed=int(cfg.seed),
                  steps_per_epoch=int(t.steps_per_epoch) if t.steps_per_epoch else None,
                  bucket_boundaries=t.bucket_boundaries, train_arrays=arrays(task, "train"),
                  val_arrays=arrays(task, "val"))


def build_qa_model(cfg, task):
    """``zoo.models.create(cfg.model.name, ...)`` with the data's sizes the constructor asks for, built."""
    import zoo.models

    sizes = {"vocab_size": task.vocab_size, "memory_size": task.memory_size}
    builder = zoo.models.MODELS.get(cfg.model.name)
    wanted = inspect.signature(builder).parameters
    model = create_model(cfg.model.name, **{k: v for k, v in sizes.items() if k in wanted},
                              **model_kwargs(cfg.model))
    return model.ensure_built()


def make_reader(model, task):
    from zoo.export.reader import Reader

    return Reader(model, task.tokenizer, task.memory_size, task.max_words, task.max_question_words)


def train_qa(cfg, runtime, uri: str, resume_run=None, stopped_message=None) -> Dict[str, object]:
    """Trains a ``task: qa`` model; the stages and the run contract of ``job._train``.

    ``stopped_message(stopped, run_id, state, trainer)`` words the ``Interrupted`` a signal raises.
    """
    import zoo.evaluation.qa as qa

    if runtime.replicas > 1 or runtime.precision != "float32":
        from zoo.errors import ConfigError

        raise ConfigError("story-QA models train with trainer.strategy=default and trainer.precision=float32 "
                          f"(got strategy={cfg.trainer.strategy}, precision={cfg.trainer.precision}).")
    started = time.perf_counter()
    data = load_qa_data(cfg)
    task, t = data.task, cfg.trainer
    with runtime.strategy.scope():
        model = build_qa_model(cfg, task)
        optimizer = make_optimizer(cfg.optimizer, clipnorm=t.clipnorm)
        optimizer.build(model.trainable_variables)
    reader = make_reader(model, task)
    val_examples = task.examples["val"]

    def val_metrics():
        metrics, _ = qa.score_qa(reader.answer, val_examples)
        return {"accuracy": metrics["accuracy"], "evidence": metrics["evidence"]}

    state, best_weights, run_id, directory = None, None, None, None
    try:
        with handle_signals() as stop, log.open_run(cfg, task, model, uri, str(t.checkpoint_dir), resume_run) as run_id:
            directory = os.path.join(str(t.checkpoint_dir), run_id)
            if resume_run is not None:
                found = checkpoint.latest(resume.checkpoint_dir(resume_run) or directory)
                if found is not None:
                    saved, best_weights = checkpoint.load(found, model, optimizer)
                    state = LoopState(**saved)
                    print(f"Resuming from {found} (epoch {state.epoch + 1}, step {state.global_step})", flush=True)
                    log.log_unlogged_epochs(run_id, state.history)
            with stop.deferring():
                fitted = fit(model, optimizer, data, runtime, t, metric="accuracy", val_metrics=val_metrics,
                             on_epoch=log.log_epoch, stop=stop, checkpoint_dir=directory, state=state,
                             best_weights=best_weights)
            state = fitted.state
            log.log_metrics({"train_seconds_per_step": state.train_step_seconds / max(state.train_steps, 1),
                             "train_traces": state.traces})
            metrics, outputs = qa.score_qa(reader.answer, task.examples["test"])
            with tempfile.TemporaryDirectory() as workdir:
                qa.log_qa_outputs("test", task.examples["test"], metrics, outputs, int(cfg.tracking.attention_plots),
                                  int(cfg.tracking.predictions), workdir, model.has_word_attention)
                if cfg.tracking.export:
                    exported = export_reader(reader, model, task, OmegaConf.to_yaml(cfg, resolve=True), workdir)
                    log.log_files([exported["saved_model"], exported["vocab"]])
                    if cfg.tracking.log_pyfunc:
                        from zoo.export.pyfunc import log_reader_pyfunc

                        log_reader_pyfunc(exported["saved_model"])
            train_seconds = state.elapsed_seconds
            log.log_metrics({"train_seconds": train_seconds, "total_seconds": time.perf_counter() - started,
                             "epochs_trained": len(state.history), "tracking_seconds": log.tracking_seconds()})
            summary = (f"test_accuracy = {metrics['accuracy']:.4f}   test_evidence = {metrics['evidence']:.4f}   "
                       f"({len(state.history)} epochs, {train_seconds:.0f} s training)")
            log.finish(summary, run_id, cfg, "test_accuracy")
    except Interrupted as stopped:
        message = stopped_message(stopped, run_id, state, t) if stopped_message else str(stopped)
        raise Interrupted(stopped.signum, message) from None
    if directory and os.path.isdir(directory):
        shutil.rmtree(directory, ignore_errors=True)

    result = {f"test_{k}": v for k, v in metrics.items()}
    result.update({"run_id": run_id, "train_seconds": train_seconds, "objective": "test_accuracy"})
    print("\n" + qa.format_table(result, task.kinds))
    print(f"({len(state.history)} epochs, {train_seconds:.0f} s training)")
    print(f"MLflow run id: {run_id}")
    print(f"Open the MLflow UI: {log.ui_command(uri)}", flush=True)
    return result


def export_reader(reader, model, task, config_yaml: str, workdir: str) -> Dict[str, str]:
    """``saved_model/`` (with ``assets.extra/model.keras`` and ``config.yaml``) and ``vocab/words``."""
    import numpy as np

    if not all(np.all(np.isfinite(w)) for w in model.get_weights()):
        raise ValueError("The model's weights hold NaN or infinite values; it is not exported.")
    saved_dir = os.path.join(workdir, "saved_model")
    reader.save(saved_dir, config_yaml=config_yaml)
    model.save(os.path.join(saved_dir, "assets.extra", "model.keras"))
    vocab_dir = os.path.join(workdir, "vocab")
    task.tokenizer.save_artifacts(os.path.join(vocab_dir, "words"))
    return {"saved_model": saved_dir, "vocab": vocab_dir}
