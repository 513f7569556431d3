"""The fast path: CPU speed-ups, each a named replacement of one reference function.

Nothing here is needed to read what a layer, model, loss or search computes: each module registers
its functions with ``zoo.kernels.replaces("<reference>")``, and ``zoo.kernels`` calls them in place of
the reference when ``kernels=fast`` (the default). Only ``zoo.kernels`` imports this package. Every
replacement has an equality test against its reference (``tests/fast/test_<module>.py``); its measurements
are in ``docs/performance.md``. To add one: write it here beside its reference's family, register it,
add its case to the equality suite, and record before/after figures in ``docs/performance.md``.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
