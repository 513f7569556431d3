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

On story QA (``--data story_qa``, any data whose config says ``task: qa``) the table has one
column per kind of question, each cell ``test accuracy / evidence``.

``--explorer`` puts the newest run of each model (and attention) side by side in one attention
explorer (``zoo.plots.explorer``): the test examples every run's ``attention/explorer.html`` shows,
each run's views in turn, logged as ``explorer.html`` of a new ``compare-<data>`` run (``--out
page.html`` also writes it there; ``--no-log`` logs nothing)::

    python -m zoo.compare --data dates --explorer
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import Dict, List, Optional

from hydra.experimental.callback import Callback

import zoo.metrics
from zoo import catalog
from zoo.catalog import CONF_DIR
from zoo.config import compare_problems, print_errors
from zoo.evaluation.by_length import columns, read_csv
from zoo.evaluation.evaluate import evaluate
from zoo.tracking import mlflow_run, resolve_tracking_uri, use_tracking_uri

COMPARISON_KIND = "comparison"
SWEEP_KIND = "sweep"
NOT_TRAINING_RUNS = (COMPARISON_KIND, SWEEP_KIND)
QA_KINDS = ("single_fact", "two_facts", "yes_no", "counting", "relation")  # zoo.data.babi.KINDS, in its order


def _attention(run) -> str:
    attention = run.get("params.model.attention")
    return attention if isinstance(attention, str) and attention not in ("", "None", "null") else "-"


def newest_runs(experiment="attention-zoo", data=None, metric="test_exact_match", all_runs=False, uri=None) -> list:
    """Finished runs with ``metric``, newest first; the newest per (model, attention, data) unless ``all_runs``.

    Comparison runs (tag ``zoo.kind=comparison``) are left out. Returns pandas rows.
    """
    import mlflow

    use_tracking_uri(resolve_tracking_uri(uri))
    runs = mlflow.search_runs(experiment_names=[experiment], filter_string="attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"])
    if runs.empty:
        return []
    if data:
        runs = runs[runs.get("tags.zoo.data") == data]
    out, seen = [], set()
    for _, run in runs.iterrows():
        if run.get("tags.zoo.kind") in NOT_TRAINING_RUNS:
            continue
        if f"metrics.{metric}" not in run or run[f"metrics.{metric}"] != run[f"metrics.{metric}"]:
            continue
        key = (run.get("tags.zoo.model"), _attention(run), run.get("tags.zoo.data"))
        if key in seen and not all_runs:
            continue
        seen.add(key)
        out.append(run)
    return out


def _count(value) -> str:
    """``12,345``; ``-`` for a run that did not log it (MLflow's table gives NaN)."""
    return "-" if value is None or value != value else f"{int(value):,}"


def _seconds(value) -> str:
    return "-" if value is None or value != value else f"{value:.0f}"


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
             _seconds(run.get("metrics.train_seconds")), _count(run.get("metrics.num_params")),
             run["run_id"][:8]] for run in runs]
    header = ["model", "attention", "data", metric, "test_bleu", "train s", "params", "run"]
    return _markdown(header, rows)


def _label(run) -> str:
    attention = _attention(run)
    return run.get("tags.zoo.model") + (f" ({attention})" if attention != "-" else "")


def _each_artifact(runs, artifact: str, data, uri: str, workdir: str):
    """``([(label, run, local path)], [missing])``: ``artifact`` of each run downloaded into
    ``workdir``, and the labels of the runs that do not have it (logged before it existed)."""
    import mlflow

    found, missing = [], []
    for run in runs:
        label = _label(run) if data else f"{_label(run)}, {run.get('tags.zoo.data')}"
        try:
            path = mlflow.artifacts.download_artifacts(run_id=run["run_id"], artifact_path=artifact,
                                                       dst_path=os.path.join(workdir, run["run_id"]), tracking_uri=uri)
        except Exception:  # noqa: BLE001 - MLflow raises several types for a missing artifact
            missing.append(f"{label} ({run['run_id'][:8]})")
            continue
        found.append((label, run, path))
    return found, missing


def by_length(experiment="attention-zoo", data=None, metric="test_exact_match", uri=None, split="test",
              log=True, out=None, rank=False) -> Optional[Dict[str, object]]:
    """Compares the newest run per model by source length (see the module docstring).

    Returns ``{"table": markdown, "series": {label: rows}, "figure": path or None, "run_id": id or None}``,
    or None when no run has a ``by_length/<split>.csv``. ``rank`` orders the models best first by
    the metric over the whole split.
    """
    import mlflow

    from zoo.plots import metric_by_length  # matplotlib: not for a command line that is refused

    uri = resolve_tracking_uri(uri)
    column = metric[len(split) + 1:] if metric.startswith(f"{split}_") else metric
    available = zoo.metrics.by_length_names()
    if column not in available:
        raise ValueError(f"--metric {metric} has no scores by length. Available: "
                         f"{', '.join(f'{split}_{c}' for c in available)}")
    spec = zoo.metrics.get(column)
    runs = newest_runs(experiment, data, f"{split}_exact_match", uri=uri)
    runs = _order(runs, f"{split}_{column}", rank, lambda r: (r.get("tags.zoo.data"), _label(r)))
    series, compared = {}, []
    with tempfile.TemporaryDirectory() as workdir:
        found, missing = _each_artifact(runs, f"by_length/{split}.csv", data, uri, workdir)
        for label, run, path in found:
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
                         _seconds(run.get("metrics.train_seconds")), run["run_id"][:8]])
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


def explorer(experiment="attention-zoo", data=None, uri=None, log=True, out=None) -> Optional[Dict[str, object]]:
    """The newest run per model side by side in one explorer (see the module docstring).

    Returns ``{"runs": [labels], "examples": n, "page": path or runs:/ URI, "run_id": id or None}``,
    or None when no run has an ``attention/explorer.html`` (or they share no example)."""
    import mlflow

    from zoo.plots.explorer import EXPLORER, read_explorer, side_by_side, write_explorer

    uri = resolve_tracking_uri(uri)
    metric = "test_accuracy" if data and catalog.data_task(data) == "qa" else "test_exact_match"
    runs = sorted(newest_runs(experiment, data, metric, uri=uri), key=lambda r: (r.get("tags.zoo.data"), _label(r)))
    pages, compared = {}, []
    with tempfile.TemporaryDirectory() as workdir:
        found, missing = _each_artifact(runs, f"attention/{EXPLORER}", data, uri, workdir)
        for label, run, path in found:
            pages[label] = read_explorer(path)["examples"]
            compared.append(run)
        if missing:
            print(f"No attention/{EXPLORER} (run from before it was logged, or tracking.attention_plots=0): "
                  f"{', '.join(missing)}", file=sys.stderr)
        examples = side_by_side(pages) if pages else []
        if not examples:
            return None
        data_name = data or "all"
        page = write_explorer(os.path.join(workdir, EXPLORER), examples,
                              title=f"{data_name}: {', '.join(pages)} side by side")
        result = {"runs": list(pages), "examples": len(examples), "page": None, "run_id": None}
        if out:
            shutil.copyfile(page, out)
            result["page"] = out
        if log:
            tags = {"zoo.kind": COMPARISON_KIND, "zoo.data": data_name, "zoo.compare.explorer": "true",
                    "zoo.compared_runs": ",".join(run["run_id"] for run in compared)}
            with mlflow_run(uri, experiment, run_name=f"compare-{data_name}", tags=tags) as run:
                mlflow.log_artifact(page)
                result["run_id"] = run.info.run_id
                result["page"] = result["page"] or f"runs:/{run.info.run_id}/{EXPLORER}"
        return result


# ---------------------------------------------------------------- sweeps: one parent run, a child per job


def _objective(runs) -> str:
    for run in runs:
        if run["tags"].get("zoo.objective"):
            return run["tags"]["zoo.objective"]
    return "test_exact_match"


def sweep_summary(parent_run_id: str, uri=None, log: bool = True, out_dir: Optional[str] = None) -> Dict[str, object]:
    """The summary of a sweep from its children: a table (``summary.csv``, ``summary.md``), a chart
    (``summary.png``: the task metric, training time, tokens/s and parameters per child), and, for
    children that differ only in the seed, mean, standard deviation and 95% interval (``seeds.csv``,
    ``seeds.md``; metrics ``<metric>_mean|_std|_ci95_low|_ci95_high`` on the parent when there is one
    such group). ``log`` logs it all to the parent run; ``out_dir`` also writes the files there.

    Returns ``{"table", "seeds", "metric", "children", "files"}`` (markdown strings, the metric, the child runs).
    """
    import mlflow

    from zoo.evaluation import sweep
    from zoo.plots.sweep import sweep_chart
    from zoo.tracking import child_runs

    uri = resolve_tracking_uri(uri)
    children = child_runs(uri, parent_run_id)
    metric = _objective(children)
    header, rows = sweep.summary_table(children, metric)
    groups = sweep.seed_groups([c for c in children if c["status"] == "FINISHED"], metric)
    group_header, group_rows = sweep.groups_table(groups, metric)
    result = {"table": sweep.markdown(header, rows), "seeds": sweep.markdown(group_header, group_rows) if groups else None,
              "metric": metric, "children": children, "files": []}
    with tempfile.TemporaryDirectory() as workdir:
        files = {"summary.csv": sweep.csv_text(header, rows), "summary.md": result["table"] + "\n"}
        if groups:
            files.update({"seeds.csv": sweep.csv_text(group_header, group_rows), "seeds.md": result["seeds"] + "\n"})
        for name, text in files.items():
            with open(os.path.join(workdir, name), "w", encoding="utf-8") as f:
                f.write(text)
        finished = [c for c in children if c["status"] == "FINISHED"]
        if finished:
            labels = [c["name"] or c["run_id"][:8] for c in finished]
            panels = {metric: [c["metrics"].get(metric) for c in finished],
                      **{label: [c["metrics"].get(key) for c in finished] for key, label in
                         (("train_seconds", "training seconds"), ("train_tokens_per_sec", "train tokens/s"),
                          ("num_params", "parameters"))}}
            sweep_chart(labels, panels, os.path.join(workdir, "summary.png"),
                        title=f"sweep {parent_run_id[:8]}: {len(finished)} finished of {len(children)}")
            learning_curves([c["run_id"] for c in finished], labels, metric, uri,
                            os.path.join(workdir, "learning_curves.png"))
        names = sorted(os.listdir(workdir))
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            for name in names:
                shutil.copyfile(os.path.join(workdir, name), os.path.join(out_dir, name))
            result["files"] = [os.path.join(out_dir, name) for name in names]
        if log:
            client = mlflow.MlflowClient(uri)
            for name in names:
                client.log_artifact(parent_run_id, os.path.join(workdir, name), "summary")
            scored = [c for c in finished if c["metrics"].get(metric) == c["metrics"].get(metric)
                      and c["metrics"].get(metric) is not None]
            if scored:
                spec = zoo.metrics.lookup(metric)
                lower_is_better = (not spec.higher_is_better) if spec is not None else any(
                    word in metric for word in ("mse", "loss", "error", "perplexity"))  # unregistered: by its name
                best = (min if lower_is_better else max)(scored, key=lambda c: c["metrics"][metric])
                client.log_metric(parent_run_id, f"best_{metric}", float(best["metrics"][metric]))
                client.set_tag(parent_run_id, "zoo.best_run", best["run_id"])
                client.set_tag(parent_run_id, "zoo.best_run_name", str(best["name"]))
            if len(groups) == 1:
                g = groups[0]
                for key, value in (("mean", g["mean"]), ("std", g["std"]), ("ci95_low", g["ci_low"]),
                                   ("ci95_high", g["ci_high"]), ("n", g["n"])):
                    client.log_metric(parent_run_id, f"{metric}_{key}", float(value))
            client.set_tag(parent_run_id, "mlflow.note.content",
                           f"Sweep of {len(children)} runs ({len(finished)} finished), compared by {metric}.\n\n"
                           + result["table"] + ("\n\nSeeds:\n\n" + result["seeds"] if groups else ""))
    return result


def learning_curves(run_ids: List[str], labels: List[str], metric: str, uri: str, path: str) -> Optional[str]:
    """``val_<metric>`` and ``val_loss`` per epoch of each run, overlaid (PNG at ``path``); None without history."""
    from zoo.plots.sweep import curves_chart
    from zoo.tracking import metric_history

    val = "val_" + (metric[len("test_"):] if metric.startswith("test_") else metric)
    series = {}
    for run_id, label in zip(run_ids, labels):
        history = {key: metric_history(uri, run_id, key) for key in (val, "val_loss")}
        if any(history.values()):
            series[label] = history
    if not series:
        return None
    return curves_chart(series, [val, "val_loss"], path)


class SweepCallback(Callback):
    """Hydra callback (``hydra.callbacks.sweep`` in ``conf/train.yaml``): a multirun is one MLflow parent
    run with a child run per job, summarised when the sweep ends (``sweep_summary``).

    The parent's id reaches the jobs through ``ZOO_SWEEP_PARENT_RUN_ID``, so jobs in other processes
    (``hydra/launcher=joblib``) find it too; all jobs log into the same store.
    """

    def __init__(self) -> None:
        self.parent_run_id: Optional[str] = None
        self.uri: Optional[str] = None

    def on_multirun_start(self, config, **kwargs) -> None:
        from zoo.tracking import SWEEP_PARENT_VARIABLE, start_detached_run

        overrides = " ".join(config.hydra.overrides.task)
        self.uri = resolve_tracking_uri(config.tracking.uri)
        self.parent_run_id = start_detached_run(
            self.uri, str(config.tracking.experiment), f"sweep {overrides}"[:240],
            {"zoo.kind": SWEEP_KIND, "zoo.overrides": overrides, "zoo.command": f"python train.py -m {overrides}",
             "mlflow.note.content": f"Sweep started: `python train.py -m {overrides}`"})
        os.environ[SWEEP_PARENT_VARIABLE] = self.parent_run_id
        print(f"Sweep: MLflow parent run {self.parent_run_id} in {self.uri}", flush=True)

    def on_multirun_end(self, config, **kwargs) -> None:
        from zoo.tracking import SWEEP_PARENT_VARIABLE, end_detached_run

        if self.parent_run_id is None:
            return
        os.environ.pop(SWEEP_PARENT_VARIABLE, None)
        status = "FAILED"
        try:
            result = sweep_summary(self.parent_run_id, self.uri)
            finished = sum(c["status"] == "FINISHED" for c in result["children"])
            status = "FINISHED" if finished == len(result["children"]) and finished else "FAILED"
            print(f"\nSweep {self.parent_run_id}: {finished} of {len(result['children'])} runs finished\n")
            print(result["table"])
            if result["seeds"]:
                print("\n" + result["seeds"])
            print(f"\nSummary logged to the parent run (summary/). Compare: python -m zoo.compare --sweep "
                  f"{self.parent_run_id}", flush=True)
        finally:
            end_detached_run(self.uri, self.parent_run_id, status)


def runs_table(run_ids: List[str], uri=None) -> str:
    """The comparison table of the given runs: name, model, data, the task metric, time, parameters."""
    import mlflow

    uri = resolve_tracking_uri(uri)
    client = mlflow.MlflowClient(uri)
    rows, metric = [], None
    for run_id in run_ids:
        run = client.get_run(run_id)
        metric = metric or run.data.tags.get("zoo.objective", "test_exact_match")
        m = run.data.metrics
        rows.append([run.info.run_name, run.data.tags.get("zoo.model", ""), run.data.tags.get("zoo.data", ""),
                     run.info.status, zoo.metrics.format_value(metric, m.get(metric), precise=True),
                     _seconds(m.get("train_seconds")), _count(m.get("num_params")), run_id])
    return _markdown(["run", "model", "data", "status", metric, "train s", "params", "run id"], rows)


def paired(run_a: str, run_b: str, uri=None, samples: int = 1000) -> Dict[str, float]:
    """The paired bootstrap of the test-split difference between two runs (``evaluate.py compare_to=``)."""
    from hydra import compose, initialize_config_dir

    overrides = [f"run_id={run_a}", f"compare_to={run_b}", "log=false", "perplexity=false",
                 f"bootstrap_samples={samples}"]
    if uri:
        overrides.append(f"tracking.uri={uri}")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("evaluate", overrides=overrides)
    return evaluate(cfg)


def qa_table(experiment="attention-zoo", data="story_qa", uri=None) -> Optional[str]:
    """Story QA: the newest run per model (and attention), one column per kind of question, each cell
    ``test accuracy / evidence`` (the share of (question, hop) pairs whose most-attended sentence
    is gold evidence, ``zoo.metrics.evidence``); None when there are no runs."""
    runs = newest_runs(experiment, data, "test_accuracy", uri=uri)
    if not runs:
        return None
    runs = sorted(runs, key=lambda r: (r.get("tags.zoo.model"), _attention(r)))
    kinds = [k for k in QA_KINDS if any(f"metrics.test_accuracy_{k}" in r and
                                        r[f"metrics.test_accuracy_{k}"] == r[f"metrics.test_accuracy_{k}"] for r in runs)]

    def cell(run, suffix):
        accuracy, evidence = run.get(f"metrics.test_accuracy{suffix}"), run.get(f"metrics.test_evidence{suffix}")
        if accuracy is None or accuracy != accuracy:
            return "-"
        return f"{accuracy:.3f} / {evidence:.3f}"

    rows = [[_label(run), *[cell(run, f"_{k}") for k in kinds], cell(run, ""),
             _seconds(run.get("metrics.train_seconds")), _count(run.get("metrics.num_params")),
             run["run_id"][:8]] for run in runs]
    return _markdown(["model", *kinds, "all", "train s", "params", "run"], rows)


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
    parser.add_argument("--explorer", action="store_true",
                        help="the newest run per model side by side in one attention explorer, logged to a new run")
    parser.add_argument("--out", default=None,
                        help="with --by-length or --explorer: also write the figure (the page) to this file")
    parser.add_argument("--no-log", action="store_true",
                        help="with --by-length or --explorer: do not log a comparison run")
    parser.add_argument("--sweep", default=None, metavar="PARENT_RUN_ID",
                        help="a sweep's parent run: its children's table, seed statistics, chart and learning curves")
    parser.add_argument("--runs", nargs="+", default=None, metavar="RUN_ID", help="these runs only")
    parser.add_argument("--paired", nargs=2, default=None, metavar=("RUN_A", "RUN_B"),
                        help="paired bootstrap 95%% interval of the test BLEU difference between two runs")
    parser.add_argument("--out-dir", default=None, help="write the figures and tables here too")
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args(argv)
    found = compare_problems(args.data, args.metric, args.tracking_uri, args.by_length, args.out, args.no_log,
                             sweep=bool(args.sweep), by_length_metrics=zoo.metrics.by_length_names(),
                             explorer=args.explorer,
                             runs=[("--paired", r, "saved_model") for r in args.paired or ()]
                             + [("--runs", r, None) for r in args.runs or ()]
                             + ([("--sweep", args.sweep, None)] if args.sweep else []))
    if found:
        print_errors(found)
        return 2
    if args.sweep:
        result = sweep_summary(args.sweep, args.tracking_uri, log=not args.no_log, out_dir=args.out_dir)
        if not result["children"]:
            print(f"Run {args.sweep} has no child runs: is it a sweep's parent run?", file=sys.stderr)
            return 1
        print(result["table"])
        if result["seeds"]:
            print("\n" + result["seeds"])
        if result["files"]:
            print("\nWritten: " + ", ".join(result["files"]))
        return 0
    if args.runs:
        print(runs_table(args.runs, args.tracking_uri))
        if args.out_dir:
            import mlflow

            uri = resolve_tracking_uri(args.tracking_uri)
            client = mlflow.MlflowClient(uri)
            labels = [client.get_run(r).info.run_name for r in args.runs]
            metric = client.get_run(args.runs[0]).data.tags.get("zoo.objective", "test_exact_match")
            os.makedirs(args.out_dir, exist_ok=True)
            path = learning_curves(args.runs, labels, metric, uri, os.path.join(args.out_dir, "learning_curves.png"))
            if path:
                print(f"\nWritten: {path}")
        return 0
    if args.paired:
        result = paired(*args.paired, uri=args.tracking_uri)
        print(f"\nBLEU({args.paired[0][:8]}) - BLEU({args.paired[1][:8]}) = {result['test_bleu_diff']:+.2f}, 95% CI "
              f"[{result['test_bleu_diff_ci_low']:+.2f}, {result['test_bleu_diff_ci_high']:+.2f}], "
              f"p(a not better) = {result['test_bleu_diff_p_value']:.3f}")
        return 0
    if args.explorer:
        result = explorer(args.experiment, args.data, args.tracking_uri, log=not args.no_log, out=args.out)
        if result is None:
            print(f"No finished runs with attention/explorer.html sharing a test example in experiment "
                  f"'{args.experiment}'{f' on data {args.data}' if args.data else ''}.", file=sys.stderr)
            return 1
        print(f"{result['examples']} test examples, side by side: {', '.join(result['runs'])}")
        if result["run_id"]:
            print(f"Logged to MLflow run {result['run_id']} (compare-{args.data or 'all'}): explorer.html")
        if result["page"]:
            print(f"Page: {result['page']}")
        return 0
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
    if args.data and catalog.data_task(args.data) == "qa":  # story QA: accuracy and evidence per kind
        out = qa_table(args.experiment, args.data, args.tracking_uri)
        print(out or f"No finished runs on data {args.data} in experiment '{args.experiment}'.",
              file=sys.stdout if out else sys.stderr)
        return 0 if out else 1
    out = table(args.experiment, args.data, args.metric, args.all, args.tracking_uri, rank=args.rank)
    if out is None:
        print(f"No finished runs in experiment '{args.experiment}'.", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
