"""The process's environment: variables put back as they were after a block (MLflow reads its
settings from them, and writes some of them itself), and TensorFlow's settings that hold for the
whole process and must be made before it starts (thread pools, oneDNN kernels), for ``train.py``,
``evaluate.py`` and the bench alike."""

import contextlib
import os
from typing import Iterator

from zoo.errors import ConfigError


@contextlib.contextmanager
def restored(*names: str) -> Iterator[None]:
    """Whatever the block sets or removes, the variables ``names`` end as they were before it."""
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def set_threads(intra_op=None, inter_op=None, prefix: str = "trainer.", command: str = "python train.py") -> None:
    """TensorFlow's thread pools: ``intra_op`` threads within one op, ``inter_op`` ops at once (None
    leaves TensorFlow's default). They take effect only before TensorFlow's runtime starts; a value
    it cannot take any more is a ConfigError naming the key (``prefix``), what runs now and the
    ``command`` that sets it at the start."""
    import tensorflow as tf

    threading = tf.config.threading
    for key, value, get, put in (
            ("intra_op_threads", intra_op, threading.get_intra_op_parallelism_threads,
             threading.set_intra_op_parallelism_threads),
            ("inter_op_threads", inter_op, threading.get_inter_op_parallelism_threads,
             threading.set_inter_op_parallelism_threads)):
        if value is None:
            continue
        try:
            put(int(value))
        except RuntimeError:
            now = get() or "TensorFlow's default"
            raise ConfigError(f"{prefix}{key}={value} cannot take effect: TensorFlow's runtime has already started "
                              f"in this process (with {now}); set it when the process starts, as "
                              f"`{command} {prefix}{key}={value}` does.") from None


def onednn_enabled():
    """Whether this process's TensorFlow runs its oneDNN kernels (``TF_ENABLE_ONEDNN_OPTS``, read once
    when TensorFlow starts; on by default in x86 builds); None where this TensorFlow cannot say."""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:  # a private module: a later TensorFlow may move it
        return None
    return bool(_pywrap_util_port.IsMklEnabled())


def set_onednn(enabled=None, prefix: str = "trainer.", command: str = "python train.py") -> None:
    """TensorFlow's oneDNN kernels on (True) or off (False); None leaves ``TF_ENABLE_ONEDNN_OPTS``
    as the environment has it (TensorFlow's default: on in x86 builds). TensorFlow reads it once,
    when it is imported: before that the variable is set here; after it, a value TensorFlow does
    not run with is a ConfigError naming the key, the state in force and the fix (the ``command``
    that sets it at the start, or null where the build has no oneDNN kernels)."""
    import sys

    if enabled is None:
        return
    wanted = "1" if enabled else "0"
    if "tensorflow" not in sys.modules:
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = wanted
        return
    now = onednn_enabled()
    if now is None or now == bool(enabled):
        return
    value = "true" if enabled else "false"
    if enabled and os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "1":  # asked for in time, and still off
        why, fix = "this TensorFlow build does not run oneDNN kernels on this machine", f"leave {prefix}onednn=null"
    else:  # TensorFlow started before the variable was set
        why, fix = ("TensorFlow was imported before it could be set",
                    f"set it when the process starts, as `{command} {prefix}onednn={value}` does")
    raise ConfigError(f"{prefix}onednn={value} cannot take effect: {why} (oneDNN is {'on' if now else 'off'} "
                      f"in this process); {fix}.")
