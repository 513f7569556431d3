"""The MLflow run contract (docs/design.md): one place that starts, fills and ends runs."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

from omegaconf import DictConfig, OmegaConf

from zoo.config import flatten, redacted

MAX_PARAM_LENGTH = 6000


def resolve_tracking_uri(uri: Optional[str]) -> str:
    """``MLFLOW_TRACKING_URI`` if set, else ``uri``; a relative SQLite path becomes absolute.

    Never the deprecated file store: a plain path or ``file:`` URI is refused with the fix.
    """
    uri = os.environ.get("MLFLOW_TRACKING_URI") or uri or "sqlite:///mlflow.db"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        path = Path(uri[len("sqlite:///"):])
        uri = "sqlite:///" + str(path.resolve())
    elif "://" not in uri or uri.startswith("file:"):
        raise ValueError(f"tracking.uri={uri!r} is a file store, which MLflow no longer supports for runs. "
                         f"Use a database, e.g. tracking.uri=sqlite:///mlflow.db, or a server http://host:port.")
    return uri


def ui_command(uri: str) -> str:
    """The command that opens the MLflow UI on this store."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri} in a browser"
    return f"mlflow ui --host 127.0.0.1 --backend-store-uri {uri}"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _command_line_overrides() -> str:
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return " ".join(HydraConfig.get().overrides.task)
    except Exception:  # noqa: BLE001 - no Hydra app around (tests, notebooks)
        pass
    return " ".join(sys.argv[1:])


def _quiet_mlflow() -> None:
    for name in ("alembic", "mlflow.store.db.utils", "mlflow.tracking.fluent", "mlflow.store"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _prepare_store(tracking_uri: str) -> None:
    """Creates (migrates) a SQLite store under a file lock, so parallel jobs can share a new one.

    Two processes that open a fresh SQLite store at once both run MLflow's schema migration, and
    one fails with ``duplicate column name``; a lock beside the database serializes the first opening.
    """
    if not tracking_uri.startswith("sqlite:///"):
        return
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, MLflow's own behaviour
        return
    import mlflow

    db = Path(tracking_uri[len("sqlite:///"):])
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(str(db) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            mlflow.MlflowClient(tracking_uri).search_experiments(max_results=1)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def mlflow_run(tracking_uri: str, experiment: str, run_name: Optional[str] = None, run_id: Optional[str] = None,
               tags: Optional[Dict[str, str]] = None) -> Iterator[Any]:
    """Starts (or resumes, with ``run_id``) a run; ends it FINISHED, FAILED or KILLED."""
    import mlflow

    _quiet_mlflow()
    _prepare_store(tracking_uri)
    mlflow.set_tracking_uri(tracking_uri)
    if run_id is None:
        mlflow.set_experiment(experiment)
    run = mlflow.start_run(run_id=run_id, run_name=run_name, tags=tags)
    try:
        yield run
    except KeyboardInterrupt:
        mlflow.end_run(status="KILLED")
        raise
    except BaseException:
        mlflow.end_run(status="FAILED")
        raise
    else:
        mlflow.end_run(status="FINISHED")


def log_config(cfg: DictConfig, extra_tags: Optional[Dict[str, str]] = None) -> None:
    """Params = the flattened resolved config; tags = model, data, commit, overrides; config.yaml."""
    import mlflow

    cfg = redacted(cfg)  # no credentials of tracking.uri (MLFLOW_TRACKING_URI) in params or config.yaml
    params = {k: (str(v)[:MAX_PARAM_LENGTH] if v is not None else "null") for k, v in flatten(cfg).items()}
    mlflow.log_params(params)
    tags = {
        "zoo.model": str(cfg.model.name),
        "zoo.data": str(cfg.data.name),
        "mlflow.source.git.commit": git_commit(),
        "zoo.git_commit": git_commit(),
        "zoo.overrides": _command_line_overrides(),
    }
    tags.update(extra_tags or {})
    mlflow.set_tags(tags)
    mlflow.log_text(OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")
