"""Compare runs: ``python -m zoo.compare [--experiment attention-zoo] [--data dates] [--metric test_exact_match]``.

Prints a Markdown table of the finished runs in the MLflow store (``MLFLOW_TRACKING_URI`` or
``sqlite:///mlflow.db``): model, attention, the metric, BLEU, training time, parameters, run id;
the newest run per (model, attention, data) unless ``--all``. Paste it into docs or a README:
it is produced from the store, not typed in. Scores are formatted by their metric in
``zoo.metrics`` (0-100 scores with 2 decimals, 0-1 scores with 4); ``--rank`` orders the rows best
first by ``--metric`` in its direction (higher or lower is better) instead of by data and model.

``--by-length`` compares the same runs by source length instead: it reads each run's
``by_length/test.csv`` (logged by every training run), prints the metric (any metric of
``zoo.metrics`` scored by length) per length bin and model, draws every model's curve in one
figure, and logs figure and tables as artifacts of a new run ``compare-<data>`` (tag
``zoo.kind=comparison``) in the same experiment, so the plot is a run artifact. ``--out fig.png``
also writes the figure there; ``--no-log`` logs nothing.

    python -m zoo.compare --data reverse --by-length
    python -m zoo.compare --data tatoeba --by-length --metric test_bleu
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import Dict, List, Optional

import zoo.metrics
from zoo.config import compare_problems, print_errors
from zoo.evaluation.by_length import columns, read_csv
from zoo.plots import metric_by_length
from zoo.tracking import mlflow_run, resolve_tracking_uri

COMPARISON_KIND = "comparison"


def _attention(run) -> str:
    attention = run.get("params.model.attention")
    return attention if isinstance(attention, str) and attention not in ("", "None", "null") else "-"


def newest_runs(experiment="attention-zoo", data=None, metric="test_exact_match", all_runs=False, uri=None) -> list:
    """Finished runs with ``metric``, newest first; the newest per (model, attention, data) unless ``all_runs``.

    Comparison runs (tag ``zoo.kind=comparison``) are left out. Returns pandas rows.
    """
    import mlflow

    mlflow.set_tracking_uri(resolve_tracking_uri(uri))
    runs = mlflow.search_runs(experiment_names=[experiment], filter_string="attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"])
    if runs.empty:
        return []
    if data:
        runs = runs[runs.get("tags.zoo.data") == data]
    out, seen = [], set()
    for _, run in runs.iterrows():
        if run.get("tags.zoo.kind") == COMPARISON_KIND:
            continue
        if f"metrics.{metric}" not in run or run[f"metrics.{metric}"] != run[f"metrics.{metric}"]:
            continue
        key = (run.get("tags.zoo.model"), _attention(run), run.get("tags.zoo.data"))
        if key in seen and not all_runs:
            continue
        seen.add(key)
        out.append(run)
    return out


def _markdown(header: List[str], rows: List[List[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def _order(runs: list, metric: str, rank: bool, name) -> list:
    """``runs`` by ``name(run)``, or best first by ``metric`` (in its direction) where ``rank``."""
    spec = zoo.metrics.lookup(metric)
    if rank and spec is not None:
        return sorted(runs, key=lambda run: (spec.rank_key(run.get(f"metrics.{metric}")), name(run)))
    return sorted(runs, key=name)


def table(experiment="attention-zoo", data=None, metric="test_exact_match", all_runs=False, uri=None, rank=False):
    """The Markdown table of ``newest_runs`` (see the module docstring); None when there are none."""
    runs = newest_runs(experiment, data, metric, all_runs, uri)
    if not runs:
        return None
    runs = _order(runs, metric, rank, lambda r: (r.get("tags.zoo.data"), r.get("tags.zoo.model"), _attention(r)))
    rows = [[run.get("tags.zoo.model"), _attention(run), run.get("tags.zoo.data"),
             zoo.metrics.format_value(metric, run[f"metrics.{metric}"], precise=True),
             zoo.metrics.format_value("test_bleu", run.get("metrics.test_bleu")),
             f"{run.get('metrics.train_seconds', float('nan')):.0f}",
             f"{int(run.get('metrics.num_params', 0)):,}", run["run_id"][:8]] for run in runs]
    header = ["model", "attention", "data", metric, "test_bleu", "train s", "params", "run"]
    return _markdown(header, rows)


def _label(run) -> str:
    attention = _attention(run)
    return run.get("tags.zoo.model") + (f" ({attention})" if attention != "-" else "")


def by_length(experiment="attention-zoo", data=None, metric="test_exact_match", uri=None, split="test",
              log=True, out=None, rank=False) -> Optional[Dict[str, object]]:
    """Compares the newest run per model by source length (see the module docstring).

    Returns ``{"table": markdown, "series": {label: rows}, "figure": path or None, "run_id": id or None}``,
    or None when no run has a ``by_length/<split>.csv``. ``rank`` orders the models best first by
    the metric over the whole split.
    """
    import mlflow

    uri = resolve_tracking_uri(uri)
    column = metric[len(split) + 1:] if metric.startswith(f"{split}_") else metric
    available = zoo.metrics.by_length_names()
    if column not in available:
        raise ValueError(f"--metric {metric} has no scores by length. Available: "
                         f"{', '.join(f'{split}_{c}' for c in available)}")
    spec = zoo.metrics.get(column)
    runs = newest_runs(experiment, data, f"{split}_exact_match", uri=uri)
    runs = _order(runs, f"{split}_{column}", rank, lambda r: (r.get("tags.zoo.data"), _label(r)))
    series, compared, missing = {}, [], []
    with tempfile.TemporaryDirectory() as workdir:
        for run in runs:
            label = _label(run) if data else f"{_label(run)}, {run.get('tags.zoo.data')}"
            try:
                path = mlflow.artifacts.download_artifacts(run_id=run["run_id"], artifact_path=f"by_length/{split}.csv",
                                                           dst_path=os.path.join(workdir, run["run_id"]), tracking_uri=uri)
            except Exception:  # noqa: BLE001 - MLflow raises several types for a missing artifact
                missing.append(f"{label} ({run['run_id'][:8]})")
                continue
            series[label] = read_csv(path)
            compared.append(run)
        if missing:
            print(f"No by_length/{split}.csv (run from before it was logged): {', '.join(missing)}", file=sys.stderr)
        if not series:
            return None

        bins = []
        for rows in series.values():
            bins += [(r["min_length"], r["max_length"], r["bin"]) for r in rows if (r["min_length"], r["max_length"], r["bin"]) not in bins]
        bins.sort()
        header = ["model", *[b[2] for b in bins], f"all ({split}_{column})", "train s", "run"]
        rows = []
        for (label, run_rows), run in zip(series.items(), compared):
            cells = {r["bin"]: r[column] for r in run_rows}
            overall = run.get(f"metrics.{split}_{column}", float("nan"))
            rows.append([label, *[spec.format(cells.get(b[2])) for b in bins], spec.format(overall),
                         f"{run.get('metrics.train_seconds', float('nan')):.0f}", run["run_id"][:8]])
        counts = {r["bin"]: r["count"] for r in next(iter(series.values()))}
        rows.append(["examples", *[str(counts.get(b[2], "")) for b in bins], "", "", ""])
        markdown = _markdown(header, rows)

        data_name = data or "all"
        figure = os.path.join(workdir, "by_length.png")
        panels = [column] + (["token_accuracy"] if column != "token_accuracy" else [])
        metric_by_length(series, figure, metrics=panels,
                         title=f"{data_name}: {split} {column.replace('_', ' ')} by source length")
        long_csv = os.path.join(workdir, "by_length.csv")
        names = columns()
        with open(long_csv, "w", encoding="utf-8") as f:
            f.write("model,run_id," + ",".join(names) + "\n")
            for (label, run_rows), run in zip(series.items(), compared):
                for r in run_rows:
                    f.write(f"\"{label}\",{run['run_id']}," + ",".join("" if r[c] is None else str(r[c]) for c in names) + "\n")
        result = {"table": markdown, "series": series, "figure": None, "run_id": None}
        if out:
            os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
            shutil.copyfile(figure, out)
            result["figure"] = out
        if log:
            tags = {"zoo.kind": COMPARISON_KIND, "zoo.data": data_name, "zoo.compare.metric": f"{split}_{column}",
                    "zoo.compared_runs": ",".join(run["run_id"] for run in compared)}
            with mlflow_run(uri, experiment, run_name=f"compare-{data_name}", tags=tags) as run:
                mlflow.log_artifact(figure)
                mlflow.log_artifact(long_csv)
                mlflow.log_text(markdown + "\n", "by_length.md")
                mlflow.log_text((table(experiment, data, f"{split}_exact_match", uri=uri) or "") + "\n", "runs.md")
                result["run_id"] = run.info.run_id
                result["figure"] = result["figure"] or f"runs:/{run.info.run_id}/by_length.png"
        return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", default="attention-zoo")
    parser.add_argument("--data", default=None, help="only runs on this data (tag zoo.data)")
    parser.add_argument("--metric", default="test_exact_match")
    parser.add_argument("--all", action="store_true", help="every run, not only the newest per model")
    parser.add_argument("--rank", action="store_true",
                        help="best first by --metric (its direction in zoo.metrics), not by data and model")
    parser.add_argument("--by-length", action="store_true",
                        help="the metric by source length, as a table and a figure logged to a new run")
    parser.add_argument("--out", default=None, help="with --by-length: also write the figure to this file")
    parser.add_argument("--no-log", action="store_true", help="with --by-length: do not log a comparison run")
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args(argv)
    found = compare_problems(args.data, args.metric, args.tracking_uri, args.by_length, args.out, args.no_log,
                             by_length_metrics=zoo.metrics.by_length_names())
    if found:
        print_errors(found)
        return 2
    if args.by_length:
        try:
            result = by_length(args.experiment, args.data, args.metric, args.tracking_uri, log=not args.no_log,
                               out=args.out, rank=args.rank)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if result is None:
            print(f"No finished runs with scores by length in experiment '{args.experiment}'"
                  f"{f' on data {args.data}' if args.data else ''}.", file=sys.stderr)
            return 1
        print(result["table"])
        if result["run_id"]:
            print(f"\nLogged to MLflow run {result['run_id']} (compare-{args.data or 'all'}): by_length.png, "
                  f"by_length.csv, by_length.md, runs.md")
        if args.out:
            print(f"Figure: {args.out}")
        return 0
    out = table(args.experiment, args.data, args.metric, args.all, args.tracking_uri, rank=args.rank)
    if out is None:
        print(f"No finished runs in experiment '{args.experiment}'.", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
