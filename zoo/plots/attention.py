"""Attention heatmaps with the tokens on the axes."""

from __future__ import annotations

from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _label(token) -> str:
    token = token.decode("utf-8") if isinstance(token, bytes) else str(token)
    return "␣" if token == " " else token


def attention_heatmap(weights, source_tokens: Sequence, target_tokens: Sequence, path: str, title: str = "",
                      footnote: str = "", xlabel: str = "source token", ylabel: str = "output token"):
    """Saves a heatmap of ``weights [T_out, T_in]``: rows = output tokens, columns = input tokens.

    Padding tokens ("") are cut off both axes; ``footnote`` (e.g. the corpus attribution its
    license requires) is printed under the plot; ``xlabel``/``ylabel`` name the axes (a self-attention's
    rows and columns are both the source). Returns ``path``.
    """
    src = [_label(t) for t in source_tokens if _label(t) != ""]
    tgt = [_label(t) for t in target_tokens if _label(t) != ""]
    w = np.asarray(weights, dtype=np.float32)[: len(tgt), : len(src)]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.32 * len(src) + 2), max(3.0, 0.32 * len(tgt) + 1.5)))
    image = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=max(1e-6, float(w.max()) if w.size else 1.0), aspect="auto")
    ax.set_xticks(range(len(src)))
    ax.set_xticklabels(src, rotation=90)
    ax.set_yticks(range(len(tgt)))
    ax.set_yticklabels(tgt)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return save_heatmap(fig, ax, image, path, title, footnote, colorbar_fraction=0.04)


def save_heatmap(fig, ax, image, path: str, title: str = "", footnote: str = "", colorbar_fraction=0.046):
    """Title, colour bar, optional footnote (e.g. a data attribution); writes ``path`` and closes."""
    if title:
        ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=colorbar_fraction)
    fig.tight_layout()
    if footnote:
        fig.subplots_adjust(bottom=fig.subplotpars.bottom + 0.06)
        fig.text(0.01, 0.01, footnote, fontsize=6, color="0.35")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
