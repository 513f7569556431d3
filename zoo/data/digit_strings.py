"""``data=digit_strings``: images of 3-8 handwritten digits in a row; the target is the digit string.

The pieces are real scans: scikit-learn's ``load_digits``, the 1,797 8x8 scans of UCI's optical
recognition of handwritten digits (Alpaydin & Kaynak 1998), shipped inside scikit-learn's wheel, so
nothing is downloaded. An image is made as the multiple-object task of Ba et al. (2015) reads digit
sequences: ``n`` scans (``min_digits <= n <= max_digits``), each upscaled ``scale`` times (nearest
neighbour), placed left to right on a ``height x width`` canvas with a random gap (``min_gap`` to
``max_gap`` canvas pixels) between neighbours, a random vertical offset each, and the row shifted
by a random amount so it can sit anywhere across the canvas. ``clutter=N`` adds N fragments of
other scans (``fragment_size x fragment_size`` scan pixels cut at random), as the cluttered
translated MNIST of Mnih et al. (2014); a fragment is placed only where it touches no digit's box,
so every box holds its digit and nothing else (a fragment that finds no free place in
``PLACEMENT_TRIES`` random tries is left out, counted in ``info["clutter_dropped"]``).

**Gold alignment.** Each digit's box ``(x0, y0, x1, y1)`` is kept: canvas pixels, half-open
(columns ``x0 <= x < x1``, rows ``y0 <= y < y1``), the scan's full ``8 * scale`` square. The
pixels inside a box are exactly that scan's (``tests/data/test_digit_strings.py`` checks it);
``zoo.metrics.alignment.boxes_to_grid`` maps boxes onto a coarser attention grid.

**No scan in two splits.** The 1,797 scans are split first (by ``seed``, per digit class, so every
digit has scans in every split: ``val_scans`` and ``test_scans`` are the shares held out); the
images of a split use only that split's scans, fragments included.

**The arrays** (``DigitImages``, one per split, in ``task.splits``)::

    images   uint8 [N, height, width]   0 = background, 255 = ink (the scans' 0-16 scaled)
    targets  N strings of digits         "3917"
    boxes    int32 [N, max_digits, 4]   (x0, y0, x1, y1) per digit, left to right; 0 past the length
    lengths  int32 [N]                   digits in each image
    scans    int32 [N, max_digits]       the ``load_digits`` index of each digit's scan; -1 past the length

**Targets as ids**: one fixed vocabulary, ``VOCABULARY`` = ``<pad> <unk> <bos> <eos> 0 1 ... 9``, so
digit ``d`` is id ``4 + d``, whatever the data (``target_ids``, ``target_tokenizer``: the zoo's
``CharTokenizer`` over it, to detokenize inside a SavedModel).

**How a task kind uses it.** The text ``Task`` pipeline is not bent to carry images: an image task kind
(``task: image``) calls ``load_task(cfg.data)`` and gets this module's ``DigitStringsTask``;
``make_dataset(task, split, batch_size, shuffle, seed)`` gives ``((images uint8 [B, H, W],
target_in [B, T]), target_out [B, T])`` batches (``T = max_digits + 1``: ``<bos>`` + digits in, digits +
``<eos>`` out, padded with 0), the shape a decoder's teacher forcing and the zoo's per-token masked
loss take; scoring decodes the test images, and hands the strings, the attention and
``boxes_to_grid(split.boxes, (height, width), grid)`` to ``zoo.metrics`` (``exact_match``,
``digit_error_rate``, ``alignment_accuracy``, ``alignment_mass``).

Importing this module imports neither TensorFlow nor scikit-learn; building the task imports
scikit-learn, ``make_dataset`` and ``target_tokenizer`` TensorFlow.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Dict, List, Tuple

import numpy as np

from zoo import catalog
from zoo.checks import enforce_config
from zoo.data.constraints import SPLIT_SIZES
from zoo.data.task import DATASETS
from zoo.errors import ConfigError
from zoo.tokens import BOS_ID, EOS_ID, PAD_ID, SPECIALS

SCAN_SIZE = catalog.DIGIT_SCAN_SIZE  # load_digits' scans are 8x8
SCAN_MAX = 16  # ... with values 0-16
DIGITS = "0123456789"
VOCABULARY = SPECIALS + tuple(DIGITS)  # digit d is id 4 + d
SPLITS = ("train", "val", "test")
PLACEMENT_TRIES = 50  # random places tried for a clutter fragment before it is left out
ATTRIBUTION = ("Handwritten digit scans: UCI Optical Recognition of Handwritten Digits (E. Alpaydin, C. Kaynak, "
               "1998; CC BY 4.0), as shipped by scikit-learn (sklearn.datasets.load_digits).")

# The rules of data.<key>, declared once: the validator reads them before TensorFlow starts
# (zoo.catalog.data_constraints) and build_task raises the same lines.
# The strings' rules, shared with spoken_digits (the same strings, spoken): the splits' sizes and the
# digits a string.
STRING_CONSTRAINTS = SPLIT_SIZES + (
    {"rule": "at_least", "key": "min_digits", "min": 1, "integer": True},
    {"rule": "not_above", "key": "min_digits", "of": "max_digits"},
    {"rule": "at_least", "key": "max_digits", "min": 1, "integer": True},
)
CONSTRAINTS = STRING_CONSTRAINTS + (  # the images'
    {"rule": "at_least", "key": "scale", "min": 1, "integer": True},
    {"rule": "at_least", "key": "height", "min": 1, "integer": True},
    {"rule": "at_least", "key": "width", "min": 1, "integer": True},
    {"rule": "at_least", "key": "min_gap", "min": 0, "integer": True},
    {"rule": "not_above", "key": "min_gap", "of": "max_gap"},
    {"rule": "at_least", "key": "max_gap", "min": 0, "integer": True},
    {"rule": "at_least", "key": "clutter", "min": 0, "integer": True},
    {"rule": "at_least", "key": "fragment_size", "min": 1, "integer": True},
    {"rule": "at_most", "key": "fragment_size", "max": 8, "integer": True, "why": "a scan is 8x8"},
    {"rule": "above", "key": "val_scans", "min": 0, "why": "a share of the 1,797 scans"},
    {"rule": "at_most", "key": "val_scans", "max": 0.4},
    {"rule": "above", "key": "test_scans", "min": 0, "why": "a share of the 1,797 scans"},
    {"rule": "at_most", "key": "test_scans", "max": 0.4},
)


@dataclasses.dataclass
class DigitImages:
    """One split's images and their gold alignment (shapes in the module docstring)."""

    images: np.ndarray
    targets: List[str]
    boxes: np.ndarray
    lengths: np.ndarray
    scans: np.ndarray

    def __len__(self) -> int:
        return len(self.targets)


class DigitStringTargets:
    """The target side of a task whose targets are digit strings (this one's images, spoken_digits'
    utterances): a task with ``max_digits``, ``vocabulary`` (``VOCABULARY``) and ``splits`` whose
    ``targets`` are the strings gets its decoder steps, vocabulary size, ids and tokenizer here."""

    @property
    def max_target_length(self) -> int:
        """Decoder steps: the longest string and ``<eos>``."""
        return self.max_digits + 1

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def target_ids(self, split: str) -> np.ndarray:
        """int32 ``[N, max_digits + 2]``: ``<bos>``, the digits' ids, ``<eos>``, then ``<pad>`` (0)."""
        return target_ids(self.splits[split].targets, self.max_digits)

    def target_tokenizer(self):
        """The zoo's ``CharTokenizer`` over ``VOCABULARY`` (ids as ``target_ids``; imports TensorFlow)."""
        from zoo.data.tokenizers.char import CharTokenizer

        return CharTokenizer(list(self.vocabulary), lowercase=False, name="target_tokenizer")


@dataclasses.dataclass
class DigitStringsTask(DigitStringTargets):
    """``data=digit_strings``: the splits' arrays, the canvas, the target vocabulary."""

    name: str
    splits: Dict[str, DigitImages]
    height: int
    width: int
    max_digits: int
    scan_pools: Dict[str, np.ndarray]  # the load_digits indices each split draws from (disjoint)
    metric: str = "exact_match"
    attribution: str = ATTRIBUTION
    vocabulary: Tuple[str, ...] = VOCABULARY
    info: Dict[str, object] = dataclasses.field(default_factory=dict)

    def stats(self) -> Dict[str, object]:
        out = {"target_vocab_size": self.vocab_size, "height": self.height, "width": self.width,
               "max_digits": self.max_digits}
        for split, data in self.splits.items():
            out[f"{split}_examples"] = len(data)
            out[f"{split}_scans"] = len(self.scan_pools[split])
        out.update(self.info)
        return out

    def split_texts(self):
        """``(split, texts, profile)`` per split, what a run logs as its datasets: each image's target
        and its scans (so the digest changes with the images), and the split's sizes."""
        for split, data in self.splits.items():
            texts = [f"{t}\t{' '.join(str(s) for s in row[:n])}"
                     for t, row, n in zip(data.targets, data.scans, data.lengths)]
            yield split, texts, {"examples": len(data), "height": self.height, "width": self.width}


def target_ids(targets, max_digits: int) -> np.ndarray:
    """int32 ``[N, max_digits + 2]``: ``<bos> d_1 ... d_n <eos>`` as ids of ``VOCABULARY``, 0-padded."""
    out = np.full((len(targets), max_digits + 2), PAD_ID, dtype=np.int32)
    for row, text in zip(out, targets):
        row[0] = BOS_ID
        row[1:len(text) + 1] = [len(SPECIALS) + DIGITS.index(c) for c in text]
        row[len(text) + 1] = EOS_ID
    return out


@functools.lru_cache(maxsize=1)
def load_scans() -> Tuple[np.ndarray, np.ndarray]:
    """``(scans uint8 [1797, 8, 8], labels int64 [1797])`` from ``sklearn.datasets.load_digits``;
    the scans' 0-16 grey levels scaled to 0-255. Read-only arrays (cached)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    scans = np.rint(digits.images * (255.0 / SCAN_MAX)).astype(np.uint8)
    labels = digits.target.astype(np.int64)
    scans.flags.writeable = labels.flags.writeable = False
    return scans, labels


def split_scans(labels: np.ndarray, val_share: float, test_share: float, seed: int) -> Dict[str, np.ndarray]:
    """Disjoint, sorted scan indices per split: of each digit's scans (shuffled by ``seed``),
    ``round(val_share * n)`` go to validation, ``round(test_share * n)`` to test, the rest to training."""
    rng = np.random.default_rng([seed, 1797])
    pools = {split: [] for split in SPLITS}
    for digit in range(10):
        members = rng.permutation(np.flatnonzero(labels == digit))
        n_val, n_test = int(round(val_share * len(members))), int(round(test_share * len(members)))
        pools["val"].append(members[:n_val])
        pools["test"].append(members[n_val:n_val + n_test])
        pools["train"].append(members[n_val + n_test:])
    return {split: np.sort(np.concatenate(parts)) for split, parts in pools.items()}


def upscale(scan: np.ndarray, scale: int) -> np.ndarray:
    """Nearest-neighbour upscaling: each pixel becomes a ``scale x scale`` block."""
    return np.repeat(np.repeat(scan, scale, axis=0), scale, axis=1)


@functools.lru_cache(maxsize=2)
def _upscaled(scale: int) -> np.ndarray:
    scans = np.repeat(np.repeat(load_scans()[0], scale, axis=1), scale, axis=2)
    scans.flags.writeable = False
    return scans


def upscale_all(scans: np.ndarray, scale: int) -> np.ndarray:
    """``[N, 8 * scale, 8 * scale]``: every scan upscaled (``load_scans()``'s cached once per scale)."""
    if scans is load_scans()[0]:
        return _upscaled(scale)
    return np.repeat(np.repeat(scans, scale, axis=1), scale, axis=2)


def compose(scans: np.ndarray, labels: np.ndarray, pool: np.ndarray, rng: np.random.Generator, num_digits: int,
            height: int, width: int, scale: int = 1, min_gap: int = 0, max_gap: int = 0, clutter: int = 0,
            fragment_size: int = 4) -> Tuple[np.ndarray, str, np.ndarray, np.ndarray, int]:
    """One image: ``(image uint8 [height, width], target, boxes int32 [num_digits, 4], scan indices
    [num_digits], fragments placed)``, drawing scans from ``pool`` with ``rng`` (the module docstring
    says how). The row must fit: ``num_digits * 8 * scale + (num_digits - 1) * max_gap <= width``."""
    side = SCAN_SIZE * scale
    if scans.shape[1] != side:  # generate passes the scans upscaled once
        scans = upscale_all(scans, scale)
    chosen = rng.choice(pool, size=num_digits)
    gaps = rng.integers(min_gap, max_gap + 1, size=num_digits - 1)
    row_width = num_digits * side + int(gaps.sum())
    if row_width > width or side > height:
        raise ValueError(f"{num_digits} digits of {side} pixels with gaps {gaps.tolist()} do not fit a "
                         f"{height}x{width} canvas")
    image = np.zeros((height, width), dtype=np.uint8)
    boxes = np.zeros((num_digits, 4), dtype=np.int32)
    x = int(rng.integers(0, width - row_width + 1))
    tops = rng.integers(0, height - side + 1, size=num_digits)
    for i, index in enumerate(chosen):
        y = int(tops[i])
        image[y:y + side, x:x + side] = scans[index]
        boxes[i] = (x, y, x + side, y + side)
        x += side + (int(gaps[i]) if i < num_digits - 1 else 0)
    placed = 0
    if clutter:
        occupied = np.zeros((height, width), dtype=bool)
        for x0, y0, x1, y1 in boxes:
            occupied[y0:y1, x0:x1] = True
        patch = fragment_size * scale
        sources = rng.choice(pool, size=clutter)
        corners = rng.integers(0, SCAN_SIZE - fragment_size + 1, size=(clutter, 2)) * scale
        ys = rng.integers(0, height - patch + 1, size=(clutter, PLACEMENT_TRIES))
        xs = rng.integers(0, width - patch + 1, size=(clutter, PLACEMENT_TRIES))
        for source, (top, left), tries_y, tries_x in zip(sources, corners, ys, xs):
            for y, x in zip(tries_y, tries_x):  # a free place by rejection: never on a digit (on other fragments, yes)
                if not occupied[y:y + patch, x:x + patch].any():
                    region = image[y:y + patch, x:x + patch]
                    np.maximum(region, scans[source][top:top + patch, left:left + patch], out=region)
                    placed += 1
                    break
    target = "".join(DIGITS[labels[i]] for i in chosen)
    return image, target, boxes, chosen.astype(np.int32), placed


def generate(count: int, pool: np.ndarray, seed, min_digits: int, max_digits: int, height: int, width: int,
             scale: int = 1, min_gap: int = 0, max_gap: int = 0, clutter: int = 0,
             fragment_size: int = 4) -> Tuple[DigitImages, int]:
    """``count`` images from the scans of ``pool`` (the same for the same arguments), and how many
    clutter fragments found no free place."""
    scans, labels = load_scans()
    scans = upscale_all(scans, scale)
    rng = np.random.default_rng(seed)
    images = np.zeros((count, height, width), dtype=np.uint8)
    boxes = np.zeros((count, max_digits, 4), dtype=np.int32)
    chosen = np.full((count, max_digits), -1, dtype=np.int32)
    lengths = rng.integers(min_digits, max_digits + 1, size=count).astype(np.int32)
    targets, dropped = [], 0
    for n in range(count):
        image, target, box, scan, placed = compose(scans, labels, pool, rng, int(lengths[n]), height, width, scale,
                                                   min_gap, max_gap, clutter, fragment_size)
        images[n], boxes[n, :len(box)], chosen[n, :len(scan)] = image, box, scan
        targets.append(target)
        dropped += clutter - placed
    return DigitImages(images, targets, boxes, lengths, chosen), dropped


@DATASETS.register("digit_strings", task="image")
def build_task(seed: int = 0, train_size: int = 10000, val_size: int = 1000, test_size: int = 1000,
               min_digits: int = 3, max_digits: int = 8, height: int = 32, width: int = 160, scale: int = 2,
               min_gap: int = 0, max_gap: int = 4, clutter: int = 0, fragment_size: int = 4,
               val_scans: float = 0.15, test_scans: float = 0.15) -> DigitStringsTask:
    """``data=digit_strings``: the scans split by ``seed``, then each split's images from its own scans."""
    enforce_config(CONSTRAINTS, "data", train_size=train_size, val_size=val_size, test_size=test_size,
                   min_digits=min_digits, max_digits=max_digits, scale=scale, height=height, width=width,
                   min_gap=min_gap, max_gap=max_gap, clutter=clutter, fragment_size=fragment_size,
                   val_scans=val_scans, test_scans=test_scans)
    problem = catalog.digit_canvas_problem(max_digits, height, width, scale, max_gap)
    if problem:
        raise ConfigError(problem)
    _, labels = load_scans()
    pools = split_scans(labels, val_scans, test_scans, seed)
    sizes = {"train": train_size, "val": val_size, "test": test_size}
    splits, dropped = {}, 0
    for number, split in enumerate(SPLITS):
        splits[split], lost = generate(sizes[split], pools[split], [seed, number], min_digits, max_digits, height,
                                       width, scale, min_gap, max_gap, clutter, fragment_size)
        dropped += lost
    info = {"clutter_dropped": dropped} if clutter else {}
    return DigitStringsTask("digit_strings", splits, height, width, max_digits, pools, info=info)


def make_dataset(task: DigitStringsTask, split: str, batch_size: int, shuffle: bool = False, seed: int = 0):
    """``((images uint8 [B, H, W], target_in int32 [B, T]), target_out int32 [B, T])`` batches of a
    split, ``T = max_digits + 1`` (0-padded: the zoo's per-token loss masks id 0)."""
    import tensorflow as tf

    data = task.splits[split]
    ids = task.target_ids(split)
    ds = tf.data.Dataset.from_tensor_slices((data.images, ids))
    if shuffle:
        ds = ds.shuffle(len(data), seed=seed, reshuffle_each_iteration=True)
    ds = ds.map(lambda image, t: ((image, t[:-1]), t[1:]), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)
