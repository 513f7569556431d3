"""Scores by source length, on hand-made predictions."""

import pytest

from zoo.evaluation.by_length import by_length, content_tokens, length_bins, read_csv, token_lengths, write_csv
from zoo.metrics import by_length_names


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


def test_a_registered_metric_becomes_a_column_and_a_panel(mismatch, tmp_path):
    from zoo.evaluation.by_length import columns
    from zoo.evaluation.report import by_length_panels

    rows = by_length([2, 2, 9], ["ab", "xx", "abcdefghi"], ["ab", "ba", "abcdefghi"], num_bins=2)
    assert [r["mismatch"] for r in rows] == [50.0, 0.0]
    assert columns()[-1] == "mismatch"  # 0-100 scores after the 0-1 ones, by name: ..., bleu, chrf, mismatch
    assert [r["mismatch"] for r in read_csv(write_csv(rows, str(tmp_path / "test.csv")))] == [50.0, 0.0]
    assert by_length_panels({"bleu": 12.0})[-1] == "mismatch" and "mismatch" in by_length_names()


def test_bleu_gets_no_panel_where_the_split_has_no_bleu():
    from zoo.evaluation.report import by_length_panels

    assert by_length_panels({"bleu": 0.0, "exact_match": 0.0}) == [n for n in by_length_names() if n != "bleu"]


def test_a_report_is_files_in_a_directory(tmp_path):
    import numpy as np

    from zoo.evaluation import text_metrics, write_report

    refs = ["ba", "dc", "edcba", "jihgfedcba"]
    hyps = ["ba", "xc", "edcbb", "jihgfedcba"]
    tokens = lambda texts: [[c.encode() for c in t] + [b"<eos>", b""] for t in texts]  # noqa: E731
    outputs = {"text": hyps, "source_tokens": tokens([r[::-1] for r in refs]), "target_tokens": tokens(hyps),
               "attention": [np.eye(12, dtype=np.float32) for _ in refs]}
    metrics, _ = text_metrics(hyps, refs)
    report = write_report(tmp_path, "test", [r[::-1] for r in refs], refs, metrics, outputs, n_plots=2,
                          n_predictions=3, label="seq2seq")
    assert report.paths == [str(tmp_path / "predictions.csv"), str(tmp_path / "attention"), str(tmp_path / "by_length")]
    assert sorted(p.name for p in (tmp_path / "attention").iterdir()) == ["explorer.html", "test_00.png", "test_01.png"]
    assert sorted(p.name for p in (tmp_path / "by_length").iterdir()) == ["test.csv", "test.png"]
    assert (tmp_path / "predictions.csv").read_text(encoding="utf-8").splitlines() == [
        "source,reference,hypothesis,correct", "ab,ba,ba,1", "cd,dc,xc,0", "abcde,edcba,edcbb,0"]
    assert [(r["bin"], r["count"], r["exact_match"]) for r in report.by_length] == [("2", 2, 0.5), ("5", 1, 0.0),
                                                                                     ("10", 1, 1.0)]
    assert read_csv(str(tmp_path / "by_length" / "test.csv")) == report.by_length
