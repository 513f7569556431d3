"""Registered sequence-to-sequence models composed from ``zoo.attention``.

``names()`` lists them; ``create(name, **kwargs)`` builds one (``source_vocab_size`` and
``target_vocab_size`` come from the data). Every module in this package is imported here,
so a new model file registers itself.
"""

import importlib
import pkgutil

from zoo.models.seq2seq_model import MODELS, Seq2SeqModel, register_model

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "seq2seq_model":
        importlib.import_module(f"{__name__}.{_module.name}")


def names(task=None):
    """Sorted names of the registered models; ``task="seq2seq"`` or ``"regression"`` filters them."""
    if task is None:
        return MODELS.names()
    return [n for n in MODELS.names() if MODELS.meta(n).get("task", "seq2seq") == task]


def create(name, /, **kwargs):
    """Builds the model registered as ``name``."""
    return MODELS.create(name, **kwargs)


__all__ = ["MODELS", "Seq2SeqModel", "register_model", "names", "create"]
