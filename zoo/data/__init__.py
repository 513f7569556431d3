"""Tasks and corpora -> tokenizers and tf.data pipelines.

``load_task(data_cfg)`` returns a ``Task``: raw text splits, fitted tokenizers and the
lengths the model and decoder need. Each dataset is one module here that registers its builder
in ``DATASETS`` under the name of its config ``conf/data/<name>.yaml``; ``names()`` lists them.
Tokenizers are the ``zoo.data.tokenizers`` package, one module per kind.

Importing ``zoo.data``, its dataset modules and ``zoo.data.tokenizers`` imports no TensorFlow
(``zoo.data.dates`` and ``zoo.data.reverse`` are pure Python generators); building a task or a
``tf.data`` pipeline does.
"""

from zoo.data.task import DATASETS, Task, load_task, make_dataset, names

__all__ = ["DATASETS", "Task", "load_task", "make_dataset", "names"]


def __getattr__(name):
    # ``zoo.data.tokenizers`` without importing it first (PEP 562), as ``zoo.<subpackage>`` works.
    if name == "tokenizers":
        import importlib

        return importlib.import_module(f"{__name__}.tokenizers")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
