"""Time and memory against sequence length on log-log axes: one line per mechanism, two panels."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def cost_by_length(series: Dict[str, List[Tuple[int, Optional[float], Optional[float]]]], path: str,
                   title: str = "", footnote: str = "") -> str:
    """Saves a figure of time (ms) and memory (MiB) against length, both axes logarithmic, and returns
    ``path``.

    ``series`` maps a label (a mechanism) to ``(length, time_ms, memory_mib)`` points; a None or
    non-positive figure (nothing to put on a log axis) is left out. On log-log axes a cost growing as
    ``T^k`` is a straight line of slope ``k``: two dotted guides of slope 1 and 2, from the first
    point of the first series, show linear and quadratic growth.
    """
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, index, what in ((axes[0], 1, "time per forward + backward (ms)"),
                            (axes[1], 2, "peak memory above baseline (MiB)")):
        first = None
        for label_, points in series.items():
            shown = [(p[0], p[index]) for p in points if p[index] is not None and p[index] > 0]
            if shown:
                ax.plot([x for x, _ in shown], [y for _, y in shown], "o-", markersize=4, label=label_)
                first = first or shown[0]
        lengths = sorted({p[0] for points in series.values() for p in points})
        if first and len(lengths) > 1:
            x0, y0 = first
            for slope, text in ((1, "T"), (2, "T²")):
                ax.plot(lengths, [y0 * (t / x0) ** slope for t in lengths], ":", color="0.6", linewidth=1)
                ax.annotate(text, (lengths[-1], y0 * (lengths[-1] / x0) ** slope), fontsize=8, color="0.4")
        ax.set_xscale("log")
        ax.set_yscale("log")
        if lengths:
            ax.set_xticks(lengths, [f"{t:,}" for t in lengths])
            ax.minorticks_off()
        ax.set_xlabel("sequence length T")
        ax.set_ylabel(what)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if footnote:
        fig.subplots_adjust(bottom=fig.subplotpars.bottom + 0.05 * (footnote.count("\n") + 1))
        fig.text(0.01, 0.01, footnote, fontsize=6, color="0.35")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
