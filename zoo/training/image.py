"""The image task kind (``task: image`` models, e.g. ``show_attend_tell``, on ``data=digit_strings``) of
the one run lifecycle.

What differs from translation lives here (``ImageKind``): the data (``zoo.data.digit_strings``'s
``((images uint8 [B, H, W], target_in [B, T]), target_out [B, T])`` batches, the target ids of its
fixed digit vocabulary), the model's size (``target_vocab_size`` from the data), and the scoring:
greedy decoding (``zoo.decoding.greedy_decode``) of the validation images gives ``val_exact_match``
per epoch, of the test images ``test_exact_match``, ``test_digit_error_rate`` and, against each
digit's gold box mapped onto the model's feature grid (``zoo.metrics.alignment.boxes_to_grid``, the
grid ``model.grid_shape(H, W)``), ``test_alignment_accuracy`` and ``test_alignment_mass``; the test
predictions go to ``predictions.csv``. The loop is ``zoo.training.fit.fit`` unchanged (the per-token
loss of teacher forcing, plus ``model.losses``: the doubly stochastic penalty).

The export is a SavedModel whose ``read(images uint8 [B, H, W])`` returns the text and the attention
``[B, T_out, h, w]`` (``zoo.export.image_reader``), the ``.keras`` model and the run's config in its
``assets.extra``; no MLflow pyfunc model is logged for it yet.
"""

from __future__ import annotations

import csv
import hashlib
import os
from typing import Dict, List

import numpy as np

import zoo.metrics
from zoo.config import model_kwargs
from zoo.metrics.alignment import boxes_to_grid
from zoo.tokens import EOS_ID, SPECIALS
from zoo.training import log
from zoo.training.data import ArrayData
from zoo.training.lifecycle import ONE_REPLICA_FLOAT32, TaskKind
from zoo.training.model import create_model

TEST_METRICS = ("exact_match", "digit_error_rate", "alignment_accuracy", "alignment_mass")
TRAINER_CONSTRAINTS = ONE_REPLICA_FLOAT32 + (  # refused before TensorFlow starts (zoo.config.task_kind_problems)
    {"rule": "one_of", "key": "jit_compile", "values": (False,),
     "why": "its decoder's teacher forcing is a scan, which XLA cannot differentiate"},
)


class ImageData(ArrayData):
    """``ArrayData`` of ``zoo.data.digit_strings``: ``((images, target_in), target_out)`` batches; the
    target tokens of a row are its digits and ``<eos>``."""

    def dataset(self, split: str, shuffle: bool = False, seed: int = 0):
        from zoo.data.digit_strings import make_dataset

        return make_dataset(self.task, split, self.batch_size, shuffle=shuffle, seed=seed)

    def train_rows(self) -> int:
        return len(self.task.splits["train"].targets)

    def tokens_per_row(self) -> float:
        ids = self.task.target_ids("train")[:, 1:]
        return float(np.count_nonzero(ids)) / max(len(ids), 1)


def load_image_data(cfg) -> ImageData:
    data = ImageData.from_config(cfg)
    task = data.task
    if getattr(task, "fingerprint", None) is None:  # what the run records as the data's sha256
        digest = hashlib.sha256()
        for split in sorted(task.splits):
            digest.update(np.ascontiguousarray(task.splits[split].images).tobytes())
            digest.update("\n".join(task.splits[split].targets).encode())
        task.fingerprint = digest.hexdigest()
    return data


def ids_to_text(ids, vocabulary) -> str:
    """The digits of one decoded row, up to its ``<eos>`` (special tokens dropped)."""
    out = []
    for i in ids:
        if int(i) == EOS_ID:
            break
        if int(i) >= len(SPECIALS):
            out.append(vocabulary[int(i)])
    return "".join(out)


def read_images(model, task, split: str, batch_size: int):
    """Greedy decoding of a split: ``(texts [N], attention [N] of [T_out, h, w])``."""
    import tensorflow as tf

    from zoo.decoding import greedy_decode

    images = task.splits[split].images
    grid = model.grid_shape(task.height, task.width)
    decode = tf.function(lambda x: greedy_decode(model, x, task.max_target_length)[:2], reduce_retracing=True,
                         autograph=False)
    texts, attention = [], []
    for start in range(0, len(images), batch_size):
        ids, weights = decode(tf.constant(images[start:start + batch_size]))
        ids, weights = ids.numpy(), weights.numpy()
        for row, row_weights in zip(ids, weights):
            texts.append(ids_to_text(row, task.vocabulary))
            attention.append(row_weights.reshape(row_weights.shape[0], *grid))
    return texts, attention


def score_split(model, task, split: str, batch_size: int):
    """``(metrics, hypotheses)``: ``TEST_METRICS`` of the greedy readings of ``split``."""
    texts, attention = read_images(model, task, split, batch_size)
    data = task.splits[split]
    regions = boxes_to_grid(data.boxes, (task.height, task.width), model.grid_shape(task.height, task.width))
    metrics = {name: zoo.metrics.get(name).score(texts, data.targets, attention=attention, regions=list(regions))
               for name in TEST_METRICS}
    return {k: (float("nan") if v is None else v) for k, v in metrics.items()}, texts


def write_predictions(path, references: List[str], hypotheses: List[str], limit: int) -> str:
    from zoo.metrics.digit_error_rate import digit_error_rate

    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["index", "reference", "hypothesis", "correct", "digit_error_rate"])
        for i, (ref, hyp) in enumerate(zip(references[:limit], hypotheses[:limit])):
            writer.writerow([i, ref, hyp, int(ref == hyp), f"{digit_error_rate([hyp], [ref]):.4f}"])
    return str(path)


def build_image_model(cfg, task):
    """``zoo.models.create(cfg.model.name, target_vocab_size=..., ...)``, built."""
    return create_model(cfg.model.name, target_vocab_size=task.vocab_size, **model_kwargs(cfg.model)).ensure_built()


class ImageKind(TaskKind):
    """Images to digit strings for the run lifecycle (``zoo.training.lifecycle.run``): ``ImageData``, a
    ``task: image`` model, exact match per epoch, the digit and alignment metrics at the end."""

    def build_data(self, runtime) -> ImageData:
        return load_image_data(self.cfg)

    def new_model(self, data):
        return build_image_model(self.cfg, data.task)

    def metric(self, data) -> str:
        return "exact_match"

    def validation(self, data, model, runtime):
        batch_size = int(self.cfg.trainer.batch_size)

        def val_metrics() -> Dict[str, float]:
            texts, _ = read_images(model, data.task, "val", batch_size)
            return {"exact_match": zoo.metrics.get("exact_match").score(texts, data.task.splits["val"].targets)}

        return val_metrics

    def score(self, data, model, workdir: str) -> Dict[str, float]:
        metrics, texts = score_split(model, data.task, "test", int(self.cfg.trainer.batch_size))
        path = write_predictions(os.path.join(workdir, "predictions.csv"), data.task.splits["test"].targets, texts,
                                 int(self.cfg.tracking.predictions))
        log.log_files([path])
        metrics = {f"test_{k}": v for k, v in metrics.items()}
        log.log_metrics(metrics)
        return metrics

    def export(self, data, model, config_yaml: str, workdir: str) -> Dict[str, str]:
        """``saved_model/``: ``read(images uint8 [B, H, W])`` -> text, ids, attention ``[B, T_out, h, w]``
        (``zoo.export.image_reader``), with ``assets.extra/model.keras`` and ``config.yaml``."""
        from zoo.export.image_reader import ImageReader

        if not all(np.all(np.isfinite(w)) for w in model.get_weights()):
            raise ValueError("The model's weights hold NaN or infinite values; it is not exported.")
        saved_dir = os.path.join(workdir, "saved_model")
        ImageReader(model, data.task).save(saved_dir, config_yaml=config_yaml)
        model.save(os.path.join(saved_dir, "assets.extra", "model.keras"))
        return {"saved_model": saved_dir}

    def summary(self, data, metrics: Dict[str, float], epochs: int, train_seconds: float) -> str:
        return (f"test_exact_match = {metrics['test_exact_match']:.4f}   digit error rate = "
                f"{metrics['test_digit_error_rate']:.4f}   alignment accuracy = "
                f"{metrics['test_alignment_accuracy']:.3f}   ({epochs} epochs, {train_seconds:.0f} s training)")
