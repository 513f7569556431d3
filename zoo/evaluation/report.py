"""A scored split as files: ``predictions.csv``, attention heatmaps, scores by source length.

``write_report`` computes and writes into a directory and returns what it wrote; ``log_outputs``
(training and evaluate.py) writes the report and hands scores and files to ``zoo.tracking``, which
logs them to the active MLflow run (README, "What a run records")::

    <split>_<metric>            metrics, one per score
    zoo.<name>_signature        tags, sacreBLEU's signatures
    predictions.csv             source, reference, hypothesis, correct (the first n_predictions)
    attention/<split>_NN.png    heatmaps of the first n_plots examples
    attention/explorer.html     the same examples to explore in a browser (zoo.plots.explorer)
    by_length/<split>.csv|png   every by-length metric of zoo.metrics per source-length bin
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

import zoo.metrics
from zoo.evaluation.by_length import by_length, content_tokens, token_lengths, write_csv
from zoo.tracking import active_run_tags, log_files, log_scores


@dataclass
class Report:
    """What ``write_report`` wrote: ``paths`` (files and directories, each to be logged at the
    root of a run's artifacts under its own name) and the rows of ``by_length/<split>.csv``."""

    paths: List[str] = field(default_factory=list)
    by_length: List[Dict[str, object]] = field(default_factory=list)


def write_predictions(path, sources: Sequence[str], references: Sequence[str], hypotheses: Sequence[str]) -> str:
    """``source, reference, hypothesis, correct`` (1 for an exact match) per example; returns ``path``."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["source", "reference", "hypothesis", "correct"])
        for s, r, h in zip(sources, references, hypotheses):
            writer.writerow([s, r, h, int(r == h)])
    return str(path)


def write_heatmaps(directory, split: str, sources: Sequence[str], references: Sequence[str], outputs, count: int,
                   footnote: str = "") -> List[str]:
    """``<directory>/<split>_NN.png``: the attention of the first ``count`` examples, titled with
    source, hypothesis and reference; returns the paths."""
    from zoo.plots import attention_heatmap

    Path(directory).mkdir(parents=True, exist_ok=True)
    return [attention_heatmap(outputs["attention"][i], outputs["source_tokens"][i], outputs["target_tokens"][i],
                              str(Path(directory) / f"{split}_{i:02d}.png"),
                              title=f"{sources[i]!r} -> {outputs['text'][i]!r} (ref {references[i]!r})",
                              footnote=footnote or "")
            for i in range(min(count, len(sources)))]


def explorer_examples(sources: Sequence[str], references: Sequence[str], outputs, count: int,
                      extra_views: Optional[Sequence[Sequence[Dict]]] = None) -> List[Dict]:
    """The first ``count`` examples for ``zoo.plots.explorer``: each the decoder's attention over the
    source as it decoded (``outputs["attention"]``, rows the output tokens), then ``extra_views[i]``
    (e.g. a Transformer's layers and heads)."""
    from zoo.plots.explorer import view

    examples = []
    for i in range(min(count, len(sources))):
        views = [view("attention while decoding (output token -> source tokens)", outputs["target_tokens"][i],
                      outputs["source_tokens"][i], outputs["attention"][i])]
        views += list(extra_views[i]) if extra_views is not None and i < len(extra_views) else []
        examples.append({"title": f"{sources[i]} -> {outputs['text'][i]} (ref {references[i]})",
                         "key": f"{sources[i]} (ref {references[i]})", "views": views})
    return examples


def by_length_panels(metrics: Mapping[str, float]) -> List[str]:
    """The by-length metrics worth a panel for a split with overall scores ``metrics``: all but
    those whose 0 means undefined when the split scores 0 (BLEU on one-word references)."""
    return [name for name in zoo.metrics.by_length_names()
            if not (zoo.metrics.get(name).zero_is_undefined and not metrics.get(name, 0) > 0)]


def write_by_length(directory, split: str, references: Sequence[str], outputs, target_tokenizer=None,
                    label: Optional[str] = None, footnote: Optional[str] = None,
                    panels: Optional[Sequence[str]] = None) -> List[Dict[str, object]]:
    """``<directory>/<split>.csv`` and ``<split>.png``: the split's scores by source length, from the
    predictions in ``outputs`` (what ``score_split`` returns); returns the rows.

    ``target_tokenizer`` (the task's) splits the references into tokens for the token accuracy by
    length; without it that column stays empty. ``label`` names the curve (the model).
    """
    from zoo.plots import metric_by_length

    reference_tokens = target_tokenizer.python_split(list(references)) if target_tokenizer is not None else None
    rows = by_length(token_lengths(outputs["source_tokens"]), outputs["text"], references,
                     hypothesis_tokens=content_tokens(outputs["target_tokens"]), reference_tokens=reference_tokens)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_csv(rows, str(directory / f"{split}.csv"))
    metric_by_length({label or split: rows}, str(directory / f"{split}.png"),
                     metrics=tuple(panels) if panels is not None else tuple(zoo.metrics.by_length_names()),
                     title=f"{split} split by source length", footnote=footnote or "")
    return rows


def write_report(directory, split: str, sources: Sequence[str], references: Sequence[str],
                 metrics: Mapping[str, float], outputs, n_plots: int, n_predictions: int, attribution=None,
                 target_tokenizer=None, label: Optional[str] = None,
                 extra_views: Optional[Sequence[Sequence[Dict]]] = None) -> Report:
    """Writes ``predictions.csv``, ``attention/`` (when ``n_plots``: heatmaps and the explorer, with
    ``extra_views`` per example) and ``by_length/`` into ``directory`` for a split scored by
    ``score_split`` (``metrics``, ``outputs``); ``attribution`` (the corpus licence's) goes under every
    figure. Returns the ``Report``."""
    from zoo.plots.explorer import EXPLORER, write_explorer

    directory = Path(directory)
    report = Report()
    report.paths.append(write_predictions(directory / "predictions.csv", sources[:n_predictions],
                                          references[:n_predictions], outputs["text"][:n_predictions]))
    write_heatmaps(directory / "attention", split, sources, references, outputs, n_plots, footnote=attribution)
    if n_plots:
        write_explorer(directory / "attention" / EXPLORER,
                       explorer_examples(sources, references, outputs, n_plots, extra_views),
                       title=f"{label or 'attention'}: {split} split", footnote=attribution or "")
        report.paths.append(str(directory / "attention"))
    report.by_length = write_by_length(directory / "by_length", split, references, outputs,
                                       target_tokenizer=target_tokenizer, label=label, footnote=attribution,
                                       panels=by_length_panels(metrics))
    report.paths.append(str(directory / "by_length"))
    return report


def log_outputs(split_name, sources, references, metrics, signatures, outputs, n_plots, n_predictions, workdir,
                attribution=None, target_tokenizer=None, extra_views=None) -> Report:
    """Logs a scored split to the active run: ``<split>_*`` metrics, signature tags, and the files of
    ``write_report`` (written into ``workdir``); the by-length curve is named by the run's
    ``zoo.model`` tag. Returns the ``Report``."""
    log_scores(split_name, metrics, signatures)
    label = active_run_tags().get("zoo.model", split_name)
    report = write_report(workdir, split_name, sources, references, metrics, outputs, n_plots, n_predictions,
                          attribution=attribution, target_tokenizer=target_tokenizer, label=label,
                          extra_views=extra_views)
    log_files(report.paths)
    return report
