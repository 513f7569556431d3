"""``zoo.metrics``' digit-string metrics: ``digit_error_rate`` (jiwer) and attention against the gold
alignment (``alignment_accuracy``, ``alignment_mass``, ``zoo.metrics.alignment``).

The gold regions come from a tiny composed image and a tiny composed utterance, checked against the
pieces placed; attention put exactly on them scores 1, attention put elsewhere 0."""

import numpy as np
import pytest

import zoo.metrics
from zoo.data.digit_strings import compose as compose_image
from zoo.data.digit_strings import load_scans, upscale
from zoo.data.spoken_digits import FRAME_LENGTH, FRAME_STEP, num_frames
from zoo.data.spoken_digits import compose as compose_utterance
from zoo.metrics.alignment import boxes_to_grid, matched_digits, spans_to_frames
from zoo.metrics.alignment_accuracy import alignment_accuracy
from zoo.metrics.alignment_mass import alignment_mass
from zoo.metrics.digit_error_rate import digit_error_rate

STRIDE = 2  # the attention grid: one cell per 2x2 pixels, as a CNN of stride 2


def on_regions(shape, regions, inside=True, eos_rows=1):
    """Attention rows ``[T + eos_rows, *shape]``: row ``t`` spread evenly over region ``t`` (``inside``)
    or over everything outside every region; the ``<eos>`` rows uniform."""
    masks = [zoo.metrics.alignment.region_mask(r, shape) for r in regions]
    outside = ~np.any(masks, axis=0)
    rows = []
    for mask in masks:
        chosen = mask if inside else outside
        rows.append(chosen / chosen.sum())
    rows += [np.full(shape, 1.0 / np.prod(shape))] * eos_rows
    return np.stack(rows)


def test_a_tiny_image_and_utterance_give_full_alignment_on_their_gold_regions_and_none_elsewhere():
    # The image: three scans on a 12x40 canvas; each box holds exactly its scan, nothing lies outside.
    scans, labels = load_scans()
    image, target, boxes, chosen, _ = compose_image(scans, labels, np.arange(len(labels)), np.random.default_rng(4),
                                                    num_digits=3, height=12, width=40, scale=1, min_gap=2, max_gap=4)
    inside = np.zeros(image.shape, dtype=bool)
    for (x0, y0, x1, y1), scan in zip(boxes, chosen):
        np.testing.assert_array_equal(image[y0:y1, x0:x1], upscale(scans[scan], 1))
        inside[y0:y1, x0:x1] = True
    assert target == "".join(str(labels[s]) for s in chosen) and not image[~inside].any()
    grid = boxes_to_grid(boxes, image.shape, (12 // STRIDE, 40 // STRIDE))
    for (x0, y0, x1, y1), (gx0, gy0, gx1, gy1) in zip(boxes, grid):  # the cells are those the box overlaps
        assert (gx0, gy0) == (x0 // STRIDE, y0 // STRIDE) and (gx1, gy1) == (-(-x1 // STRIDE), -(-y1 // STRIDE))

    # The utterance: three recordings with pauses; each span holds exactly its recording.
    rng = np.random.default_rng(5)
    recordings = {(d, "ann", 0): rng.uniform(-0.5, 0.5, size=int(rng.integers(900, 1600))).astype(np.float32)
                  for d in range(10)}
    waveform, spoken, spans, names, _ = compose_utterance(recordings, list(recordings), rng, 3, 0.05, 0.1)
    said = np.zeros(len(waveform), dtype=bool)
    for (start, end), name in zip(spans, names):
        np.testing.assert_array_equal(waveform[start:end], recordings[(int(name[0]), "ann", 0)])
        said[start:end] = True
    assert spoken == "".join(name[0] for name in names) and not waveform[~said].any()
    frames = spans_to_frames(spans, FRAME_STEP, FRAME_LENGTH)
    centres = np.arange(int(num_frames(len(waveform)))) * FRAME_STEP + FRAME_LENGTH / 2
    for (start, end), (f0, f1) in zip(spans, frames):  # the frames whose centre lies in the span
        assert list(range(f0, f1)) == list(np.flatnonzero((centres >= start) & (centres < end)))

    for shape, regions, text in (((6, 20), grid, target), ((len(centres),), frames, spoken)):
        on = on_regions(shape, regions)
        off = on_regions(shape, regions, inside=False)
        assert alignment_accuracy([on], [regions], [text], [text]) == 1.0
        assert alignment_mass([on], [regions], [text], [text]) == pytest.approx(1.0)
        assert alignment_accuracy([off], [regions], [text], [text]) == 0.0
        assert alignment_mass([off], [regions], [text], [text]) == 0.0
        # a batch array works as a list does; the metrics through the registry
        batch = np.stack([on, off])
        assert zoo.metrics.get("alignment_accuracy").score([text] * 2, [text] * 2, attention=batch,
                                                           regions=np.stack([regions] * 2)) == 0.5


def test_only_correctly_emitted_digits_count_and_mass_is_the_share_inside():
    regions = np.array([[0, 2], [2, 4], [4, 6]])  # spans of frames, digits "1", "2", "3"
    on = on_regions((8,), regions)
    # "13": the "2" was dropped; step 1 emitted the reference's third digit, and attends there
    shifted = np.stack([on[0], on[2], on[3]])
    assert matched_digits("13", "123") == [(0, 0), (1, 2)]
    assert alignment_accuracy([shifted], [regions], ["13"], ["123"]) == 1.0
    # "193": step 1 is wrong (not counted); steps 0 and 2 are right
    assert alignment_accuracy([on], [regions], ["193"], ["123"]) == 1.0
    half = on.copy()
    half[1] = 0.0
    half[1, [2, 7]] = 0.5  # half the weight inside digit 2's span, the peak (first) inside it
    assert alignment_accuracy([half], [regions], ["123"], ["123"]) == 1.0
    assert alignment_mass([half], [regions], ["123"], ["123"]) == pytest.approx((1 + 0.5 + 1) / 3)
    wrong_peak = on.copy()
    wrong_peak[2] = 0.0
    wrong_peak[2, [4, 7]] = [0.4, 0.6]
    assert alignment_accuracy([wrong_peak], [regions], ["123"], ["123"]) == pytest.approx(2 / 3)
    assert alignment_accuracy([on], [regions], ["999"], ["123"]) == 0.0  # nothing right: nothing to read
    assert zoo.metrics.get("alignment_mass").score(["123"], ["123"]) is None  # text tasks: no regions


def test_boxes_map_onto_a_coarser_grid_by_the_cells_they_overlap():
    boxes = np.array([[10, 3, 26, 19], [0, 0, 0, 0], [156, 28, 160, 32]])
    np.testing.assert_array_equal(boxes_to_grid(boxes, (32, 160), (8, 40)),
                                  [[2, 0, 7, 5], [0, 0, 0, 0], [39, 7, 40, 8]])
    assert boxes_to_grid([[0, 0, 160, 32]], (32, 160), (1, 5)).tolist() == [[0, 0, 5, 1]]
    np.testing.assert_array_equal(spans_to_frames([[100, 420], [0, 0]], 80, 200, reduction=2), [[0, 2], [0, 0]])


def test_digit_error_rate_counts_edits_over_reference_digits():
    assert digit_error_rate(["1243", ""], ["123", "45"]) == pytest.approx(3 / 5)  # 1 insertion, 2 deletions
    assert digit_error_rate(["129"], ["123"]) == pytest.approx(1 / 3)
    assert digit_error_rate(["1 2 3", "45"], ["123", "45"]) == 0.0
    assert digit_error_rate(["12a"], ["123"]) == pytest.approx(1 / 3)  # a non-digit is an error
    assert digit_error_rate(["7"], [""]) == 1.0
    metric = zoo.metrics.get("digit_error_rate")
    assert metric.higher_is_better is False and metric.score(["12"], ["123"]) == pytest.approx(1 / 3)
    assert "digit_error_rate" not in zoo.metrics.by_length_names()  # translation runs do not score it
