"""Scores by source length: one line per model, one panel per metric."""

from __future__ import annotations

from typing import Dict, List, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import zoo.metrics  # noqa: E402


def _label_and_scale(metric: str):
    """The axis label and the top of the scale (1 or 100) of a registered metric; the name and 1 otherwise."""
    spec = zoo.metrics.lookup(metric)
    return (spec.label, spec.scale) if spec is not None else (metric, 1)


def metric_by_length(series: Dict[str, List[Dict[str, object]]], path: str,
                     metrics: Sequence[str] = ("exact_match", "token_accuracy"), title: str = "",
                     footnote: str = "") -> str:
    """Saves a figure of ``metrics`` (one panel each) against source length for every series.

    ``series`` maps a label (a model) to rows of scores by source length (``min_length``,
    ``max_length``, ``count`` and a value per metric, as ``zoo.evaluation.by_length`` makes them);
    x is the middle of each length bin; axis labels and ranges come from ``zoo.metrics``. Metrics
    no series has a value for are left out; the last panel also shows the examples per bin of the
    first series. Returns ``path``.
    """
    metrics = [m for m in metrics if any(r.get(m) is not None for rows in series.values() for r in rows)]
    metrics = metrics or ["exact_match"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 3.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for label, rows in series.items():
            points = [((r["min_length"] + r["max_length"]) / 2, r[metric]) for r in rows if r.get(metric) is not None]
            if points:
                ax.plot([x for x, _ in points], [y for _, y in points], "o-", markersize=4, label=label)
        axis_label, scale = _label_and_scale(metric)
        ax.set_xlabel("source length (tokens)")
        ax.set_ylabel(axis_label)
        ax.set_ylim(-0.03 * scale, 1.03 * scale)
        ax.grid(alpha=0.3)
    first = next(iter(series.values()), [])
    if first:
        counts = axes[0][-1].twinx()
        counts.bar([(r["min_length"] + r["max_length"]) / 2 for r in first], [r["count"] for r in first],
                   width=0.8 * max(1, first[0]["max_length"] - first[0]["min_length"] + 1), color="0.85", zorder=0)
        counts.set_ylabel("examples per bin", color="0.5")
        counts.tick_params(axis="y", colors="0.5")
        axes[0][-1].set_zorder(counts.get_zorder() + 1)
        axes[0][-1].patch.set_visible(False)
    axes[0][0].legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if footnote:
        fig.subplots_adjust(bottom=fig.subplotpars.bottom + 0.06)
        fig.text(0.01, 0.01, footnote, fontsize=6, color="0.35")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
