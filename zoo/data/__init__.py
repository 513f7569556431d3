"""Tasks and corpora -> tokenizers and tf.data pipelines.

``load_task(data_cfg)`` returns a ``Task``: raw text splits, fitted tokenizers and the
lengths the model and decoder need. Each dataset is one module here that registers its builder
in ``DATASETS`` under the name of its config ``conf/data/<name>.yaml``; ``names()`` lists them.
Tokenizers are the ``zoo.data.tokenizers`` package, one module per kind.

Importing ``zoo.data``, its dataset modules and ``zoo.data.tokenizers`` imports no TensorFlow
(``zoo.data.dates`` and ``zoo.data.reverse`` are pure Python generators); building a task or a
``tf.data`` pipeline does.
"""

import importlib

__all__ = ["DATASETS", "Task", "load_task", "make_dataset", "names"]


def __getattr__(name):
    # PEP 562: ``zoo.data.task``'s names on first use, so the config validator's corpus check
    # (``zoo.data.manythings``, standard library only) does not pay for NumPy before a refusal;
    # ``zoo.data.tokenizers`` without importing it first, as ``zoo.<subpackage>`` works.
    if name in __all__:
        return getattr(importlib.import_module(f"{__name__}.task"), name)
    if name == "tokenizers":
        return importlib.import_module(f"{__name__}.tokenizers")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
