"""Stage ``data``: the task and its pipelines, in the shape the training loop consumes them.

The one module of the engine that calls ``zoo.data`` for translation (``TrainData``); the other
task kinds hand ``fit`` an ``ArrayData`` (their splits held in memory as arrays, batched by their data
module). The order of an epoch's batches is a pure function of ``(seed, epoch)``: a resumed epoch sees
the batches the interrupted one saw.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional

from zoo.errors import ConfigError


def epoch_seed(seed: int, epoch: int) -> int:
    """The shuffle seed of ``epoch`` (1-based); epoch 1 shuffles with the run's own seed."""
    return int(seed) + 1000 * (int(epoch) - 1)


def limit_epoch(ds, steps_per_epoch: Optional[int], skip_steps: int = 0):
    """``ds`` cut (or repeated) to ``steps_per_epoch`` batches when set, its first ``skip_steps`` dropped
    (a resumed epoch)."""
    if steps_per_epoch:
        ds = ds.repeat().take(steps_per_epoch)
    if skip_steps:
        ds = ds.skip(skip_steps)
    return ds


@dataclasses.dataclass
class ArrayData:
    """What ``fit`` asks of a task held in memory as arrays (story QA, classification, images): epoch
    batches, validation batches, steps and target tokens per epoch, on one replica.

    A subclass says how its data module batches a split (``dataset``) and how many target tokens a
    training row holds (``train_rows``, ``tokens_per_row``); ``from_config`` loads the task of
    ``cfg.data`` and the trainer's batching.
    """

    task: object
    batch_size: int
    seed: int
    steps_per_epoch: Optional[int]

    @classmethod
    def from_config(cls, cfg, **fields) -> "ArrayData":
        from zoo.data import load_task

        t = cfg.trainer
        return cls(task=load_task(cfg.data), batch_size=int(t.batch_size), seed=int(cfg.seed),
                   steps_per_epoch=int(t.steps_per_epoch) if t.steps_per_epoch else None, **fields)

    def dataset(self, split: str, shuffle: bool = False, seed: int = 0):
        """The batches of ``split`` (``shuffle`` with ``seed``: an epoch of the training split)."""
        raise NotImplementedError

    def train_rows(self) -> int:
        raise NotImplementedError

    def tokens_per_row(self) -> float:
        return 1.0  # one answer or label per example

    @property
    def tokens_per_epoch(self) -> float:
        rows = self.train_rows()
        return self.tokens_per_row() * (min(rows, self.steps_per_epoch * self.batch_size)
                                        if self.steps_per_epoch else rows)

    def train_batches(self, epoch: int, skip_steps: int = 0):
        return limit_epoch(self.dataset("train", shuffle=True, seed=epoch_seed(self.seed, epoch)),
                           self.steps_per_epoch, skip_steps)

    def val_batches(self):
        return self.dataset("val")


@dataclasses.dataclass
class EncodedData(ArrayData):
    """``ArrayData`` whose training and validation splits are encoded once (``encoded[split]``, the data
    module's ``arrays(task, split)``) and whose training batches are bucketed (``trainer.bucket_boundaries``:
    a list, else the task's own). A subclass names its data module (``module``)."""

    bucket_boundaries: object = None
    encoded: Dict[str, object] = dataclasses.field(default_factory=dict, repr=False)

    @staticmethod
    def module():
        """The data module: ``arrays(task, split)`` and ``make_dataset(task, split, batch_size, ...)``."""
        raise NotImplementedError

    @classmethod
    def from_config(cls, cfg, **fields) -> "EncodedData":
        from omegaconf import OmegaConf

        data = super().from_config(cfg, **fields)
        bounds = cfg.trainer.bucket_boundaries
        data.bucket_boundaries = bounds if isinstance(bounds, (list, tuple)) or OmegaConf.is_list(bounds) else None
        data.encoded = {split: cls.module().arrays(data.task, split) for split in ("train", "val")}
        return data

    def dataset(self, split: str, shuffle: bool = False, seed: int = 0):
        return self.module().make_dataset(self.task, split, self.batch_size, shuffle=shuffle, seed=seed,
                                          bucket_boundaries=self.bucket_boundaries if shuffle else None,
                                          encoded=self.encoded[split])


@dataclasses.dataclass
class TrainData:
    """The task, its batching, and the numbers the loop reports (``tokens_per_epoch``)."""

    task: object
    batch_size: int  # global
    replica_batch_size: int
    replicas: int  # replicas in sync over all workers: a step takes one batch of each
    seed: int
    steps_per_epoch: Optional[int]
    bucket_boundaries: object
    tokens_per_epoch: float
    pad_to_bucket: bool = False  # fixed shapes per bucket, for XLA
    _bounds: Optional[List[int]] = dataclasses.field(default=None, repr=False)

    def train_batches(self, epoch: int, skip_steps: int = 0):
        """Epoch ``epoch``'s per-replica batches, all replicas' in turn (sharded by worker afterwards).

        Batches are formed (and bucketed) at the global batch size, as on one replica, and split
        into ``replicas`` equal parts, so every step sees the examples one replica would. With
        several replicas the few partial batches of a pass are left out (every replica needs an
        equal part). ``skip_steps`` steps are dropped from the front (a resumed epoch).
        """
        import tensorflow as tf

        from zoo.data import make_dataset

        ds = make_dataset(self.task, "train", self.batch_size, shuffle=True,
                          seed=epoch_seed(self.seed, epoch), bucket_boundaries=self.bucket_boundaries)
        if self.pad_to_bucket:
            if self._bounds is None:  # eagerly, once: the map below traces a graph
                self._bounds = self.boundaries() + [self.task.max_source_length + 1]
            ds = ds.map(self._pad_batch)
        if self.replicas > 1:
            ds = ds.filter(lambda x, y: tf.shape(y)[0] == self.batch_size)
        ds = limit_epoch(ds, self.steps_per_epoch, skip_steps)
        if self.replicas > 1:
            ds = ds.rebatch(self.replica_batch_size)
        return ds

    def val_batches(self):
        from zoo.data import make_dataset

        return make_dataset(self.task, "val", self.batch_size)

    def boundaries(self) -> List[int]:
        """The source-length bucket boundaries of the training batches ([] = no buckets)."""
        from zoo.data.task import encode, resolve_bucket_boundaries

        lengths = encode(self.task, "train")[0].row_lengths().numpy()
        return resolve_bucket_boundaries(self.task, self.bucket_boundaries, lengths) or []

    def _pad_batch(self, x, y):
        """Pads a batch to one of a bounded set of shapes: rows to the batch size, the source to
        its bucket's longest length (boundary - 1), the target to the maximum target length."""
        import tensorflow as tf

        (source, target_in), target_out = x, y
        bounds = tf.constant(self._bounds, tf.int32)
        length = tf.shape(source)[1]
        source_to = tf.gather(bounds, tf.searchsorted(bounds, tf.reshape(length, [1]), side="right"))[0] - 1
        rows = self.batch_size - tf.shape(source)[0]
        target_to = self.task.max_target_length

        def pad(t, width):
            t = tf.pad(t, [[0, rows], [0, width - tf.shape(t)[1]]])
            return tf.ensure_shape(t, [self.batch_size, None])

        return (pad(source, source_to), pad(target_in, target_to)), pad(target_out, target_to)


def load_data(cfg, replicas: int = 1) -> TrainData:
    """Loads ``cfg.data`` and sizes the batches for ``replicas`` replicas."""
    from zoo.data import load_task
    from zoo.data.task import target_token_count

    t = cfg.trainer
    batch_size = int(t.batch_size)
    if batch_size % replicas:
        raise ConfigError(f"trainer.batch_size={batch_size} is not valid with {replicas} replicas: "
                          f"the global batch must split evenly, e.g. trainer.batch_size={batch_size // replicas * replicas or replicas}.")
    task = load_task(cfg.data)
    if cfg.get("decoding") is not None:  # a beam wider than the built vocabulary, named before the model is built
        from zoo.export.translator import check_decoding

        check_decoding(cfg.decoding, int(task.target_tokenizer.vocab_size))
    tokens = float(target_token_count(task, "train"))
    steps = int(t.steps_per_epoch) if t.steps_per_epoch else None
    if steps:
        train_batches = math.ceil(len(task.splits["train"][0]) / batch_size)
        tokens *= min(1.0, steps / train_batches)
    return TrainData(task=task, batch_size=batch_size, replica_batch_size=batch_size // replicas, replicas=replicas,
                     seed=int(cfg.seed), steps_per_epoch=steps, bucket_boundaries=t.bucket_boundaries,
                     tokens_per_epoch=tokens, pad_to_bucket=bool(t.jit_compile))
