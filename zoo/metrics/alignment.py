"""Attention against the gold alignment of composed digit strings (registers nothing itself).

``data=digit_strings`` keeps each digit's box in the image, ``data=spoken_digits`` each digit's span
in the waveform. A model that reads digit ``j`` at output step ``t`` should attend inside digit
``j``'s box or span there. Two metrics read that, over the digits a model emitted correctly
(``alignment_accuracy.py``, ``alignment_mass.py``):

- ``alignment_accuracy``: the share of them whose most-attended position lies inside the gold
  region (ties go to the first position in row-major order);
- ``alignment_mass``: the mean attention weight inside it (each row's weight inside the region
  over the row's total, so rows that do not sum to 1 still read as shares).

**Which output step emitted which reference digit.** The hypothesis' ``t``-th character (whitespace
dropped) is output step ``t`` (one token per digit, as the fixed digit vocabulary decodes). The
correctly emitted digits are the ``equal`` pairs of the Levenshtein alignment of hypothesis and
reference (``jiwer.process_characters``, the alignment ``digit_error_rate`` counts edits on), so a
digit dropped early does not make every later one count as wrong.

**Coordinates.** Attention ``[B, T_out, h, w]`` over an image's feature grid takes boxes ``(x0, y0,
x1, y1)`` in grid cells; attention ``[B, T_out, F]`` over frames takes spans ``(f0, f1)`` in frames;
both half-open. ``boxes_to_grid`` and ``spans_to_frames`` map the data's pixel boxes and sample spans
there:

- an image ``H x W`` read as an ``h x w`` grid: cell ``(i, j)`` covers rows ``[i H/h, (i+1) H/h)``
  and columns ``[j W/w, (j+1) W/w)`` (a CNN feature map with stride ``s = H/h``, 'same' padding; a
  ViT's patches of side ``s``); a box covers every cell it overlaps: ``x0' = floor(x0 w / W)``,
  ``x1' = ceil(x1 w / W)``, the same for ``y``. With stride 4, the 16-pixel box ``(10, 3, 26, 19)``
  is cells ``(2, 0, 7, 5)``.
- a waveform read in frames of ``frame_length`` samples every ``frame_step``: frame ``f`` is centred
  on sample ``f * frame_step + frame_length / 2``; a span ``[s0, s1)`` covers the frames centred
  inside it. A listener that merges ``reduction`` frames into one (a pyramidal BLSTM: 2 per layer)
  covers frame group ``g = [g r, (g+1) r)``; a span covers every group holding one of its frames.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np


def boxes_to_grid(boxes, image_shape: Tuple[int, int], grid_shape: Tuple[int, int]) -> np.ndarray:
    """Pixel boxes ``[..., 4]`` ``(x0, y0, x1, y1)`` of an ``image_shape = (H, W)`` image as the cells of an
    ``grid_shape = (h, w)`` grid they overlap, int32 ``[..., 4]``, half-open (module docstring). An
    empty box (a padding row of zeros) stays empty."""
    boxes = np.asarray(boxes, dtype=np.float64)
    (height, width), (rows, cols) = image_shape, grid_shape
    fx, fy = cols / width, rows / height
    out = np.stack([np.floor(boxes[..., 0] * fx), np.floor(boxes[..., 1] * fy),
                    np.ceil(boxes[..., 2] * fx), np.ceil(boxes[..., 3] * fy)], axis=-1)
    out = np.clip(out, 0, [cols, rows, cols, rows])
    empty = (boxes[..., 2] <= boxes[..., 0]) | (boxes[..., 3] <= boxes[..., 1])
    out[empty] = 0
    return out.astype(np.int32)


def spans_to_frames(spans, frame_step: int, frame_length: int, reduction: int = 1) -> np.ndarray:
    """Sample spans ``[..., 2]`` ``(s0, s1)`` as the frames centred inside them (``reduction``: frame
    groups of a listener that merges that many), int32 ``[..., 2]``, half-open (module docstring).
    An empty span stays empty."""
    spans = np.asarray(spans, dtype=np.float64)
    half = frame_length / 2.0
    first = np.maximum(np.ceil((spans[..., 0] - half) / frame_step), 0)
    end = np.maximum(np.ceil((spans[..., 1] - half) / frame_step), first)  # frames f with s0 <= centre < s1
    empty = (spans[..., 1] <= spans[..., 0]) | (end <= first)
    out = np.stack([np.floor(first / reduction), np.ceil(end / reduction)], axis=-1)
    out[empty] = 0
    return out.astype(np.int32)


def region_mask(region, shape: Tuple[int, ...]) -> np.ndarray:
    """Boolean mask of ``shape`` (``(h, w)`` or ``(F,)``) that is True inside ``region``: a box
    ``(x0, y0, x1, y1)`` of grid cells or a span ``(f0, f1)`` of frames, half-open."""
    mask = np.zeros(shape, dtype=bool)
    region = [int(v) for v in region]
    if len(shape) == 2:
        x0, y0, x1, y1 = region
        mask[max(y0, 0):y1, max(x0, 0):x1] = True
    elif len(shape) == 1:
        f0, f1 = region
        mask[max(f0, 0):f1] = True
    else:
        raise ValueError(f"attention rows must be [h, w] (an image grid) or [F] (frames); got {shape}")
    return mask


def matched_digits(hypothesis: str, reference: str) -> List[Tuple[int, int]]:
    """``[(t, j)]``: output step ``t`` emitted reference digit ``j`` correctly (the ``equal`` pairs of the
    Levenshtein alignment of the two strings, whitespace dropped). ``"1243"`` for ``"123"``:
    ``[(0, 0), (1, 1), (3, 2)]``."""
    import jiwer

    hyp, ref = "".join(str(hypothesis).split()), "".join(str(reference).split())
    if not hyp or not ref:
        return []
    pairs = []
    for chunk in jiwer.process_characters(ref, hyp).alignments[0]:
        if chunk.type == "equal":
            pairs.extend(zip(range(chunk.hyp_start_idx, chunk.hyp_end_idx), range(chunk.ref_start_idx,
                                                                                    chunk.ref_end_idx)))
    return pairs


def alignment_scores(attention: Sequence, regions: Sequence, hypotheses: Sequence[str],
                     references: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """``(hits bool [K], masses float [K])`` over the ``K`` correctly emitted digits of all examples:
    whether the row's most-attended position is inside the gold region, and the row's share of
    weight inside it.

    ``attention[b]`` is ``[T_out, h, w]`` or ``[T_out, F]`` (rows past the hypothesis, ``<eos>`` or
    padding, are not read); ``regions[b]`` is ``[D, 4]`` boxes or ``[D, 2]`` spans in the attention's
    coordinates, digit ``j`` in row ``j`` (``boxes_to_grid``, ``spans_to_frames``).
    """
    if not len(attention) == len(regions) == len(hypotheses) == len(references):
        raise ValueError(f"{len(attention)} attentions, {len(regions)} gold regions, {len(hypotheses)} "
                         f"hypotheses and {len(references)} references: expected one each per example")
    hits, masses = [], []
    for weights, gold, hyp, ref in zip(attention, regions, hypotheses, references):
        weights = np.asarray(weights, dtype=np.float64)
        gold = np.asarray(gold)
        for t, j in matched_digits(hyp, ref):
            if t >= len(weights):
                continue  # the model emitted more than its attention rows hold: nothing to read
            row = weights[t]
            mask = region_mask(gold[j], row.shape)
            hits.append(bool(mask.reshape(-1)[int(np.argmax(row))]))
            total = row.sum()
            masses.append(float(row[mask].sum() / total) if total > 0 else 0.0)
    return np.asarray(hits, dtype=bool), np.asarray(masses, dtype=np.float64)
