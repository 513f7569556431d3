"""``Task``: text splits + tokenizers; ``make_dataset``: a batched, bucketed tf.data pipeline.

``DATASETS`` holds the builders: each dataset module of ``zoo.data`` (``dates``, ``reverse``,
``tatoeba``, ``kernel_regression``) registers its own under the name of its config
``conf/data/<name>.yaml``, and the first lookup imports them all. Importing this module imports no
TensorFlow; the functions that build tensors import it when called.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import numpy as np

from zoo.data.registry import PackageRegistry
from zoo.errors import ConfigError
from zoo.tokens import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:  # annotations only: importing this module must not import TensorFlow
    import tensorflow as tf

DATASETS = PackageRegistry("data", "zoo.data")
NUM_BUCKETS = 6


@dataclasses.dataclass
class Task:
    """A sequence-to-sequence task: text splits and the tokenizers for both sides."""

    name: str
    splits: Dict[str, Tuple[List[str], List[str]]]
    source_tokenizer: object
    target_tokenizer: object
    max_source_length: int  # in tokens, <eos> included; longer inputs are truncated
    max_target_length: int  # in tokens, <eos> included; decoding stops there
    metric: str = "exact_match"
    fingerprint: Optional[str] = None  # sha256 of the corpus file, for a tag; None for generated data
    info: Dict[str, object] = dataclasses.field(default_factory=dict)  # corpus statistics, see stats()
    bucket_boundaries: Optional[List[int]] = None  # source-length buckets from the data (None: no preference)
    attribution: Optional[str] = None  # license and credit that artifacts made from the data must carry

    def stats(self) -> Dict[str, object]:
        """Flat statistics for MLflow params: vocabulary sizes, examples per split, and the
        task's own ``info`` (for corpora: lines read, pairs kept, dropped by reason, lengths)."""
        out = {"source_vocab_size": self.source_tokenizer.vocab_size,
               "target_vocab_size": self.target_tokenizer.vocab_size}
        for split, (src, _) in self.splits.items():
            out[f"{split}_examples"] = len(src)
        out.update(self.info)
        return out

    def split_texts(self):
        """``(split, texts, profile)`` per split, what the run logs as its datasets: the texts of both
        sides, and the split's size and vocabularies."""
        for split, (sources, targets) in self.splits.items():
            yield split, [*sources, *targets], {"examples": len(sources),
                                                 "source_vocab_size": self.source_tokenizer.vocab_size,
                                                 "target_vocab_size": self.target_tokenizer.vocab_size}


def load_task(data_cfg) -> Task:
    """Builds the task named ``data_cfg.name`` with the rest of ``data_cfg`` as arguments.

    ``data_cfg.task`` (``seq2seq`` when absent) is the kind of task, the builder's registry
    ``meta``, not one of its arguments. ``kernel_regression`` gives its arrays, not a ``Task``.
    """
    cfg = dict(data_cfg)
    name = cfg.pop("name")
    cfg.pop("task", None)
    return DATASETS.create(name, **cfg)


def names() -> List[str]:
    """Sorted names of the registered datasets (imports the dataset modules; no TensorFlow)."""
    return DATASETS.names()


def encode(task: Task, split: str) -> Tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """Token ids of a split: sources end with <eos>, targets are <bos> ... <eos>."""
    import tensorflow as tf

    sources, targets = task.splits[split]
    src = task.source_tokenizer.tokenize(tf.constant(sources))[:, : task.max_source_length - 1]
    tgt = task.target_tokenizer.tokenize(tf.constant(targets))[:, : task.max_target_length - 1]
    batch = tf.shape(src.row_lengths())[0]
    eos = tf.fill([batch, 1], tf.constant(EOS_ID, tf.int64))
    bos = tf.fill([batch, 1], tf.constant(BOS_ID, tf.int64))
    src = tf.concat([src, eos], axis=1)
    tgt = tf.concat([bos, tgt, eos], axis=1)
    return src, tgt


def length_boundaries(lengths: Sequence[int], num_buckets: int = NUM_BUCKETS) -> List[int]:
    """Bucket boundaries at the length quantiles ``1/n, ..., (n-1)/n`` (exclusive upper bounds)."""
    lengths = np.asarray(lengths)
    if lengths.size == 0:
        return []
    quantiles = np.quantile(lengths, np.arange(1, num_buckets) / num_buckets)
    return sorted({int(q) + 1 for q in quantiles if int(q) + 1 > 1 and int(q) + 1 <= int(lengths.max())})


def resolve_bucket_boundaries(task: Task, bucket_boundaries, source_lengths=None) -> Optional[List[int]]:
    """The source-length bucket boundaries ``make_dataset`` uses.

    A list is used as given. ``"auto"``: the task's ``bucket_boundaries`` or, when it has none,
    boundaries at the length quantiles of ``source_lengths``. ``None``: the task's
    ``bucket_boundaries`` (tatoeba derives them from the training lengths) or no bucketing.
    """
    if isinstance(bucket_boundaries, str):
        if bucket_boundaries != "auto":
            raise ConfigError(f"bucket_boundaries={bucket_boundaries!r} is not valid: expected a list of "
                             f"lengths, 'auto' or null.")
        if task.bucket_boundaries:
            return list(task.bucket_boundaries)
        return length_boundaries(np.asarray(source_lengths)) if source_lengths is not None else None
    if bucket_boundaries is None:
        return list(task.bucket_boundaries) if task.bucket_boundaries else None
    return [int(b) for b in bucket_boundaries]


def make_dataset(task: Task, split: str, batch_size: int, shuffle: bool = False, seed: int = 0,
                 bucket_boundaries=None) -> tf.data.Dataset:
    """``((source, target_in), target_out)`` batches, padded with 0 to the batch's longest.

    Training batches are bucketed by source length so little compute goes to padding
    (boundaries: ``resolve_bucket_boundaries``).
    """
    import tensorflow as tf

    src, tgt = encode(task, split)
    if shuffle:
        bucket_boundaries = resolve_bucket_boundaries(task, bucket_boundaries, src.row_lengths().numpy())
    ds = tf.data.Dataset.from_tensor_slices((tf.cast(src, tf.int32), tf.cast(tgt, tf.int32)))
    ds = ds.cache()
    if shuffle:
        ds = ds.shuffle(len(task.splits[split][0]), seed=seed, reshuffle_each_iteration=True)

    def to_example(s, t):
        return (s, t[:-1]), t[1:]

    ds = ds.map(to_example, num_parallel_calls=tf.data.AUTOTUNE)
    if shuffle and bucket_boundaries:
        ds = ds.bucket_by_sequence_length(
            lambda x, y: tf.shape(x[0])[0], bucket_boundaries=list(bucket_boundaries),
            bucket_batch_sizes=[batch_size] * (len(bucket_boundaries) + 1), pad_to_bucket_boundary=False)
    else:
        ds = ds.padded_batch(batch_size, padding_values=((PAD_ID, PAD_ID), PAD_ID))
    return ds.prefetch(tf.data.AUTOTUNE)


def target_token_count(task: Task, split: str) -> int:
    """Number of target tokens the loss sees in one pass over ``split`` (<eos> included)."""
    _, tgt = encode(task, split)
    return int(np.sum(tgt.row_lengths().numpy() - 1))
