"""Where and how the step runs: device, ``tf.distribute`` strategy, precision policy, seeds.

``check_trainer(cfg.trainer)`` runs before TensorFlow is imported; ``setup(cfg)`` must run
before any other TensorFlow op (MultiWorkerMirroredStrategy configures the runtime's
collectives when it is created).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from zoo.catalog import DEVICES, PRECISIONS, STRATEGIES  # noqa: F401 - the closed choices live in the catalog
from zoo.config import trainer_problems
from zoo.errors import ConfigError


def check_trainer(trainer) -> None:
    """The engine's keys of ``cfg.trainer``: ConfigError with one line per problem (``zoo.config.trainer_problems``)."""
    found = trainer_problems(trainer)
    if found:
        raise ConfigError("\n".join(found))


@dataclasses.dataclass
class Runtime:
    """What the stages need to know about the machine they run on."""

    strategy: Any
    device: str  # "cpu" or "gpu"
    precision: str
    replicas: int  # replicas in sync, all workers
    pipelines: int  # input pipelines (one per worker)
    is_chief: bool  # the one worker that logs to MLflow, checkpoints and exports
    worker: str  # "chief", "worker 1", ... for messages


def _pick_device(device: str) -> str:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if device == "gpu" and not gpus:
        raise ConfigError("trainer.device=gpu but TensorFlow sees no GPU here "
                          "(check nvidia-smi and the CUDA build of tensorflow); use trainer.device=auto or cpu.")
    if device == "cpu" and gpus:
        tf.config.set_visible_devices([], "GPU")
    picked = "gpu" if device != "cpu" and gpus else "cpu"
    if device == "auto":
        what = f"{len(gpus)} GPU(s): {', '.join(g.name for g in gpus)}" if gpus else "no GPU found, using the CPU"
        print(f"trainer.device=auto: {what}", flush=True)
    return picked


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


def _chief(strategy) -> tuple:
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None)
    task_id = getattr(resolver, "task_id", 0) or 0
    if task_type is None:
        return True, "chief"
    has_chief = "chief" in json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    chief = task_type == "chief" or (task_type == "worker" and task_id == 0 and not has_chief)
    return chief, "chief" if chief else f"{task_type} {task_id}"


def setup(trainer, seed: int) -> Runtime:
    """Sets the thread pools, picks the device, creates the strategy, sets the precision policy and the seeds."""
    import keras
    import tensorflow as tf

    set_onednn(trainer.get("onednn"))  # a no-op or a check here: train() set it before TensorFlow started
    set_threads(trainer.get("intra_op_threads"), trainer.get("inter_op_threads"))
    device = _pick_device(str(trainer.device))
    name = str(trainer.strategy)
    if name == "multi_worker":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    elif name == "mirrored":
        strategy = tf.distribute.MirroredStrategy()
    else:
        strategy = tf.distribute.get_strategy()
    keras.mixed_precision.set_global_policy(str(trainer.precision))
    keras.utils.set_random_seed(int(seed))
    chief, worker = _chief(strategy)
    pipelines = 1
    if name == "multi_worker":  # one input pipeline per worker, the chief included
        spec = strategy.cluster_resolver.cluster_spec()
        pipelines = sum(spec.num_tasks(job) for job in spec.jobs if job in ("chief", "worker"))
    return Runtime(strategy=strategy, device=device, precision=str(trainer.precision),
                   replicas=int(strategy.num_replicas_in_sync), pipelines=int(pipelines), is_chief=chief,
                   worker=worker)


def reset_policy() -> None:
    """Back to float32 (the policy is global to the process; tests train several models)."""
    import keras

    keras.mixed_precision.set_global_policy("float32")
