"""Multi-reference scoring: each distinct source against every reference it has in the split."""

import pytest

from zoo.evaluation.metrics import bleu
from zoo.evaluation.scoring import multi_reference, multi_reference_metrics

SOURCES = ["i am home .", "i am home .", "he is calm today .", "i am home ."]
HYPOTHESES = ["je suis chez moi .", "je suis chez moi .", "il est calme aujourd'hui .", "je suis chez moi ."]
REFERENCES = ["je suis à la maison .", "je suis chez moi .", "il est calme aujourd'hui .", "je suis chez moi ."]


def test_groups_references_by_source_in_first_seen_order():
    hyps, streams = multi_reference(SOURCES, HYPOTHESES, REFERENCES)
    assert hyps == ["je suis chez moi .", "il est calme aujourd'hui ."]
    # Duplicate references of one source count once; a shorter list is padded with None.
    assert streams == [["je suis à la maison .", "il est calme aujourd'hui ."], ["je suis chez moi .", None]]


def test_multi_reference_bleu_credits_a_translation_that_matches_another_reference():
    single, _ = bleu(HYPOTHESES, REFERENCES)
    metrics, signatures = multi_reference_metrics(SOURCES, HYPOTHESES, REFERENCES)
    assert single < 90.0  # the first pair is scored against "je suis à la maison ." only
    assert metrics["bleu_multiref"] == pytest.approx(100.0)
    assert metrics["chrf_multiref"] == pytest.approx(100.0)
    assert metrics["distinct_sources"] == 2
    assert "nrefs:var" in signatures["bleu_multiref_signature"]


def test_wrong_translation_stays_wrong_with_more_references():
    hypotheses = ["tu es là .", "tu es là .", "il est calme aujourd'hui .", "tu es là ."]
    metrics, _ = multi_reference_metrics(SOURCES, hypotheses, REFERENCES)
    assert metrics["bleu_multiref"] < 60.0


def test_no_repeated_source_gives_no_multi_reference_metrics():
    assert multi_reference_metrics(["a b c d", "e f g h"], ["w x y z", "e f g h"], ["a b c d", "e f g h"]) == ({}, {})
