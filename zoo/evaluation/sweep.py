"""A sweep's summary from its child runs: one row per child, and statistics over seeds.

Pure Python on the runs' overrides and metrics (``zoo.compare`` fetches them from MLflow and logs
what this module computes to the sweep's parent run). Children whose overrides differ only in
``seed=`` form a group; a group of two or more gets the mean, the sample standard deviation and
the 95% confidence interval of the mean (Student's t with n - 1 degrees of freedom).
"""

from __future__ import annotations

import math
import shlex
from typing import Dict, List, Mapping, Optional, Sequence

# The columns of the summary: (metric key in the child run, header). The task metric comes first.
COLUMNS = (("train_seconds", "train s"), ("train_tokens_per_sec", "tokens/s"), ("num_params", "params"))


def without_seed(overrides: str) -> str:
    """The overrides with any ``seed=`` removed: what a seed group has in common."""
    kept = [o for o in shlex.split(overrides or "") if not o.lstrip("+~").startswith("seed=")]
    return " ".join(kept) or "(defaults)"


def seed_of(overrides: str) -> Optional[str]:
    for o in shlex.split(overrides or ""):
        if o.lstrip("+~").startswith("seed="):
            return o.split("=", 1)[1]
    return None


def t_quantile(degrees_of_freedom: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t (scipy, which MLflow already installs)."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2, degrees_of_freedom))


def mean_std_ci(values: Sequence[float], level: float = 0.95) -> Dict[str, float]:
    """Mean, sample standard deviation (n - 1) and the ``level`` confidence interval of the mean."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else float("nan")
    half = t_quantile(n - 1, level) * std / math.sqrt(n) if n > 1 else float("nan")
    return {"n": n, "mean": mean, "std": std, "ci_low": mean - half, "ci_high": mean + half}


def seed_groups(runs: Sequence[Mapping], metric: str) -> List[Dict[str, object]]:
    """Statistics of ``metric`` per group of finished children that differ only in the seed (n >= 2).

    ``runs``: mappings with ``overrides`` (str) and ``metrics`` (dict).
    """
    groups: Dict[str, List[float]] = {}
    seeds: Dict[str, List[str]] = {}
    for run in runs:
        value = run["metrics"].get(metric)
        if value is None or value != value:
            continue
        key = without_seed(run["overrides"])
        groups.setdefault(key, []).append(float(value))
        seeds.setdefault(key, []).append(seed_of(run["overrides"]) or "default")
    return [{"group": key, "seeds": ",".join(seeds[key]), **mean_std_ci(values)}
            for key, values in groups.items() if len(values) >= 2 and len(set(seeds[key])) == len(values)]


def markdown(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def csv_text(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _number(value, digits: int = 4) -> str:
    if value is None or value != value:
        return ""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def summary_table(runs: Sequence[Mapping], metric: str):
    """``(header, rows)``: one row per child (name, overrides, status, the metric, time, tokens/s, params, id)."""
    header = ["run", "overrides", "status", metric, *[h for _, h in COLUMNS], "run id"]
    rows = []
    for run in runs:
        m = run["metrics"]
        rows.append([run["name"], run["overrides"], run["status"], _number(m.get(metric)),
                     *[_number(m.get(key), 1) for key, _ in COLUMNS], run["run_id"]])
    return header, rows


def groups_table(groups: Sequence[Mapping], metric: str):
    header = ["group", "seeds", "n", f"{metric} mean", "std", "95% CI"]
    rows = [[g["group"], g["seeds"], g["n"], _number(g["mean"]), _number(g["std"]),
             f"[{_number(g['ci_low'])}, {_number(g['ci_high'])}]"] for g in groups]
    return header, rows
