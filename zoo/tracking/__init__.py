"""MLflow: tracking URI, run lifecycle (FAILED/KILLED on errors), params, tags, and logging what it is handed."""

from zoo.tracking.outputs import active_run_tags, log_files, log_scores
from zoo.tracking.runs import (
    SWEEP_PARENT_VARIABLE,
    child_runs,
    command_line_overrides,
    digest_texts,
    end_detached_run,
    environment,
    git_commit,
    log_config,
    log_dataset,
    metric_history,
    mlflow_run,
    register_model,
    resolve_tracking_uri,
    set_description,
    start_detached_run,
    sweep_parent_id,
    tracking_credentials,
    ui_command,
    use_tracking_uri,
)

__all__ = ["child_runs", "end_detached_run", "metric_history", "start_detached_run", "SWEEP_PARENT_VARIABLE", "active_run_tags", "command_line_overrides", "digest_texts", "environment",
           "git_commit", "log_config", "log_dataset", "log_files", "log_scores", "mlflow_run", "register_model", "resolve_tracking_uri",
           "set_description", "sweep_parent_id", "tracking_credentials", "ui_command", "use_tracking_uri"]
