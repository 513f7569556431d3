"""Metrics: one registry of the scores runs report, pure Python (sacreBLEU, NumPy; no TensorFlow).

Each metric is a module ``zoo/metrics/<name>.py`` that registers a scorer with its scale (0-1 or
0-100), direction, label and whether it is scored by source length (``zoo.metrics.metric``). The
by-length tables and plots, ``python -m zoo.compare`` and the run summary read the registry, so a
new metric is one new file: every module in this package is imported here and registers itself.

    >>> import zoo.metrics
    >>> zoo.metrics.by_length_names()
    ['exact_match', 'token_accuracy', 'bleu', 'chrf']
    >>> zoo.metrics.get("bleu").format(23.456), zoo.metrics.get("exact_match").higher_is_better
    ('23.46', True)
"""

import importlib
import pkgutil

from zoo.metrics.metric import (
    Metric,
    by_length_names,
    format_summary,
    format_value,
    get,
    lookup,
    names,
    register,
    score_all,
    unregister,
)

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "metric":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["Metric", "by_length_names", "format_summary", "format_value", "get", "lookup", "names", "register",
           "score_all", "unregister"]
