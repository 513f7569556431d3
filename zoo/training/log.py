"""Stage ``log``: the MLflow run around the other stages (chief only), and what goes into it.

The one module of the engine that calls ``zoo.tracking``. A new run gets the config, the data's
statistics and tags; a resumed run (``trainer.resume``) is the same run started again, with the
epochs a kill left unlogged logged first. Whatever ends the run sets its status: FINISHED;
KILLED on a signal (tag ``zoo.stopped``); FAILED on an error (tag ``zoo.error``, its first line).
"""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Dict, Iterator, List, Optional

from zoo.tracking.buffer import MetricBuffer
from zoo.training.resume import CHECKPOINT_TAG, HOST_TAG, PID_TAG
from zoo.training.signals import Interrupted

_buffer: Optional[MetricBuffer] = None  # the open run's metric buffer (open_run sets it)


def tracking_uri(cfg) -> str:
    from zoo.tracking import resolve_tracking_uri

    return resolve_tracking_uri(cfg.tracking.uri)


def ui_command(uri: str) -> str:
    from zoo.tracking import ui_command as command

    return command(uri)


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

    from zoo.tracking import log_config, mlflow_run

    run_id = resume_run.info.run_id if resume_run is not None else None
    with mlflow_run(uri, cfg.tracking.experiment, run_name=cfg.tracking.run_name, run_id=run_id) as run:
        run_id = run.info.run_id
        where = os.path.abspath(os.path.join(checkpoint_root, run_id))
        if resume_run is None:
            print(f"MLflow run {run_id} in {uri}", flush=True)
            log_config(cfg, extra_tags={k: v for k, v in (("zoo.data_sha256", task.fingerprint),
                                                           ("zoo.data_attribution", task.attribution)) if v})
            mlflow.log_params({f"stats.{k}": v for k, v in task.stats().items()})
            mlflow.log_metric("num_params", model.count_params())
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
        try:
            yield run_id
            _buffer.flush(final=True)
        except Interrupted as stop:
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


def log_epoch(record: Dict[str, float], epoch: int) -> None:
    """One epoch's record at step ``epoch`` (1-based). Inside ``open_run`` it goes through the run's
    ``MetricBuffer``: a tracking server that stops answering does not stop training; the records are
    kept and sent when it answers again (``zoo.tracking.buffer``)."""
    if _buffer is not None:
        _buffer.log(record, step=epoch)
        return
    import mlflow

    mlflow.log_metrics({k: float(v) for k, v in record.items()}, step=epoch)


def log_unlogged_epochs(run_id: str, history: List[Dict[str, float]]) -> None:
    """The checkpoint's epoch records that a kill kept from the run (written before logged)."""
    import mlflow

    logged = {m.step for m in mlflow.MlflowClient().get_metric_history(run_id, "train_loss")}
    for epoch, record in enumerate(history, start=1):
        if epoch not in logged:
            log_epoch(record, epoch)


def log_metrics(metrics: Dict[str, float]) -> None:
    import mlflow

    mlflow.log_metrics({k: float(v) for k, v in metrics.items()})


def log_files(paths) -> None:
    """Files at the root of the run's artifacts, directories under their own name."""
    from zoo.tracking import log_files as log

    log(paths)


def log_pyfunc(saved_dir: str) -> None:
    from zoo.export.pyfunc import log_pyfunc as log

    log(saved_dir)
