"""Story-QA attention heatmaps: per hop over the story's sentences, and over its words."""

from __future__ import annotations

from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from zoo.plots.attention import save_heatmap  # noqa: E402


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def sentence_heatmap(weights, sentences: Sequence[str], supporting: Sequence[int], path: str, title: str = ""):
    """``weights [H, S]``: one column per hop, one row per sentence (gold evidence marked ``*``)."""
    w = np.asarray(weights, dtype=np.float32).reshape(-1, len(sentences)).T  # [S, H]
    labels = [("* " if i in set(supporting) else "") + _text(s) for i, s in enumerate(sentences)]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * w.shape[1] + 4.5), max(2.5, 0.3 * len(labels) + 1.5)))
    image = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(w.shape[1]))
    ax.set_xticklabels([f"hop {h + 1}" for h in range(w.shape[1])])
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("hop")
    return save_heatmap(fig, ax, image, path, title)


def word_heatmap(weights, tokens, path: str, title: str = ""):
    """``weights [S, W]`` over the story's words, ``tokens [S, W]`` (padding "") printed in the cells."""
    w = np.asarray(weights, dtype=np.float32)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * w.shape[1] + 2), max(2.5, 0.3 * w.shape[0] + 1.5)))
    image = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=max(1e-6, float(w.max()) if w.size else 1.0), aspect="auto")
    for (i, j), token in np.ndenumerate(np.asarray(tokens, dtype=object)):
        if _text(token):
            ax.text(j, i, _text(token), ha="center", va="center", fontsize=6, color="white")
    ax.set_xlabel("word")
    ax.set_ylabel("sentence")
    return save_heatmap(fig, ax, image, path, title)
