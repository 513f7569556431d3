"""MLflow: tracking URI, run lifecycle (FAILED/KILLED on errors), params, tags, and logging what it is handed."""

from zoo.tracking.outputs import active_run_tags, log_files, log_scores
from zoo.tracking.runs import (
    git_commit,
    log_config,
    mlflow_run,
    resolve_tracking_uri,
    ui_command,
)

__all__ = ["active_run_tags", "log_files", "log_scores", "git_commit", "log_config", "mlflow_run",
           "resolve_tracking_uri", "ui_command"]
