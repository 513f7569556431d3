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
                attribution=None, target_tokenizer=None):
    """Logs ``<split>_*`` metrics, signatures, predictions.csv, attention heatmaps and the scores by
    source length (``by_length/<split>.csv`` and ``.png``) to the active run.

    ``target_tokenizer`` (the task's) splits the references into tokens for the token accuracy
    by length; without it that column stays empty.
    """
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
    # BLEU by length only where BLEU means something: one-word references (data=reverse) score 0.
    panels = ("exact_match", "token_accuracy", "chrf") + (("bleu",) if metrics.get("bleu", 0) > 0 else ())
    log_by_length(split_name, references, outputs, workdir, target_tokenizer=target_tokenizer, footnote=attribution,
                  panels=panels)


def log_by_length(split_name, references, outputs, workdir, target_tokenizer=None, footnote=None,
                  panels=("exact_match", "token_accuracy", "chrf")):
    """``by_length/<split>.csv`` and ``by_length/<split>.png``: the split's scores by source length,
    from the predictions in ``outputs`` (what ``score_split`` returns). Returns the rows."""
    import mlflow

    from zoo.evaluation.by_length import by_length, content_tokens, token_lengths, write_csv
    from zoo.plots import metric_by_length

    reference_tokens = target_tokenizer.python_split(list(references)) if target_tokenizer is not None else None
    rows = by_length(token_lengths(outputs["source_tokens"]), outputs["text"], references,
                     hypothesis_tokens=content_tokens(outputs["target_tokens"]), reference_tokens=reference_tokens)
    directory = Path(workdir) / "by_length"
    directory.mkdir(exist_ok=True)
    write_csv(rows, str(directory / f"{split_name}.csv"))
    run = mlflow.get_run(mlflow.active_run().info.run_id)
    metric_by_length({run.data.tags.get("zoo.model", split_name): rows}, str(directory / f"{split_name}.png"),
                     metrics=panels,
                     title=f"{split_name} split by source length", footnote=footnote or "")
    mlflow.log_artifacts(str(directory), "by_length")
    return rows
