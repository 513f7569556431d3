"""attention-zoo: attention mechanisms as Keras 3 layers, composed into seq2seq models.

Importing ``zoo`` is cheap: subpackages (``zoo.attention``, ``zoo.models``, ...) import Keras and
TensorFlow only when they are first used, so ``import zoo; zoo.models.names()`` and
``import zoo.models`` both work (PEP 562 module ``__getattr__``). The map of the package and the
import order its modules keep is ``docs/design.md``.
"""

import importlib

__version__ = "0.1.0"

SUBPACKAGES = ("attention", "bench", "catalog", "checks", "compare", "config", "data", "decoding", "errors",
               "evaluation", "export", "metrics", "models", "plots", "registry", "tokens", "tracking", "training")


def __getattr__(name):
    if name in SUBPACKAGES:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'zoo' has no attribute '{name}'. Subpackages: {', '.join(SUBPACKAGES)}")


def __dir__():
    return sorted([*globals(), *SUBPACKAGES])
