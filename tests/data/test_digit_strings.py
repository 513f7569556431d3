"""``zoo.data.digit_strings``: images of handwritten digit strings and their gold boxes.

The boxes are checked against the pieces placed: the pixels inside each box are that scan's
(upscaled), nothing is drawn outside them without clutter, and clutter never touches a box.
Tiny canvases and a few dozen images keep it fast."""

import numpy as np
import pytest

from zoo.data import digit_strings
from zoo.data.digit_strings import build_task, compose, load_scans, split_scans, target_ids, upscale
from zoo.errors import ConfigError

TINY = dict(train_size=24, val_size=6, test_size=6, min_digits=2, max_digits=4, height=12, width=40, scale=1,
            min_gap=0, max_gap=2, val_scans=0.15, test_scans=0.15)


def check_boxes(image, target, boxes, scans, scale, clutter=False):
    pieces, labels = load_scans()
    assert target == "".join(str(labels[s]) for s in scans)
    height, width = image.shape
    inside = np.zeros(image.shape, dtype=bool)
    for (x0, y0, x1, y1), scan in zip(boxes, scans):
        assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height
        assert (x1 - x0, y1 - y0) == (8 * scale, 8 * scale)
        np.testing.assert_array_equal(image[y0:y1, x0:x1], upscale(pieces[scan], scale))
        assert not inside[y0:y1, x0:x1].any(), "boxes overlap"
        inside[y0:y1, x0:x1] = True
    assert list(boxes[:, 0]) == sorted(boxes[:, 0]), "left to right"
    if not clutter:
        assert not image[~inside].any(), "ink outside the boxes"
    return inside


def test_a_composed_image_holds_each_scan_exactly_inside_its_box():
    pieces, labels = load_scans()
    rng = np.random.default_rng(7)
    for scale in (1, 2):
        image, target, boxes, scans, placed = compose(pieces, labels, np.arange(len(labels)), rng, num_digits=3,
                                                      height=10 * scale, width=30 * scale, scale=scale, min_gap=1,
                                                      max_gap=3)
        assert image.dtype == np.uint8 and image.shape == (10 * scale, 30 * scale) and placed == 0
        check_boxes(image, target, boxes, scans, scale)
        gaps = boxes[1:, 0] - boxes[:-1, 2]
        assert ((gaps >= 1) & (gaps <= 3)).all()
    assert pieces.max() == 255 and pieces.min() == 0  # the scans' 0-16 scaled to 0-255


def test_clutter_adds_ink_outside_the_boxes_and_none_inside():
    pieces, labels = load_scans()
    rng = np.random.default_rng(3)
    image, target, boxes, scans, placed = compose(pieces, labels, np.arange(len(labels)), rng, num_digits=2,
                                                  height=24, width=48, scale=1, clutter=6, fragment_size=4)
    assert placed == 6
    inside = check_boxes(image, target, boxes, scans, 1, clutter=True)
    assert image[~inside].any()


def test_the_task_splits_scans_first_and_keeps_the_gold_alignment():
    task = build_task(seed=5, clutter=2, fragment_size=3, **TINY)
    pools = task.scan_pools
    _, labels = load_scans()
    assert sum(len(p) for p in pools.values()) == len(labels)
    assert not set(pools["train"]) & set(pools["val"]) and not set(pools["train"]) & set(pools["test"])
    assert not set(pools["val"]) & set(pools["test"])
    for split, pool in pools.items():
        assert set(labels[pool]) == set(range(10)), f"every digit has scans in {split}"
        data = task.splits[split]
        assert data.images.shape == (len(data), 12, 40) and data.boxes.shape == (len(data), 4, 4)
        assert ((data.lengths >= 2) & (data.lengths <= 4)).all()
        for image, target, boxes, scans, n in zip(data.images, data.targets, data.boxes, data.scans, data.lengths):
            assert set(scans[:n]) <= set(pool) and (scans[n:] == -1).all() and not boxes[n:].any()
            check_boxes(image, target, boxes[:n], scans[:n], 1, clutter=True)
    again = build_task(seed=5, clutter=2, fragment_size=3, **TINY)
    np.testing.assert_array_equal(again.splits["test"].images, task.splits["test"].images)
    other = build_task(seed=6, **TINY)
    assert not np.array_equal(other.scan_pools["test"], pools["test"])
    assert task.stats()["train_examples"] == 24 and task.info == {"clutter_dropped": 0}


def test_target_ids_use_the_fixed_digit_vocabulary():
    assert digit_strings.VOCABULARY[4:] == tuple("0123456789")
    ids = target_ids(["305", "9"], max_digits=4)
    assert ids.tolist() == [[2, 7, 4, 9, 3, 0], [2, 13, 3, 0, 0, 0]]


def test_a_canvas_too_small_is_one_line():
    with pytest.raises(ConfigError, match=r"data.width=30 .* expected width >= 38 .* e.g. data.width=38, or fewer"):
        build_task(**{**TINY, "width": 30})
    with pytest.raises(ConfigError, match=r"data.min_digits=5 is not valid: expected at most max_digits=4"):
        build_task(**{**TINY, "min_digits": 5})


def test_split_scans_holds_the_shares_per_digit():
    _, labels = load_scans()
    pools = split_scans(labels, 0.2, 0.1, seed=0)
    for digit in range(10):
        n = int((labels == digit).sum())
        assert (labels[pools["val"]] == digit).sum() == round(0.2 * n)
        assert (labels[pools["test"]] == digit).sum() == round(0.1 * n)


def test_batches_carry_images_and_shifted_targets():
    pytest.importorskip("tensorflow")
    task = build_task(seed=0, **TINY)
    (images, target_in), target_out = next(iter(digit_strings.make_dataset(task, "val", batch_size=4)))
    assert images.dtype.name == "uint8" and images.shape == (4, 12, 40)
    ids = task.target_ids("val")[:4]
    np.testing.assert_array_equal(target_in.numpy(), ids[:, :-1])
    np.testing.assert_array_equal(target_out.numpy(), ids[:, 1:])
    np.testing.assert_array_equal(images.numpy(), task.splits["val"].images[:4])
    tokenizer = task.target_tokenizer()
    texts = [t.decode() for t in tokenizer.detokenize(target_out).numpy()]
    assert texts == task.splits["val"].targets[:4]
