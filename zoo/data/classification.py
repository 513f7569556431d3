"""``ClassificationTask``: texts -> one class each (``task: classify``), and its tf.data pipeline.

The data side of the classification task kind (``zoo.training.classify``): a dataset module
(``zoo.data.listops``) returns a ``ClassificationTask``; ``make_dataset`` batches it for the shared
training loop and ``encode_texts`` is the one text-to-ids rule, used for the training batches and
inside the exported SavedModel alike.

**Labels in batches are ``class + 1``.** The shared loop (``zoo.training.fit``) scores token ids
and treats id 0 as padding (``losses.token_losses``), so class 0 (ListOps' value 0) travels as id
1; a classifier's ``call`` returns its ``C`` class logits behind a padding column, ``[B, 1, C + 1]``
(``zoo.models.self_attention.transformer_classifier``). Nothing else sees the shift: scoring, the
SavedModel and the metrics use class ids ``0..C-1``.

This module imports TensorFlow only inside its functions.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from zoo.data.task import length_boundaries

LABEL_OFFSET = 1  # batches carry class + 1: id 0 is padding to the loop's token loss


@dataclasses.dataclass
class ClassificationTask:
    """Texts and their classes per split, one tokenizer, the class names.

    ``splits[split] = (texts, classes)``, classes ints in ``[0, len(classes))``; ``strip`` is a regex
    of characters removed from a text before it is split into tokens (ListOps: LRA's parentheses);
    inputs longer than ``max_length`` tokens are cut (the training data have none longer).
    """

    name: str
    splits: Dict[str, Tuple[List[str], List[int]]]
    tokenizer: object
    classes: Tuple[str, ...]
    max_length: int
    strip: str = ""
    metric: str = "accuracy"
    fingerprint: Optional[str] = None
    attribution: Optional[str] = None
    info: Dict[str, object] = dataclasses.field(default_factory=dict)
    bucket_boundaries: Optional[List[int]] = None  # on the number of tokens

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def stats(self) -> Dict[str, object]:
        out = {"vocab_size": self.vocab_size, "num_classes": self.num_classes, "max_length": self.max_length}
        for split, (texts, _) in self.splits.items():
            out[f"{split}_examples"] = len(texts)
        out.update(self.info)
        return out

    def split_texts(self):
        """``(split, texts, profile)`` per split, what the run logs as its datasets: one text per
        example (the input, a TAB, its class), and the split's size and vocabulary."""
        for split, (texts, labels) in self.splits.items():
            yield split, [f"{t}\t{self.classes[y]}" for t, y in zip(texts, labels)], \
                {"examples": len(texts), "vocab_size": self.vocab_size}


def majority_class(labels: Sequence[int]) -> int:
    """The most frequent class of ``labels`` (the smallest id among ties)."""
    counts = collections.Counter(int(y) for y in labels)
    return min(counts, key=lambda c: (-counts[c], c))


def majority_accuracy(task: ClassificationTask, split: str = "test") -> float:
    """The accuracy on ``split`` of always answering the training split's most frequent class: the
    baseline a classifier must beat (LRA reports none; ListOps' classes are far from uniform)."""
    labels = task.splits[split][1]
    if not labels:
        return 0.0
    majority = majority_class(task.splits["train"][1])
    return float(np.mean([int(y) == majority for y in labels]))


def encode_texts(task: ClassificationTask, texts):
    """Strings ``[B]`` -> token ids ``[B, T]`` int32, padded with 0, at least one column, at most
    ``task.max_length``; in-graph (the SavedModel runs it on raw strings)."""
    import tensorflow as tf

    if task.strip:
        texts = tf.strings.regex_replace(texts, task.strip, " ")
    tokens = task.tokenizer.split(texts)[:, : task.max_length]
    ids = tf.cast(task.tokenizer.lookup(tokens), tf.int32).to_tensor(default_value=0)
    return tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]])


def arrays(task: ClassificationTask, split: str) -> Tuple[object, np.ndarray]:
    """``(ids ragged [N, T] int32, classes [N] int32)`` of a split."""
    import tensorflow as tf

    texts, labels = task.splits[split]
    text = tf.constant(list(texts), tf.string)
    if task.strip:
        text = tf.strings.regex_replace(text, task.strip, " ")
    ids = tf.cast(task.tokenizer.lookup(task.tokenizer.split(text)[:, : task.max_length]), tf.int32)
    return ids, np.asarray(labels, np.int32)


def make_dataset(task: ClassificationTask, split: str, batch_size: int, shuffle: bool = False, seed: int = 0,
                 bucket_boundaries=None, encoded=None):
    """``(ids [B, T] int32, class + 1 [B, 1] int32)`` batches, each padded to its longest input;
    training batches (``shuffle``) bucketed by length (``bucket_boundaries``: a list, or None for
    the task's own)."""
    import tensorflow as tf

    ids, labels = encoded if encoded is not None else arrays(task, split)
    ds = tf.data.Dataset.from_tensor_slices((ids, labels)).cache()
    if shuffle:
        ds = ds.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
    ds = ds.map(lambda x, y: (x, tf.reshape(y + LABEL_OFFSET, [1])), num_parallel_calls=tf.data.AUTOTUNE)
    boundaries = (list(bucket_boundaries) if bucket_boundaries is not None else task.bucket_boundaries) \
        if shuffle else None
    if boundaries:
        ds = ds.bucket_by_sequence_length(lambda x, y: tf.shape(x)[0], bucket_boundaries=boundaries,
                                          bucket_batch_sizes=[batch_size] * (len(boundaries) + 1))
    else:
        ds = ds.padded_batch(batch_size)
    return ds.prefetch(tf.data.AUTOTUNE)


def token_boundaries(texts: Sequence[str]) -> List[int]:
    """Bucket boundaries at the quantiles of the texts' token counts (whitespace tokens)."""
    return length_boundaries([len(t.split()) for t in texts])
