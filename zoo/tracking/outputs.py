"""Logging a scored split to the active MLflow run: metrics, signatures, predictions, heatmaps."""

from __future__ import annotations

import csv
from pathlib import Path


def _write_predictions(path: Path, sources, references, hypotheses) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["source", "reference", "hypothesis", "correct"])
        for s, r, h in zip(sources, references, hypotheses):
            writer.writerow([s, r, h, int(r == h)])


def log_outputs(split_name, sources, references, metrics, signatures, outputs, n_plots, n_predictions, workdir,
                attribution=None):
    """Logs ``<split>_*`` metrics, signatures, predictions.csv and attention heatmaps to the active run."""
    import mlflow

    from zoo.plots import attention_heatmap

    mlflow.log_metrics({f"{split_name}_{k}": v for k, v in metrics.items()})
    mlflow.set_tags({f"zoo.{k}": v for k, v in signatures.items()})
    pred_path = Path(workdir) / "predictions.csv"
    _write_predictions(pred_path, sources[:n_predictions], references[:n_predictions], outputs["text"][:n_predictions])
    mlflow.log_artifact(str(pred_path))
    plot_dir = Path(workdir) / "attention"
    plot_dir.mkdir(exist_ok=True)
    for i in range(min(n_plots, len(sources))):
        attention_heatmap(outputs["attention"][i], outputs["source_tokens"][i], outputs["target_tokens"][i],
                          str(plot_dir / f"{split_name}_{i:02d}.png"),
                          title=f"{sources[i]!r} -> {outputs['text'][i]!r} (ref {references[i]!r})",
                          footnote=attribution or "")
    if n_plots:
        mlflow.log_artifacts(str(plot_dir), "attention")
