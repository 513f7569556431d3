"""Scores by source length, on hand-made predictions."""

import pytest

from zoo.evaluation.by_length import by_length, content_tokens, length_bins, read_csv, token_lengths, write_csv


def test_bins_start_at_one_and_cover_the_longest():
    assert length_bins(range(2, 51)) == [(k, k + 4) for k in range(1, 50, 5)]
    assert length_bins([6, 32]) == [(5, 8), (9, 12), (13, 16), (17, 20), (21, 24), (25, 28), (29, 32)]
    assert length_bins([3, 3]) == [(3, 3)]
    assert length_bins([0, 2]) == [(0, 0), (1, 1), (2, 2)]
    assert length_bins([]) == []


def test_lengths_and_tokens_ignore_padding_and_specials():
    rows = [[b"a", b"b", b"<eos>", b""], [b"c", b"<eos>", b"", b""]]
    assert token_lengths(rows) == [2, 1]
    assert content_tokens(rows) == [["a", "b"], ["c"]]


def test_each_bin_scores_its_own_examples(tmp_path):
    refs = ["ba", "dc", "edcba", "jihgfedcba"]
    hyps = ["ba", "xc", "edcbb", "jihgfedcba"]
    lengths = [2, 2, 5, 10]
    rows = by_length(lengths, hyps, refs, hypothesis_tokens=[list(h) for h in hyps],
                     reference_tokens=[list(r) for r in refs], num_bins=2)
    assert [(r["bin"], r["count"]) for r in rows] == [("1-5", 3), ("6-10", 1)]
    assert rows[0]["exact_match"] == pytest.approx(1 / 3)
    assert rows[0]["token_accuracy"] == pytest.approx((2 + 1 + 4) / 9)
    assert rows[1]["exact_match"] == 1.0 and rows[1]["token_accuracy"] == 1.0 and rows[1]["chrf"] == 100.0
    back = read_csv(write_csv(rows, str(tmp_path / "test.csv")))
    assert back[0]["count"] == 3 and back[0]["exact_match"] == pytest.approx(1 / 3)
    no_tokens = read_csv(write_csv(by_length(lengths, hyps, refs, num_bins=2), str(tmp_path / "b.csv")))
    assert no_tokens[0]["token_accuracy"] is None


def test_mismatched_inputs_are_refused():
    with pytest.raises(ValueError, match="2 lengths, 1 hypotheses"):
        by_length([1, 2], ["a"], ["a"])
