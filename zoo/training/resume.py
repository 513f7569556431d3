"""``trainer.resume=<run id>|last``: which run to continue, and whether it may be continued.

Runs before TensorFlow is imported: a refusal is one line and exit code 2, in a second.
"""

from __future__ import annotations

import os
import socket
from typing import Optional

from omegaconf import DictConfig

from zoo.config import flatten
from zoo.errors import ConfigError
from zoo.tracking.runs import MAX_PARAM_LENGTH

# Keys that change the model or what it learns from: a checkpoint only fits a run with the same values.
MODEL_KEYS = ("model.", "data.", "seed", "optimizer.name", "trainer.precision")
PID_TAG, HOST_TAG, CHECKPOINT_TAG = "zoo.pid", "zoo.host", "zoo.checkpoint_dir"


def _param(value) -> str:
    return "null" if value is None else str(value)


def _alive(run) -> Optional[int]:
    """The pid of the process still running ``run`` on this machine, if there is one."""
    tags = run.data.tags
    if tags.get(HOST_TAG) != socket.gethostname() or not tags.get(PID_TAG, "").isdigit():
        return None
    pid = int(tags[PID_TAG])
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    try:  # a zombie (killed, not yet reaped by its parent) is not running
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                return None
    except OSError:
        pass
    return pid


def find_run(uri: str, experiment: str, resume: str):
    """The MLflow run ``trainer.resume`` names; ConfigError when it cannot be continued."""
    import mlflow
    from mlflow.exceptions import MlflowException

    client = mlflow.MlflowClient(uri)
    if resume == "last":
        found = client.get_experiment_by_name(experiment)
        runs = client.search_runs([found.experiment_id], order_by=["attributes.start_time DESC"],
                                  max_results=200) if found else []
        runs = [r for r in runs if r.info.status != "FINISHED"]
        if not runs:
            raise ConfigError(f"trainer.resume=last: experiment '{experiment}' in {uri} has no unfinished run "
                              f"to continue.")
        run = runs[0]
    else:
        try:
            run = client.get_run(resume)
        except MlflowException:
            raise ConfigError(f"trainer.resume={resume}: no run with this id in {uri}.") from None
    if run.info.status == "FINISHED":
        raise ConfigError(f"trainer.resume={run.info.run_id}: the run is FINISHED; start a new run instead "
                          f"(trainer.resume=null).")
    pid = _alive(run)
    if pid is not None:
        raise ConfigError(f"trainer.resume={run.info.run_id}: the run is still being trained by process {pid} "
                          f"on this machine.")
    return run


def check_config(run, cfg: DictConfig) -> None:
    """Refuses a config that differs from the run's in a key of ``MODEL_KEYS``, naming both values."""
    params = run.data.params
    current = {k: _param(v) for k, v in flatten(cfg).items()}
    keys = sorted(set(params) | set(current))
    for key in keys:
        if not (key.startswith(MODEL_KEYS[:2]) or key in MODEL_KEYS[2:]):
            continue
        before, now = params.get(key, "(absent)"), current.get(key, "(absent)")[:MAX_PARAM_LENGTH]
        if before != now:
            raise ConfigError(f"trainer.resume={run.info.run_id}: {key} was {before} in the run and is {now} now; "
                              f"resume with the run's own overrides ({run.data.tags.get('zoo.overrides', '')}).")


def checkpoint_dir(run) -> Optional[str]:
    return run.data.tags.get(CHECKPOINT_TAG)
