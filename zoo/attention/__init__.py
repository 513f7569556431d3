"""Attention layers, one family per file, all registered by name.

``names()`` lists the registered attention types; ``create(name, **kwargs)`` builds one
with the defaults of its ``conf/attention/<name>.yaml`` unless told otherwise.
Every module in this package is imported here, so a new layer file registers itself.
"""

import importlib
import pkgutil

from zoo.attention.base_attention import ATTENTIONS, BaseAttention, attention_kind, masked_softmax, register_attention

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base_attention":
        importlib.import_module(f"{__name__}.{_module.name}")


def names():
    """Sorted names of all registered attention layers."""
    return ATTENTIONS.names()


def alignment_names():
    """Names of the alignment attentions (``BaseAttention`` subclasses): the ones an RNN decoder can plug in."""
    return [n for n in ATTENTIONS.names() if ATTENTIONS.meta(n).get("kind") == "alignment"]


def create(name, /, **kwargs):
    """Builds the attention layer registered as ``name``."""
    return ATTENTIONS.create(name, **kwargs)


__all__ = ["BaseAttention", "attention_kind", "masked_softmax", "register_attention", "names", "alignment_names",
           "create"]
