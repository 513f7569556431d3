"""The one switch between the reference path and the fast path.

Every layer, model, loss, optimizer and search in ``zoo`` is written once, as its paper or textbook
states it, in ``keras.ops`` (the *reference* path). Some of them have a faster replacement for the CPU
(own kernels for small products, hand-written gradients, a fused Adam step, ...): those live in the
package ``zoo.fast`` and nowhere else, each registered here as the replacement of one named reference
function with ``@replaces("<module>.<qualified name>")``. A reference function that has a replacement
is marked ``@replaceable``; when the switch says ``fast`` it calls the replacement instead, with the
same arguments, and a reader never has to open ``zoo.fast`` to know what it computes.

The switch: ``kernels=fast|reference`` on the command line of ``train.py``, ``evaluate.py`` and
``python -m zoo.bench`` (default ``fast``), or the environment variable ``ZOO_KERNELS`` for library
use; ``use("reference")`` / ``using("reference")`` in code. The mode is read when a function is
*traced*: a ``tf.function`` traced under one mode keeps it.

Every replacement is proven equal to its reference (values and gradients) by ``tests/fast/``, one test
file per module of ``zoo/fast``.
This module is TensorFlow-free; only it imports ``zoo.fast`` (by name, on first use in fast mode).
"""

import contextlib
import functools
import importlib
import os

FAST = "fast"
REFERENCE = "reference"
MODES = (FAST, REFERENCE)
ENVIRONMENT = "ZOO_KERNELS"

_state = {"mode": None, "export": False, "loaded": False}
REPLACEMENTS = {}  # reference key -> (replacement, writes its own gradient, Keras backends)


def check(mode, key="kernels"):
    """``mode`` if it is one of ``MODES``, else ValueError naming the value and the fix."""
    if mode not in MODES:
        raise ValueError(f"{key}={mode!r} is not valid. Available: {', '.join(MODES)} (default: {FAST})")
    return mode


def mode():
    """The mode in force: set by ``use``, else ``$ZOO_KERNELS``, else ``fast``."""
    if _state["mode"] is None:
        return check(os.environ.get(ENVIRONMENT, FAST) or FAST, ENVIRONMENT)
    return _state["mode"]


def use(new_mode):
    """Sets the mode for this process (``train.py`` does it from ``cfg.kernels``)."""
    _state["mode"] = check(new_mode)


@contextlib.contextmanager
def using(new_mode):
    """The mode within a block (tests, the bench's side-by-side rounds); put back after."""
    saved = _state["mode"]
    _state["mode"] = check(new_mode)
    try:
        yield
    finally:
        _state["mode"] = saved


@contextlib.contextmanager
def exporting():
    """Within the block, replacements that carry a custom gradient are not used: what is traced for a
    SavedModel holds no custom gradient, so loading it prints no warning about unsaved ones."""
    saved = _state["export"]
    _state["export"] = True
    try:
        yield
    finally:
        _state["export"] = saved


def is_exporting():
    """Whether a SavedModel is being traced (within ``exporting()``): a replacement built on kernels with
    hand-written gradients runs them forward-only then."""
    return _state["export"]


def fast():
    """Whether the fast path is on."""
    return mode() == FAST


def key_of(function):
    return f"{function.__module__}.{function.__qualname__}"


def replaces(key, own_gradient=False, backends=("tensorflow",)):
    """Registers the decorated function (in ``zoo.fast``) as the replacement of the reference function
    ``key`` (``"zoo.models.recurrent.rnn.run_layer"``, ``"zoo.attention.base_attention.BaseAttention.attend"``).
    ``own_gradient``: it writes its own gradient (not used while ``exporting()``). ``backends``: the
    Keras backends it runs on (the speed-ups are TensorFlow's); on any other the reference runs."""
    def decorator(function):
        if key in REPLACEMENTS:
            raise ValueError(f"{key} already has a replacement: {REPLACEMENTS[key][0].__qualname__}")
        REPLACEMENTS[key] = (function, own_gradient, tuple(backends))
        return function

    return decorator


def _load():
    if not _state["loaded"]:
        _state["loaded"] = True
        importlib.import_module("zoo.fast")


def replacement(key):
    """The replacement in force for ``key`` now, or None (reference mode, none registered, another Keras
    backend than it runs on, or exporting and it carries a custom gradient)."""
    if not fast():
        return None
    import keras  # imported already by whatever calls a replaceable function

    backend = keras.backend.backend()
    if backend == "tensorflow":  # zoo.fast is written with TensorFlow: it loads where TensorFlow runs
        _load()
    found = REPLACEMENTS.get(key)
    if found is None or (found[1] and _state["export"]):
        return None
    return found[0] if backend in found[2] else None


def replaceable(function):
    """Marks a reference function (or method) that ``zoo.fast`` may replace: in fast mode the call goes
    to its replacement, with the same arguments. ``function.reference`` is the plain function."""
    key = key_of(function)

    @functools.wraps(function)
    def dispatch(*args, **kwargs):
        fast_function = replacement(key)
        return (fast_function or function)(*args, **kwargs)

    dispatch.reference = function
    dispatch.key = key
    return dispatch
