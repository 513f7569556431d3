"""The run lifecycle, one for every kind of task: ``run(cfg, kind)``.

One function opens (or resumes) the MLflow run, fits, scores, exports, logs and finishes it, and
ends it FINISHED, KILLED (a signal, ``StopTraining``) or FAILED (an error). A kind of task
(translation: ``zoo.training.job``; story QA: ``zoo.training.qa``; kernel regression:
``zoo.training.regression``; the image and audio tasks to come) differs only by the object it hands
in, a ``TaskKind``: its data, its model, how it is validated per epoch, scored, exported and
summarised. So what every run owes its user holds for every kind at once: credentials in the tracking
URI reach MLflow and no message (``tracking_credentials``); the config written into an export is the
redacted one (``redacted``); checkpoints, ``trainer.resume``, signals, the metric buffer of a server
that goes away, the final metrics and the one-line summary.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from zoo.config import redacted
from zoo.tracking import tracking_credentials
from zoo.training import log, resume
from zoo.training.fit import FitResult, LoopState, fit
from zoo.training.model import make_optimizer, weights_digest
from zoo.training.runtime import Runtime, reset_policy, setup
from zoo.training.signals import Interrupted, StopRequest, handle_signals
from zoo.training.timing import input_seconds_per_batch

EpochHook = Callable[[Dict[str, float], int], None]
ModelHook = Callable[["TaskKind", object, object], None]  # (kind, data, the final model)

# The trainer settings a kind cannot train with are refused before TensorFlow starts: a kind's module
# declares them as ``TRAINER_CONSTRAINTS`` (``zoo.checks`` rules on the ``trainer.*`` keys), which the config
# validator reads without importing it (``zoo.catalog.task_trainer_constraints``). These two hold for a
# kind whose batches are not split over replicas and which trains, scores and exports in float32.
ONE_REPLICA_FLOAT32 = (
    {"rule": "one_of", "key": "strategy", "values": ("default",),
     "why": "its batches are not split over replicas"},
    {"rule": "one_of", "key": "precision", "values": ("float32",),
     "why": "it trains, scores and exports in float32, with no mixed-precision path"},
)


class TaskKind:
    """What a kind of task hands the lifecycle; one object per run, made from the resolved config.

    A kind that trains with the shared loop (``zoo.training.fit``) implements ``build_data`` (an
    object with ``task``, ``train_batches(epoch, skip)``, ``val_batches()``, ``steps_per_epoch``,
    ``tokens_per_epoch``: ``zoo.training.data.ArrayData`` for a task held in arrays), ``new_model`` (the
    model with the data's sizes, built; ``build_model`` makes it and the optimizer under
    ``runtime.strategy``, built, so a checkpoint can be restored into them, and a kind with its own
    optimizer overrides it), ``metric``, ``validation``, ``score``, ``export`` and ``summary``; a kind
    trained otherwise overrides ``fit`` too (kernel regression: Keras ``fit``).
    ``data.task`` is what the run records: ``stats()``, ``split_texts()``, ``fingerprint``, ``attribution``.
    """

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg
        self._module = (None, None)  # (model, its exported module): traced once, for scoring and export

    def module_of(self, model, make: Callable[[], object]):
        """The exported module of ``model`` (``make()``: a reader, a classifier), made once per model, so
        validation, scoring and the export share one traced copy."""
        if self._module[0] is not model:
            self._module = (model, make())
        return self._module[1]

    def build_data(self, runtime: Runtime):
        raise NotImplementedError

    def build_model(self, data, runtime: Runtime) -> Tuple[object, object]:
        """``(model, optimizer)``, built under ``runtime.strategy``: ``new_model(data)`` and the configured
        optimizer; a kind that compiles its own returns None for the optimizer."""
        with runtime.strategy.scope():
            model = self.new_model(data)
            optimizer = make_optimizer(self.cfg.optimizer, clipnorm=self.cfg.trainer.clipnorm)
            optimizer.build(model.trainable_variables)
        return model, optimizer

    def new_model(self, data):
        """The kind's model with the data's sizes, built (``build_model`` puts it under the strategy)."""
        raise NotImplementedError

    def metric(self, data) -> str:
        """The task's own metric: ``val_<metric>`` per epoch, ``test_<metric>`` the run's objective."""
        raise NotImplementedError

    def validation(self, data, model, runtime: Runtime) -> Callable[[], Dict[str, float]]:
        """``() -> {name: value}`` of the validation split, after each epoch (``val_<name>``)."""
        raise NotImplementedError

    def fit(self, data, model, optimizer, runtime: Runtime, *, on_epoch: EpochHook, stop: StopRequest,
            checkpoint_dir: Optional[str], state: Optional[LoopState], best_weights) -> FitResult:
        """Trains with the shared loop (checkpoints, resume, early stopping, time budget, signals)."""
        return fit(model, optimizer, data, runtime, self.cfg.trainer, metric=self.metric(data),
                   val_metrics=self.validation(data, model, runtime), on_epoch=on_epoch, stop=stop,
                   checkpoint_dir=checkpoint_dir, state=state, best_weights=best_weights)

    def fit_metrics(self, data, fitted: FitResult) -> Dict[str, float]:
        """What the fit cost: seconds per step, the input pipeline's share of it, traces (and XLA shapes)."""
        state = fitted.state
        # Input pipeline cost per batch, measured alone after training, against the step time.
        input_seconds = input_seconds_per_batch(data.train_batches(1), data.steps_per_epoch)
        step_seconds = state.train_step_seconds / max(state.train_steps, 1)
        metrics = {"input_seconds_per_batch": input_seconds, "train_seconds_per_step": step_seconds,
                   "input_wait_share_max": input_seconds / max(step_seconds, 1e-9), "train_traces": state.traces}
        if self.cfg.trainer.jit_compile:
            metrics["xla_shapes"] = fitted.shapes
        return metrics

    def final_model(self, data, model, runtime: Runtime):
        """The model scored and exported (the trained one; a float32 copy of a mixed-precision one)."""
        return model

    def score(self, data, model, workdir: str) -> Dict[str, float]:
        """Scores the test split and logs its report (metrics, predictions, plots) into the active run;
        returns the metrics as logged (``test_<name>``, ...)."""
        raise NotImplementedError

    def export(self, data, model, config_yaml: str, workdir: str) -> Dict[str, str]:
        """Writes the exported model under ``workdir`` with ``config_yaml`` inside it; ``{artifact name:
        path}`` (``saved_model`` first where there is one), each logged at the run's root."""
        raise NotImplementedError

    @staticmethod
    def save_with_model(module, model, config_yaml: str, workdir: str) -> str:
        """``<workdir>/saved_model``: ``module``'s SavedModel (``module.save(directory, config_yaml=...)``)
        with the ``.keras`` model beside the config in ``assets.extra``; returns its path. A model whose
        weights hold NaN or infinite values is not exported (ValueError)."""
        import numpy as np

        if not all(np.all(np.isfinite(w)) for w in model.get_weights()):
            raise ValueError("The model's weights hold NaN or infinite values; it is not exported.")
        saved_dir = os.path.join(workdir, "saved_model")
        module.save(saved_dir, config_yaml=config_yaml)
        model.save(os.path.join(saved_dir, "assets.extra", "model.keras"))
        return saved_dir

    def log_served_model(self, saved_model: str) -> None:
        """Logs the MLflow model (pyfunc) over the export (``tracking.log_pyfunc``); none by default."""

    def summary(self, data, metrics: Dict[str, float], epochs: int, train_seconds: float) -> str:
        """The one-line result: the run's description and the first line printed at the end."""
        raise NotImplementedError

    def report(self, data, result: Dict[str, object], summary: str) -> List[str]:
        """The lines printed when the run has finished (before its id and how to open the UI)."""
        return ["", summary]


def run(cfg: DictConfig, kind: TaskKind, on_epoch: Optional[EpochHook] = None,
        on_model: Optional[ModelHook] = None) -> Dict[str, object]:
    """Opens or resumes the run of ``cfg``, fits, scores, exports, logs and finishes it; ``cfg`` is valid
    and resolved. Returns the metrics of ``kind.score``, ``run_id``, ``train_seconds`` and ``objective``
    (``test_<kind.metric>``, the value ``train.py`` returns). ``on_epoch(record, epoch)`` sees each epoch's
    record after it is logged; raising ``StopTraining`` there ends the run KILLED (how ``zoo.search`` prunes).
    ``on_model(kind, data, model)`` sees the final model, the one scored and exported, before its scoring
    (how ``scripts/heatmaps.py`` draws a trained model's attention)."""
    started = time.perf_counter()
    with tracking_credentials(log.tracking_uri(cfg)) as uri:  # no user:password@ in any message from here on
        resume_run = None
        if cfg.trainer.resume:
            resume_run = resume.find_run(uri, cfg.tracking.experiment, str(cfg.trainer.resume))
            resume.check_config(resume_run, cfg)
        runtime = setup(cfg.trainer, int(cfg.seed))  # before any other TensorFlow op
        try:
            return _run(cfg, kind, runtime, uri, resume_run, on_epoch, on_model, started)
        finally:
            reset_policy()


def _run(cfg, kind: TaskKind, runtime: Runtime, uri: str, resume_run, on_epoch, on_model,
         started: float) -> Dict[str, object]:
    t = cfg.trainer
    data = kind.build_data(runtime)
    model, optimizer = kind.build_model(data, runtime)
    # The newest checkpoint that can be read, before the run reopens: when none can, one line says so
    # and the run keeps its status (zoo.training.resume.restore).
    restored = (resume.restore(resume_run, str(t.checkpoint_dir), model, optimizer, runtime.is_chief)
                if resume_run is not None else None)
    state, best_weights, run_id, directory = None, None, None, None
    try:
        with handle_signals() as stop, log.open_run(cfg, data.task, model, uri, str(t.checkpoint_dir), resume_run,
                                                    is_chief=runtime.is_chief) as run_id:
            run_id = run_id or (resume_run.info.run_id if resume_run is not None else None)
            directory = os.path.join(str(t.checkpoint_dir), run_id) if run_id else None
            if resume_run is not None:
                state, best_weights = resume.continue_from(restored, run_id, runtime.is_chief, log.log_unlogged_epochs)
            with stop.deferring():
                fitted = kind.fit(data, model, optimizer, runtime, on_epoch=log.epoch_logger(on_epoch), stop=stop,
                                  checkpoint_dir=directory if runtime.is_chief else None, state=state,
                                  best_weights=best_weights)
            state = fitted.state
            if runtime.pipelines > 1:
                print(f"{runtime.worker}: weights sha256 {weights_digest(model)}", flush=True)
            if not runtime.is_chief:
                return {"run_id": None, "objective": None}
            log.log_metrics(kind.fit_metrics(data, fitted))
            model = kind.final_model(data, model, runtime)
            if on_model is not None:
                on_model(kind, data, model)
            with tempfile.TemporaryDirectory() as workdir:
                metrics = kind.score(data, model, workdir)
                if cfg.tracking.export:  # the one place a config is written into an export: redacted
                    exported = kind.export(data, model, OmegaConf.to_yaml(redacted(cfg)), workdir)
                    log.log_files(list(exported.values()))
                    if cfg.tracking.log_pyfunc and "saved_model" in exported:
                        kind.log_served_model(exported["saved_model"])
            train_seconds = state.elapsed_seconds
            log.log_metrics({"train_seconds": train_seconds, "total_seconds": time.perf_counter() - started,
                             "epochs_trained": len(state.history), "tracking_seconds": log.tracking_seconds()})
            objective = f"test_{kind.metric(data)}"
            summary = kind.summary(data, metrics, len(state.history), train_seconds)
            log.finish(summary, run_id, cfg, objective)
    except Interrupted as stopped:
        raise Interrupted(stopped.signum, stopped_message(stopped, run_id, state, t)) from None
    if directory and os.path.isdir(directory):
        shutil.rmtree(directory, ignore_errors=True)  # the run is FINISHED: it cannot be resumed

    result = {**metrics, "run_id": run_id, "train_seconds": train_seconds, "objective": objective}
    for line in kind.report(data, result, summary):
        print(line)
    print(f"MLflow run id: {run_id}")
    print(f"Open the MLflow UI: {log.ui_command(uri)}", flush=True)
    return result


def resume_command(run_id: str) -> str:
    """``python train.py <this run's overrides> trainer.resume=<run_id>`` (secrets masked)."""
    overrides = [o for o in log.command_line_overrides() if not o.startswith(("trainer.resume=", "+trainer.resume="))]
    return " ".join(["python train.py", *(shlex.quote(o) for o in overrides), f"trainer.resume={run_id}"])


def stopped_message(stopped: Interrupted, run_id: Optional[str], state: Optional[LoopState], trainer) -> str:
    """What a signal did to the run: its status, where its checkpoints are, the command that resumes it."""
    import signal

    name = signal.Signals(stopped.signum).name
    if run_id is None:
        return f"Stopped by {name} before the MLflow run started."
    where = os.path.abspath(os.path.join(str(trainer.checkpoint_dir), run_id))
    after = f" after step {state.global_step}" if state is not None else ""
    return (f"Stopped by {name}{after}; run {run_id} is KILLED, its checkpoints are in {where}.\n"
            f"Resume with: {resume_command(run_id)}")

