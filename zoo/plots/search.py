"""A hyperparameter search's plots, drawn by Optuna's matplotlib backend into PNG files."""

from __future__ import annotations

import os
import warnings
from typing import List


def search_plots(study, directory: str) -> List[str]:
    """``optimization_history.png``, ``intermediate_values.png`` (per-epoch validation metric, pruned
    trials included) and, with two or more finished trials, ``param_importances.png``; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as optuna_plots

    drawn = []
    plots = [("optimization_history", optuna_plots.plot_optimization_history),
             ("intermediate_values", optuna_plots.plot_intermediate_values)]
    finished = [t for t in study.trials if t.value is not None]
    if len(finished) >= 2 and len(study.best_trial.params) >= 1:
        plots.append(("param_importances", optuna_plots.plot_param_importances))
    for name, plot in plots:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna marks its matplotlib backend experimental
            try:
                ax = plot(study)
            except (ValueError, RuntimeError):  # e.g. importances of a parameter that never varied
                continue
        figure = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
        figure.set_size_inches(7, 4.5)
        figure.tight_layout()
        path = os.path.join(directory, f"{name}.png")
        figure.savefig(path, dpi=110)
        plt.close(figure)
        drawn.append(path)
    return drawn
