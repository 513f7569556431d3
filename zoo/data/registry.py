"""Registries that fill themselves from the modules of a package (no TensorFlow).

Adding a dataset or a tokenizer is adding a module (and its config): the module registers
itself with ``@REGISTRY.register(name)``, and the registry imports every module of its package
the first time it is asked for a name.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable, List

from zoo.registry import Registry


def module_names(package: str) -> List[str]:
    """The public modules of ``package``: its ``.py`` files and not its subpackages, without the
    ``_private`` ones, sorted. Reads the directory; imports none of them."""
    path = importlib.import_module(package).__path__
    return sorted(m.name for m in pkgutil.iter_modules(path) if not m.ispkg and not m.name.startswith("_"))


class PackageRegistry(Registry):
    """A ``Registry`` whose entries register themselves from the modules of ``package``.

    The first lookup (``names``, ``get``, ``create``, ``meta``, ``in``) imports every module
    ``module_names(package)`` lists; ``register`` imports nothing, so modules can register
    while they are being imported.

    Example:
        >>> DATA = PackageRegistry("data", "zoo.data")
        >>> DATA.names()  # imports zoo.data.dates, zoo.data.reverse, ...; none registers into DATA
        []
    """

    def __init__(self, kind: str, package: str):
        super().__init__(kind)
        self.package = package
        self._loaded = False

    def load(self) -> None:
        """Imports every module of the package once (again after an import failed)."""
        if self._loaded:
            return
        self._loaded = True  # first: a module being imported may look a name up
        try:
            for name in module_names(self.package):
                importlib.import_module(f"{self.package}.{name}")
        except BaseException:
            self._loaded = False
            raise

    def names(self) -> List[str]:
        self.load()
        return super().names()

    def get(self, name: str) -> Callable[..., Any]:
        self.load()
        return super().get(name)

    def __contains__(self, name: str) -> bool:
        self.load()
        return super().__contains__(name)
