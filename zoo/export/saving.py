"""Writing a SavedModel for serving: the translator's and the reader's ``save``.

A SavedModel serves inference, and whoever loads it (``tf.saved_model.load`` in a process with only
TensorFlow and TensorFlow Text) must see no warning from it. So its functions are traced afresh for
the export, within ``kernels.exporting()``: there the fast path's replacements that write their own
gradient are left out (``zoo.kernels``), and no custom gradient is traced into the graph, where it
could not be saved (the RNN's reads tensors of the forward loop) and every load would warn of it.
Functions traced before, as a run's scoring traces them with the fast path in full, are not reused.
"""

import os

import tensorflow as tf

from zoo import kernels


def save(build, directory, config_yaml=None):
    """Writes the module ``build()`` makes to ``directory``; ``config_yaml`` (the run's resolved config)
    goes to ``assets.extra/config.yaml``. Returns ``directory``.

    ``build() -> (module, signatures)`` makes a new ``tf.Module`` and its signature functions; it is
    called within ``kernels.exporting()``, so every function of the SavedModel is traced there."""
    with kernels.exporting():
        module, signatures = build()
        tf.saved_model.save(module, directory, signatures=signatures)
    if config_yaml is not None:
        extra = os.path.join(directory, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        with open(os.path.join(extra, "config.yaml"), "w", encoding="utf-8") as f:
            f.write(config_yaml)
    return directory
