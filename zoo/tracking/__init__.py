"""MLflow: tracking URI, run lifecycle (FAILED/KILLED on errors), params, tags, artifacts."""

from zoo.tracking.outputs import log_outputs
from zoo.tracking.runs import (
    git_commit, log_config, mlflow_run, resolve_tracking_uri, ui_command,
)

__all__ = ["log_outputs", "git_commit", "log_config", "mlflow_run", "resolve_tracking_uri", "ui_command"]
