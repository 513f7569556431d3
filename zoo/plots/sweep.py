"""A sweep's chart: one horizontal bar panel per quantity (task metric, training time, tokens/s, parameters)."""

from __future__ import annotations

from typing import Dict, Optional, Sequence


def sweep_chart(labels: Sequence[str], panels: Dict[str, Sequence[float]], path: str,
                errors: Optional[Dict[str, Sequence[float]]] = None, title: str = "") -> str:
    """Writes the chart to ``path`` (PNG) and returns it. ``errors`` (same keys) draws error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(panels)
    height = max(2.5, 0.45 * len(labels) + 1.2)
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), height), sharey=True, squeeze=False)
    positions = range(len(labels))
    for ax, name in zip(axes[0], names):
        values = [v if v is not None and v == v else 0.0 for v in panels[name]]
        xerr = (errors or {}).get(name)
        ax.barh(list(positions), values, xerr=xerr, color="#4C72B0", capsize=3 if xerr is not None else 0)
        ax.set_title(name, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        for y, v in zip(positions, values):
            ax.text(v, y, f" {v:,.4g}", va="center", fontsize=8)
    axes[0][0].set_yticks(list(positions))
    axes[0][0].set_yticklabels(labels, fontsize=8)
    axes[0][0].invert_yaxis()
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def curves_chart(series: Dict[str, Dict[str, Sequence[tuple]]], metrics: Sequence[str], path: str) -> str:
    """Overlaid learning curves: one panel per metric, one line per run (``series[label][metric]`` is
    ``[(epoch, value), ...]``). Writes ``path`` (PNG) and returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 3.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for label, history in series.items():
            points = history.get(metric) or []
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=label)
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
