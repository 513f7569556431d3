"""The kernel-regression toy task of d2l's attention-pooling chapter, generated from a seed.

``y = 2 sin(x) + x^0.8 + eps``, ``eps ~ N(0, 0.5)``; 50 sorted training points drawn
uniformly from [0, 5); test inputs 0, 0.1, ..., 4.9 with the noise-free targets.

``generate`` is ``data=kernel_regression`` (``conf/data/kernel_regression.yaml``), registered with
``task="regression"``: it gives arrays, not a ``Task``, for the regression models
(``zoo.models.names(task="regression")``).
"""

from __future__ import annotations

from typing import Dict

import numpy as np

from zoo.checks import enforce_config
from zoo.data.task import DATASETS


def true_function(x):
    return 2.0 * np.sin(x) + x ** 0.8


# The rules of data.<key>, declared once: the validator reads them before TensorFlow starts
# (zoo.catalog.data_constraints) and build_task raises the same lines (zoo.checks.problem_lines).
CONSTRAINTS = (
    {"rule": "at_least", "key": "n_train", "min": 2, "integer": True},
    {"rule": "at_least", "key": "noise", "min": 0},
    {"rule": "above", "key": "x_max", "min": 0},
    {"rule": "above", "key": "step", "min": 0},
)


@DATASETS.register("kernel_regression", task="regression")
def generate(n_train: int = 50, noise: float = 0.5, x_max: float = 5.0, step: float = 0.1,
             seed: int = 0) -> Dict[str, np.ndarray]:
    """``{"x_train", "y_train", "x_test", "y_test"}`` as float32 arrays; the same for a seed."""
    enforce_config(CONSTRAINTS, "data", n_train=n_train, noise=noise, x_max=x_max, step=step)
    rng = np.random.default_rng(seed)
    x_train = np.sort(rng.uniform(0.0, x_max, n_train))
    y_train = true_function(x_train) + rng.normal(0.0, noise, n_train)
    x_test = np.arange(0.0, x_max, step)
    return {"x_train": x_train.astype("float32"), "y_train": y_train.astype("float32"),
            "x_test": x_test.astype("float32"), "y_test": true_function(x_test).astype("float32")}
