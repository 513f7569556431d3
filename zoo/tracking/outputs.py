"""Logging what it is handed to the active MLflow run: a split's scores, signature tags, files.

What to log is computed above this layer (``zoo.evaluation.report`` writes predictions, heatmaps
and scores by source length); these functions only hand them to MLflow.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, Mapping, Optional


def log_scores(split: str, metrics: Mapping[str, float], signatures: Optional[Mapping[str, str]] = None) -> None:
    """``<split>_<name>`` metrics and ``zoo.<name>`` tags (sacreBLEU's signatures) on the active run."""
    import mlflow

    mlflow.log_metrics({f"{split}_{k}": v for k, v in metrics.items()})
    if signatures:
        mlflow.set_tags({f"zoo.{k}": v for k, v in signatures.items()})


def log_files(paths: Iterable[str]) -> None:
    """Each file at the root of the active run's artifacts, each directory under its own name."""
    import mlflow

    for path in paths:
        path = str(path)
        if os.path.isdir(path):
            mlflow.log_artifacts(path, os.path.basename(os.path.normpath(path)))
        else:
            mlflow.log_artifact(path)


def active_run_tags() -> Dict[str, str]:
    """The tags of the active run (``zoo.model``, ``zoo.data``, ...)."""
    import mlflow

    return dict(mlflow.get_run(mlflow.active_run().info.run_id).data.tags)

