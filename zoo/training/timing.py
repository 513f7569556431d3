"""Measurements around the training loop."""

from __future__ import annotations

import time
from typing import Optional


def input_seconds_per_batch(dataset, max_batches: Optional[int] = None) -> float:
    """Seconds the input pipeline alone takes to produce one batch of ``dataset``.

    Iterates ``max_batches`` batches (all of them when None) with nothing else running, shuffle
    buffer fill included. Training overlaps this work with the step (``prefetch``), so
    ``input_seconds_per_batch / seconds_per_step`` bounds the share of step time spent waiting
    for input from above: it is what the wait would be with no overlap at all.
    """
    start = time.perf_counter()
    batches = 0
    for _ in (dataset.take(max_batches) if max_batches else dataset):
        batches += 1
    return (time.perf_counter() - start) / max(batches, 1)
