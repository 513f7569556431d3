"""Kernel-regression plots: fits against the truth, and attention weights over training inputs."""

from __future__ import annotations

from typing import Dict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from zoo.plots.attention import save_heatmap  # noqa: E402


def regression_fits(x_train, y_train, x_test, y_test, predictions: Dict[str, np.ndarray], path: str):
    """Truth, noisy training points and each estimator's predictions on one axes."""
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    ax.plot(x_test, y_test, "k-", label="truth")
    ax.plot(x_train, y_train, "o", color="0.6", alpha=0.6, label="training points")
    for name, pred in predictions.items():
        ax.plot(x_test, pred, "--", label=name)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def regression_attention(weights, x_test, x_train, path: str, title: str = ""):
    """Heatmap of ``weights [len(x_test), len(x_train)]``: test inputs by sorted training inputs."""
    fig, ax = plt.subplots(figsize=(5.0, 4.2))
    image = ax.imshow(np.asarray(weights), cmap="Reds", aspect="auto",
                      extent=[float(x_train[0]), float(x_train[-1]), float(x_test[-1]), float(x_test[0])])
    ax.set_xlabel("training input x_i (key)")
    ax.set_ylabel("test input x (query)")
    return save_heatmap(fig, ax, image, path, title)
