"""Registered models composed from ``zoo.attention``, one folder per family:

- ``recurrent/``: RNN encoder-decoders (``seq2seq``, ``bahdanau``, ``luong``) and their stacks (``rnn.py``);
- ``self_attention/``: the Transformer and its LayerNorm;
- ``readers/``: story-QA readers (``memory_network``, ``aoa_reader``, ...) and their interface (``qa_model.py``);
- ``regression/``: ``nadaraya_watson``.

Shared by the families: ``exported_model.py`` (the base of the models exported by their own entry points),
``encoder_decoder.py`` (the ``Seq2SeqModel`` interface every decoder keeps),
``alignment.py`` (an alignment attention inside a decoder), ``registry.py`` (``@register_model``).

``names()`` lists the models; ``create(name, **kwargs)`` builds one (``source_vocab_size`` and
``target_vocab_size`` come from the data). Every module below this package is imported here, so a
new model file registers itself.
"""

import importlib
import pkgutil

from zoo.models.encoder_decoder import Seq2SeqModel
from zoo.models.registry import MODELS, register_model

for _module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
    importlib.import_module(_module.name)


def names(task=None):
    """Sorted names of the registered models; ``task="seq2seq"`` or ``"regression"`` filters them."""
    if task is None:
        return MODELS.names()
    return [n for n in MODELS.names() if MODELS.meta(n).get("task", "seq2seq") == task]


def create(name, /, **kwargs):
    """Builds the model registered as ``name``."""
    return MODELS.create(name, **kwargs)


__all__ = ["MODELS", "Seq2SeqModel", "register_model", "names", "create"]
