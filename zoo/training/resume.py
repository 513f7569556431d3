"""``trainer.resume=<run id>|last``: which run to continue, and whether it may be continued.

Runs before TensorFlow is imported: a refusal is one line and exit code 2, in a second.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

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


@dataclasses.dataclass
class Restored:
    """The checkpoint a resume continues from, already restored into the model and optimizer."""

    path: Path
    state: dict  # the loop state (``zoo.training.fit.LoopState`` fields)
    best_weights: Optional[List[Any]]
    rng: dict  # Python's and NumPy's RNG states, applied by ``continue_from``


def restore(run, checkpoint_root: str, model, optimizer, is_chief: bool = True) -> Optional[Restored]:
    """Restores the newest checkpoint of ``run`` that can be read into ``model`` and ``optimizer``;
    None when the run has none (it starts from epoch 1). Called before the run is opened again.

    A newer checkpoint that cannot be read (cut short, corrupt, from another configuration) is named in
    one line and set aside (``zoo.training.checkpoint.newest_readable``). When none can be read, raises
    ``ConfigError`` (one line): the run keeps its status, and nothing is deleted."""
    from zoo.training import checkpoint

    directory = checkpoint_dir(run) or os.path.join(str(checkpoint_root), run.info.run_id)
    try:
        found = checkpoint.newest_readable(directory, model, optimizer, set_rng=False, set_aside=is_chief)
    except checkpoint.Unreadable as error:
        raise ConfigError(f"trainer.resume={run.info.run_id}: {error}. The run stays {run.info.status} and nothing "
                          f"was deleted; start a new run (trainer.resume=null), or put a readable checkpoint "
                          f"there.") from None
    if found is None:
        return None
    path, state, best = found
    return Restored(path=path, state=state, best_weights=best, rng=checkpoint.rng_state(path))


def continue_from(restored: Optional[Restored], run_id: Optional[str], is_chief: bool = True,
                  log_unlogged: Optional[Callable[[str, list], None]] = None) -> Tuple[Any, Any]:
    """``(loop state, best weights)`` to continue ``restored`` in the reopened run ``run_id``, or
    ``(None, None)`` without a checkpoint. Applies the checkpoint's RNG states, logs the epochs a kill
    left unlogged (``log_unlogged(run_id, history)``: ``zoo.training.log.log_unlogged_epochs``), and
    marks the epochs the run already holds (a resume from an older checkpoint trains them again
    without logging them twice)."""
    if restored is None:
        return None, None
    from zoo.training import checkpoint
    from zoo.training.fit import LoopState

    checkpoint.set_rng_state(restored.rng)
    state = LoopState(**restored.state)
    print(f"Resuming from {restored.path} (epoch {state.epoch + 1}, step {state.global_step})", flush=True)
    if is_chief and run_id:
        if log_unlogged is not None:
            log_unlogged(run_id, state.history)
        state.logged_through = max(state.epoch, _logged_epochs(run_id))
    return state, restored.best_weights


def _logged_epochs(run_id: str) -> int:
    """The last epoch (``train_loss`` step) the run holds in MLflow; 0 when none or the store does not answer."""
    import mlflow

    try:
        return max((m.step for m in mlflow.MlflowClient().get_metric_history(run_id, "train_loss")), default=0)
    except Exception:  # noqa: BLE001 - a store that does not answer: the loop logs every epoch, as before
        return 0
