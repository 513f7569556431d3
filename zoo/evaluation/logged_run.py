"""The MLflow run an evaluation is logged to, the same for every task kind (``evaluate.py``).

The trained model's own run when ``evaluate.py`` names it (``run_id=``, ``model_uri=runs:/...``) and
scores it as it was trained; else a new run of the experiment ``<tracking.experiment>-evaluation``,
tagged with where the model came from (``zoo.model_source``) and the data it was scored on
(``zoo.data``), so the training run keeps the metrics of its own decoding.
"""

from __future__ import annotations

import contextlib
from typing import Optional

from zoo.tracking import mlflow_run, ui_command


@contextlib.contextmanager
def evaluation_run(cfg, uri: str, log_run_id: Optional[str], data_name: str):
    """Opens the run (``log_run_id``'s, or a new evaluation run when it is None) and yields it active; on
    leaving it prints the run's id and the command that opens the MLflow UI."""
    if log_run_id is not None:
        context = mlflow_run(uri, cfg.tracking.experiment, run_id=log_run_id)
    else:
        context = mlflow_run(uri, f"{cfg.tracking.experiment}-evaluation", tags={
            "zoo.model_source": str(cfg.get("run_id") or cfg.get("saved_model") or cfg.get("model_uri")),
            "zoo.data": str(data_name)})
    with context as run:
        yield run
    print(f"Logged to MLflow run {run.info.run_id}. Open the MLflow UI: {ui_command(uri)}")
