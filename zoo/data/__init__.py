"""Tasks and corpora -> tokenizers and tf.data pipelines.

``load_task(data_cfg)`` returns a ``Task``: raw text splits, fitted tokenizers and the
lengths the model and decoder need. ``zoo.data.dates`` is pure Python (no TensorFlow).
"""

from zoo.data.task import DATASETS, Task, load_task, make_dataset

__all__ = ["DATASETS", "Task", "load_task", "make_dataset"]
