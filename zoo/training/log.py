"""Stage ``log``: the MLflow run around the other stages (chief only), and what goes into it.

The one module of the engine that calls ``zoo.tracking``. A new run gets the config, the data's
statistics and tags; a resumed run (``trainer.resume``) is the same run started again, with the
epochs a kill left unlogged logged first. Whatever ends the run sets its status: FINISHED;
KILLED on a signal (tag ``zoo.stopped``); FAILED on an error (tag ``zoo.error``, its first line).
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import time
from typing import Dict, Iterator, List, Optional

from zoo.tracking.buffer import MetricBuffer
from zoo.training.resume import CHECKPOINT_TAG, HOST_TAG, PID_TAG
from zoo.training.signals import Interrupted, StopTraining

_SPENT = {"seconds": 0.0}  # time inside MLflow calls since the run opened (metric tracking_seconds)


def _timed(function):
    """Adds the call's wall time to the run's time spent tracking."""

    @functools.wraps(function)
    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _SPENT["seconds"] += time.perf_counter() - started

    return timed


def tracking_seconds() -> float:
    """Seconds spent in MLflow calls since the run opened: what tracking costs the job."""
    return _SPENT["seconds"]

_buffer: Optional[MetricBuffer] = None  # the open run's metric buffer (open_run sets it)


def tracking_uri(cfg) -> str:
    from zoo.tracking import resolve_tracking_uri

    return resolve_tracking_uri(cfg.tracking.uri)


def ui_command(uri: str) -> str:
    from zoo.tracking import ui_command as command

    return command(uri)


def command_line_overrides() -> List[str]:
    from zoo.tracking import command_line_overrides as overrides

    return overrides()


def run_name(cfg) -> str:
    """``tracking.run_name``, else what ran: ``<model>[-<attention>]-<data>[-seed<N>]`` (e.g.
    ``bahdanau-additive-dates``, ``luong-concat-reverse-seed2``); the seed where the command line sets it."""
    if cfg.tracking.get("run_name"):
        return str(cfg.tracking.run_name)
    parts = [str(cfg.model.name)]
    if cfg.model.get("attention"):
        parts.append(str(cfg.model.attention))
    parts.append(str(cfg.data.name))
    if any(o.lstrip("+~").startswith("seed=") for o in command_line_overrides()):
        parts.append(f"seed{cfg.seed}")
    return "-".join(parts)


def command() -> str:
    import shlex

    return " ".join(["python train.py", *(shlex.quote(o) for o in command_line_overrides())])


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:500]


@contextlib.contextmanager
def open_run(cfg, task, model, uri: str, checkpoint_root: str, resume_run=None,
             is_chief: bool = True) -> Iterator[Optional[str]]:
    """The run the stages log into; yields its id (None on a worker other than the chief)."""
    if not is_chief:
        yield None
        return
    import mlflow

    from zoo.tracking import log_config, mlflow_run, set_description

    run_id = resume_run.info.run_id if resume_run is not None else None
    _SPENT["seconds"] = 0.0
    started = time.perf_counter()
    with mlflow_run(uri, cfg.tracking.experiment, run_name=run_name(cfg) if run_id is None else None, run_id=run_id,
                    system_metrics=bool(cfg.tracking.get("system_metrics"))) as run:
        run_id = run.info.run_id
        where = os.path.abspath(os.path.join(checkpoint_root, run_id))
        if resume_run is None:
            print(f"MLflow run {run_id} ({run.info.run_name}) in {uri}", flush=True)
            log_config(cfg, extra_tags={k: v for k, v in (("zoo.data_sha256", task.fingerprint),
                                                           ("zoo.data_attribution", task.attribution)) if v})
            mlflow.log_params({f"stats.{k}": v for k, v in task.stats().items()})
            mlflow.log_metric("num_params", model.count_params())
            if hasattr(model, "decoding_cache_bytes") and getattr(task, "max_target_length", None):
                # the decoder's self-attention cache of one sentence at the longest target: what shared
                # key-value heads (model.num_kv_heads) and windows (model.attention_window) shrink
                mlflow.log_metric("decoding_cache_bytes", model.decoding_cache_bytes(task.max_target_length))
            log_datasets(cfg, task)
            set_description(f"Training. Command: `{command()}`")
        else:
            print(f"MLflow run {run_id} in {uri}: resumed", flush=True)
            resumes = int(resume_run.data.tags.get("zoo.resumes", "0")) + 1
            mlflow.set_tag("zoo.resumes", str(resumes))
            for tag in ("zoo.error", "zoo.stopped"):  # of the session that ended
                if tag in resume_run.data.tags:
                    mlflow.MlflowClient().delete_tag(run_id, tag)
        mlflow.set_tags({CHECKPOINT_TAG: where, PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()})
        global _buffer
        _buffer = MetricBuffer(run_id, uri, _output_dir())
        _SPENT["seconds"] += time.perf_counter() - started
        try:
            yield run_id
            _timed(_buffer.flush)(final=True)
        except (Interrupted, StopTraining) as stop:
            mlflow.set_tag("zoo.stopped", str(stop))
            raise
        except Exception as error:
            mlflow.set_tag("zoo.error", first_line(error))
            raise
        finally:
            _buffer = None


def _output_dir() -> str:
    """The run's output directory (Hydra's, where train.py writes its log), else the working directory."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return str(HydraConfig.get().runtime.output_dir)
    except Exception:  # noqa: BLE001 - no Hydra app around (tests, notebooks)
        pass
    return os.getcwd()


@_timed
def log_datasets(cfg, task) -> None:
    """Each split in the run's Datasets section: the data's name, a digest of the split's text, its source
    (the corpus file and its sha256, or the generator and seed), and its size."""
    from zoo.tracking import digest_texts, log_dataset

    if task.fingerprint:
        source = f"{task.info.get('corpus_file', cfg.data.name)} (sha256 {task.fingerprint[:16]})"
    else:
        source = f"generated by zoo.data.{cfg.data.name} (seed {cfg.data.get('seed', cfg.seed)})"
    contexts = {"train": "training", "val": "validation", "test": "testing"}
    for split, texts, profile in task.split_texts():
        log_dataset(f"{cfg.data.name}-{split}", digest_texts(texts), source, contexts.get(split, split), profile)


@_timed
def finish(summary: str, run_id: str, cfg, objective: str) -> None:
    """The run's description (the one-line result and the command), its objective (tag ``zoo.objective``,
    the metric sweeps compare) and, with ``tracking.register_as``, a new version of that registered model
    with the alias ``tracking.alias``."""
    import mlflow

    from zoo.tracking import set_description

    set_description(f"{summary}\n\nCommand: `{command()}`")
    mlflow.set_tag("zoo.objective", objective)
    if cfg.tracking.get("register_as"):
        register(run_id, str(cfg.tracking.register_as), str(cfg.tracking.alias))


def register(run_id: str, name: str, alias: str) -> str:
    """Registers ``runs:/<run_id>/model`` as a new version of ``name`` and points ``alias`` at it."""
    import mlflow

    from zoo.tracking import register_model

    version = register_model(run_id, name, alias)
    print(f"Registered as {name} version {version}: models:/{name}@{alias}", flush=True)
    mlflow.set_tag("zoo.registered_as", f"{name}/{version}@{alias}")
    return version


@_timed
def log_epoch(record: Dict[str, float], epoch: int) -> None:
    """One epoch's record at step ``epoch`` (1-based). Inside ``open_run`` it goes through the run's
    ``MetricBuffer``: a tracking server that stops answering does not stop training; the records are
    kept and sent when it answers again (``zoo.tracking.buffer``)."""
    if _buffer is not None:
        _buffer.log(record, step=epoch)
        return
    import mlflow

    mlflow.log_metrics({k: float(v) for k, v in record.items()}, step=epoch)


def epoch_logger(then=None):
    """``log_epoch``, followed by ``then(record, epoch)`` when given (a search's pruning hook)."""
    if then is None:
        return log_epoch

    def on_epoch(record: Dict[str, float], epoch: int) -> None:
        log_epoch(record, epoch)
        then(record, epoch)

    return on_epoch


@_timed
def log_unlogged_epochs(run_id: str, history: List[Dict[str, float]]) -> None:
    """The checkpoint's epoch records that a kill kept from the run (written before logged)."""
    import mlflow

    logged = {m.step for m in mlflow.MlflowClient().get_metric_history(run_id, "train_loss")}
    for epoch, record in enumerate(history, start=1):
        if epoch not in logged:
            log_epoch(record, epoch)


@_timed
def log_metrics(metrics: Dict[str, float]) -> None:
    import mlflow

    mlflow.log_metrics({k: float(v) for k, v in metrics.items()})


@_timed
def log_files(paths) -> None:
    """Files at the root of the run's artifacts, directories under their own name."""
    from zoo.tracking import log_files as log

    log(paths)


@_timed
def log_pyfunc(saved_dir: str) -> None:
    from zoo.export.pyfunc import log_pyfunc as log

    log(saved_dir)
