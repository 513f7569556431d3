"""Compare runs: ``python -m zoo.compare [--experiment attention-zoo] [--data dates] [--metric test_exact_match]``.

Prints a Markdown table of the finished runs in the MLflow store (``MLFLOW_TRACKING_URI`` or
``sqlite:///mlflow.db``): model, attention, the metric, BLEU, training time, parameters, run id;
the newest run per (model, attention, data) unless ``--all``. Paste it into docs or a README:
it is produced from the store, not typed in.
"""

from __future__ import annotations

import argparse
import sys


def table(experiment="attention-zoo", data=None, metric="test_exact_match", all_runs=False, uri=None):
    import mlflow

    from zoo.tracking import resolve_tracking_uri

    mlflow.set_tracking_uri(resolve_tracking_uri(uri))
    runs = mlflow.search_runs(experiment_names=[experiment], filter_string="attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"])
    if runs.empty:
        return None
    if data:
        runs = runs[runs.get("tags.zoo.data") == data]
    rows, seen = [], set()
    for _, run in runs.iterrows():
        if f"metrics.{metric}" not in run or run[f"metrics.{metric}"] != run[f"metrics.{metric}"]:
            continue
        attention = run.get("params.model.attention")
        attention = attention if isinstance(attention, str) and attention not in ("", "None", "null") else "-"
        key = (run.get("tags.zoo.model"), attention, run.get("tags.zoo.data"))
        if key in seen and not all_runs:
            continue
        seen.add(key)
        rows.append([run.get("tags.zoo.model"), attention, run.get("tags.zoo.data"),
                     f"{run[f'metrics.{metric}']:.4f}", f"{run.get('metrics.test_bleu', float('nan')):.2f}",
                     f"{run.get('metrics.train_seconds', float('nan')):.0f}",
                     f"{int(run.get('metrics.num_params', 0)):,}", run["run_id"][:8]])
    header = ["model", "attention", "data", metric, "test_bleu", "train s", "params", "run"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in sorted(rows, key=lambda r: (r[2], r[0], r[1]))]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", default="attention-zoo")
    parser.add_argument("--data", default=None, help="only runs on this data (tag zoo.data)")
    parser.add_argument("--metric", default="test_exact_match")
    parser.add_argument("--all", action="store_true", help="every run, not only the newest per model")
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args(argv)
    out = table(args.experiment, args.data, args.metric, args.all, args.tracking_uri)
    if out is None:
        print(f"No finished runs in experiment '{args.experiment}'.", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
