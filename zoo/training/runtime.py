"""Where and how the step runs: device, ``tf.distribute`` strategy, precision policy, seeds.

The trainer keys are checked with the rest of the command line before TensorFlow is imported
(``zoo.config.trainer_problems``); ``setup(cfg)`` must run before any other TensorFlow op
(MultiWorkerMirroredStrategy configures the runtime's
collectives when it is created).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from zoo.catalog import DEVICES, PRECISIONS, STRATEGIES  # noqa: F401 - the closed choices live in the catalog
from zoo.environ import set_onednn, set_threads
from zoo.errors import ConfigError


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
