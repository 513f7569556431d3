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
``assets.extra``; the MLflow pyfunc model over it (``tracking.log_pyfunc``) reads a DataFrame's ``image``
column of canvases or image files (``zoo/export/image_pyfunc_model.py``).
"""

from __future__ import annotations

import hashlib

import numpy as np

from zoo.config import model_kwargs
from zoo.metrics.alignment import boxes_to_grid
from zoo.tokens import EOS_ID, SPECIALS
from zoo.training.digit_strings import DigitStringData, DigitStringKind
from zoo.training.lifecycle import ONE_REPLICA_FLOAT32
from zoo.training.model import create_model

TRAINER_CONSTRAINTS = ONE_REPLICA_FLOAT32 + (  # refused before TensorFlow starts (zoo.config.task_kind_problems)
    {"rule": "one_of", "key": "jit_compile", "values": (False,),
     "why": "its decoder's teacher forcing is a scan, which XLA cannot differentiate"},
)


class ImageData(DigitStringData):
    """``DigitStringData`` of ``zoo.data.digit_strings``: ``((images, target_in), target_out)`` batches."""

    def dataset(self, split: str, shuffle: bool = False, seed: int = 0):
        from zoo.data.digit_strings import make_dataset

        return make_dataset(self.task, split, self.batch_size, shuffle=shuffle, seed=seed)

    def train_rows(self) -> int:
        return len(self.task.splits["train"].targets)


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


def read_images(reader, task, split: str, batch_size: int):
    """Greedy decoding of a split through ``reader`` (an ``ImageReader``): ``(texts [N], attention [N] of
    [T_out, h, w])``."""
    images = task.splits[split].images
    texts, attention = [], []
    for start in range(0, len(images), batch_size):
        out = reader.read(images[start:start + batch_size])
        texts.extend(ids_to_text(row, task.vocabulary) for row in out["ids"].numpy())
        attention.extend(out["attention"].numpy())
    return texts, attention


def build_image_model(cfg, task):
    """``zoo.models.create(cfg.model.name, target_vocab_size=..., ...)``, built."""
    return create_model(cfg.model.name, target_vocab_size=task.vocab_size, **model_kwargs(cfg.model)).ensure_built()


class ImageKind(DigitStringKind):
    """Images to digit strings for the run lifecycle (``zoo.training.lifecycle.run``): ``ImageData``, a
    ``task: image`` model; read by greedy decoding, each digit's gold box mapped onto the model's grid."""

    def build_data(self, runtime) -> ImageData:
        return load_image_data(self.cfg)

    def new_model(self, data):
        return build_image_model(self.cfg, data.task)

    def read(self, data, model, split: str, batch_size: int):
        return read_images(self.exporter(data, model), data.task, split, batch_size)

    def gold_regions(self, data, model, split: str):
        task = data.task
        return boxes_to_grid(task.splits[split].boxes, (task.height, task.width),
                             model.grid_shape(task.height, task.width))

    def explorer_views(self, data, index: int, text: str, attention, region) -> list:
        """Per output digit, its weights over the feature grid drawn over the image's pixels, the gold
        box of the digit in its place outlined; then every output token's weights over the cells."""
        from zoo.plots.explorer import view

        weights = np.asarray(attention)  # [T_out, h, w]
        h, w = weights.shape[1:]
        image = data.task.splits["test"].images[index]
        tokens = (list(text) + ["<eos>"])[:weights.shape[0]]
        cells = [[(r, c) for r in range(y0, y1) for c in range(x0, x1)] for x0, y0, x1, y1 in np.asarray(region)]
        views = [view(f"output {t + 1} ({token!r}) over the image", [f"row {r}" for r in range(h)],
                      [f"col {c}" for c in range(w)], weights[t],
                      gold_cells=cells[t] if t < len(cells) else None, background=image)
                 for t, token in enumerate(tokens)]
        flat = weights.reshape(len(weights), h * w)
        views.append(view("every output over the grid's cells (row-major)", tokens,
                          [f"{r},{c}" for r in range(h) for c in range(w)], flat,
                          gold_cells=[(t, r * w + c) for t, box in enumerate(cells[:len(tokens)]) for r, c in box]))
        return views

    def exporter(self, data, model):
        """``read(images uint8 [B, H, W])`` -> text, ids, attention ``[B, T_out, h, w]``
        (``zoo.export.image_reader``): made once per model, so every epoch's validation and the scoring
        share one trace of its greedy search."""
        from zoo.export.image_reader import ImageReader

        return self.module_of(model, lambda: ImageReader(model, data.task))

    def log_served_model(self, saved_model: str) -> None:
        from zoo.export.pyfunc import log_image_pyfunc

        log_image_pyfunc(saved_model)
