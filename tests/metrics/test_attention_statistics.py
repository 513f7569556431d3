"""``zoo.metrics.attention_statistics``: entropy with ``0 log 0 = 0`` (the exact zeros of a sparse
normaliser), the maximum weight and the share of exactly-zero weights, over the real tokens only."""

import numpy as np
import pytest

from zoo.metrics.attention_statistics import attention_statistics


def test_exact_zeros_count_as_zero_entropy_and_as_zero_share():
    # Two output tokens over three real sources and a padding column: [0.5, 0.5, 0] spreads over 2
    # sources (entropy log 2, one zero of three), [1, 0, 0] is one-hot (entropy 0, two zeros of three).
    weights = np.array([[0.5, 0.5, 0.0, 0.9], [1.0, 0.0, 0.0, 0.0], [0.2, 0.2, 0.2, 0.4]])
    stats = attention_statistics([weights], [["a", "b", ""]], [["x", "y", "z", ""]])
    assert stats["attention_entropy"] == pytest.approx(np.log(2) / 2)
    assert stats["attention_max_weight"] == pytest.approx(0.75)
    assert stats["attention_zero_share"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert all(np.isfinite(v) for v in stats.values())


def test_softmax_rows_have_no_zeros_and_no_rows_give_zeros():
    stats = attention_statistics([np.full((2, 4), 0.25)], [["a", "b"]], [["w", "x", "y", "z"]])
    assert stats == pytest.approx({"attention_entropy": np.log(4), "attention_max_weight": 0.25,
                                   "attention_zero_share": 0.0})
    assert attention_statistics([], [], []) == {"attention_entropy": 0.0, "attention_max_weight": 0.0,
                                                "attention_zero_share": 0.0}
