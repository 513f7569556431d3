"""The training job behind ``python train.py``: ``train(cfg) -> metrics``, as named stages."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from typing import Callable, Dict, Optional

from omegaconf import DictConfig, OmegaConf

from zoo import kernels
from zoo.config import quiet_tensorflow, redacted, validate_train
from zoo.environ import set_onednn
from zoo.errors import ConfigError
from zoo.evaluation.examples import parse_examples
from zoo.training import checkpoint, log, resume, score
from zoo.training.callbacks import input_seconds_per_batch
from zoo.training.data import load_data
from zoo.training.export import export, make_translator
from zoo.training.fit import LoopState, fit
from zoo.training.model import build, float32_copy, weights_digest
from zoo.training.runtime import check_trainer, reset_policy, setup
from zoo.training.signals import Interrupted, handle_signals


def _resolve(cfg: DictConfig) -> DictConfig:
    """A resolved copy in struct mode (Hydra composed the attention's hyperparameters into it)."""
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    OmegaConf.set_struct(cfg, True)
    return cfg


def train(cfg: DictConfig, on_epoch: Optional[Callable[[Dict[str, float], int], None]] = None) -> Dict[str, object]:
    """Trains ``cfg.model`` on ``cfg.data``, tracks everything in MLflow, exports a SavedModel.

    Stages: data -> model -> fit -> score -> export, inside the MLflow run (log). Returns the
    final metrics (``test_exact_match``, ``test_bleu``, ...), ``run_id``, and ``objective``: the
    name of the task's own metric (``test_<Task.metric>``), the value ``train.py`` returns.
    ``on_epoch(record, epoch)`` sees each epoch's record after it is logged; raising
    ``StopTraining`` there ends the run early, KILLED (``zoo.search`` prunes trials this way).
    """
    validate_train(cfg)
    check_trainer(cfg.trainer)
    cfg = _resolve(cfg)
    kernels.use(cfg.get("kernels", kernels.FAST))  # zoo/fast's speed-ups or the plain reference path
    example_pairs = parse_examples(cfg.get("examples"), cfg.get("examples_bleu_k", 2))
    if example_pairs and cfg.model.get("task") in ("regression", "qa"):
        raise ConfigError(f"examples need a translation model; model={cfg.model.name} is a "
                          f"{cfg.model.task} model.")
    quiet_tensorflow()
    set_onednn(cfg.trainer.get("onednn"))  # read once, when TensorFlow is imported: before that
    if cfg.model.get("task") == "regression":
        from zoo.training.regression import train_regression

        return train_regression(cfg)
    uri = log.tracking_uri(cfg)
    resume_run = None
    if cfg.trainer.resume:
        resume_run = resume.find_run(uri, cfg.tracking.experiment, str(cfg.trainer.resume))
        resume.check_config(resume_run, cfg)
    runtime = setup(cfg.trainer, int(cfg.seed))  # before any other TensorFlow op
    try:
        if cfg.model.get("task") == "qa":  # story QA: same loop and run contract, its own data and export
            from zoo.training.qa import train_qa

            return train_qa(cfg, runtime, uri, resume_run, stopped_message=_stopped_message)
        return _train(cfg, runtime, uri, resume_run, example_pairs, on_epoch)
    finally:
        reset_policy()


def _train(cfg, runtime, uri, resume_run, example_pairs, on_epoch=None) -> Dict[str, object]:
    started = time.perf_counter()
    data = load_data(cfg, runtime.replicas)
    task, t = data.task, cfg.trainer
    model, optimizer = build(cfg, task, runtime)
    translator = make_translator(model, task, cfg)
    state, best_weights, run_id = None, None, None
    try:
        with handle_signals() as stop, log.open_run(cfg, task, model, uri, str(t.checkpoint_dir), resume_run,
                                                    is_chief=runtime.is_chief) as run_id:
            run_id = run_id or (resume_run.info.run_id if resume_run is not None else None)
            directory = os.path.join(str(t.checkpoint_dir), run_id) if run_id else None
            if resume_run is not None:
                found = checkpoint.latest(resume.checkpoint_dir(resume_run) or directory)
                if found is not None:
                    saved, best_weights = checkpoint.load(found, model, optimizer)
                    state = LoopState(**saved)
                    print(f"Resuming from {found} (epoch {state.epoch + 1}, step {state.global_step})", flush=True)
                    if runtime.is_chief:
                        log.log_unlogged_epochs(run_id, state.history)
            val_metric = score.validation_metric(translator.translate, task)
            if runtime.precision != "float32":  # decoded in float32, the dtypes the decoder and export use
                decoder = float32_copy(cfg, task, model)
                in_float32 = score.validation_metric(make_translator(decoder, task, cfg).translate, task)

                def val_metric():
                    decoder.set_weights(model.get_weights())
                    return in_float32()
            with stop.deferring():
                fitted = fit(model, optimizer, data, runtime, t, metric=task.metric, val_metrics=val_metric,
                             on_epoch=log.epoch_logger(on_epoch), stop=stop, checkpoint_dir=directory if runtime.is_chief else None,
                             state=state, best_weights=best_weights)
            state = fitted.state
            if runtime.pipelines > 1:
                print(f"{runtime.worker}: weights sha256 {weights_digest(model)}", flush=True)
            if not runtime.is_chief:
                return {"run_id": None, "objective": None}
            if runtime.precision != "float32":  # scored and exported as always: float32 in and out
                model = float32_copy(cfg, task, model)
                translator = make_translator(model, task, cfg)
            # Input pipeline cost per batch, measured alone after training, against the step time.
            input_seconds = input_seconds_per_batch(data.train_batches(1), data.steps_per_epoch)
            step_seconds = state.train_step_seconds / max(state.train_steps, 1)
            fit_metrics = {"input_seconds_per_batch": input_seconds, "train_seconds_per_step": step_seconds,
                           "input_wait_share_max": input_seconds / max(step_seconds, 1e-9),
                           "train_traces": state.traces}
            if t.jit_compile:
                fit_metrics["xla_shapes"] = fitted.shapes
            log.log_metrics(fit_metrics)

            metrics, signatures, outputs = score.score_test(translator.translate, task)
            with tempfile.TemporaryDirectory() as workdir:
                score.log_test_report(task, metrics, signatures, outputs, cfg.tracking, workdir)
                examples_csv, example_metrics = score.examples(translator.translate, example_pairs,
                                                               int(cfg.examples_bleu_k), workdir)
                if examples_csv:  # cfg.examples: d2l-style printout, examples.csv, example_bleu_<i>
                    log.log_files([examples_csv])
                    log.log_metrics(example_metrics)
                if cfg.tracking.export:
                    exported = export(translator, model, task, OmegaConf.to_yaml(redacted(cfg)), workdir)
                    log.log_files([exported["saved_model"], exported["vocab"]])
                    if cfg.tracking.log_pyfunc:
                        log.log_pyfunc(exported["saved_model"])
            train_seconds = state.elapsed_seconds
            log.log_metrics({"train_seconds": train_seconds, "total_seconds": time.perf_counter() - started,
                             "epochs_trained": len(state.history), "tracking_seconds": log.tracking_seconds()})
            summary = _summary(task.metric, metrics, len(state.history), train_seconds)
            log.finish(summary, run_id, cfg, f"test_{task.metric}")
    except Interrupted as stopped:
        raise Interrupted(stopped.signum, _stopped_message(stopped, run_id, state, t)) from None
    if directory and os.path.isdir(directory):
        shutil.rmtree(directory, ignore_errors=True)  # the run is FINISHED: it cannot be resumed

    result = {f"test_{k}": v for k, v in metrics.items()}
    result.update({"run_id": run_id, "train_seconds": train_seconds, **example_metrics,
                   "objective": f"test_{task.metric}"})
    print(f"\n{summary}")
    print(f"MLflow run id: {run_id}")
    print(f"Open the MLflow UI: {log.ui_command(uri)}", flush=True)
    return result


def _summary(metric: str, metrics: Dict[str, float], epochs: int, train_seconds: float) -> str:
    """The one-line result: the task's metric first, then BLEU and chrF, epochs and training time."""
    summary = f"test_{metric} = {metrics[metric]:.4f}"
    if metric != "bleu":
        summary += f"   test_bleu = {metrics['bleu']:.2f}"
    if "bleu_multiref" in metrics:
        summary += f"   test_bleu_multiref = {metrics['bleu_multiref']:.2f}"
    return f"{summary}   test_chrf = {metrics['chrf']:.2f}   ({epochs} epochs, {train_seconds:.0f} s training)"


def resume_command(run_id: str) -> str:
    """``python train.py <this run's overrides> trainer.resume=<run_id>``."""
    overrides = [o for o in log.command_line_overrides() if not o.startswith(("trainer.resume=", "+trainer.resume="))]
    return " ".join(["python train.py", *(shlex.quote(o) for o in overrides), f"trainer.resume={run_id}"])


def _stopped_message(stopped, run_id, state, trainer) -> str:
    import signal

    name = signal.Signals(stopped.signum).name
    if run_id is None:
        return f"Stopped by {name} before the MLflow run started."
    where = os.path.abspath(os.path.join(str(trainer.checkpoint_dir), run_id))
    after = f" after step {state.global_step}" if state is not None else ""
    return (f"Stopped by {name}{after}; run {run_id} is KILLED, its checkpoints are in {where}.\n"
            f"Resume with: {resume_command(run_id)}")
