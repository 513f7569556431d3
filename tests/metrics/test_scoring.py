"""Multi-reference scoring: each distinct source against every reference it has in the split."""

import pytest

from zoo.evaluation.scoring import multi_reference, multi_reference_metrics
from zoo.metrics.bleu import bleu

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


# The metric registry (zoo.metrics): what each score is, and the one place readers ask.

def test_every_metric_is_registered_with_its_scale_direction_and_label():
    import zoo.metrics

    builtin = ["bleu", "bleu_multiref", "chrf", "chrf_multiref", "d2l_bleu", "exact_match", "length_ratio",
               "token_accuracy"]
    assert [n for n in zoo.metrics.names() if n in builtin] == builtin  # a new metric module adds to these
    assert [n for n in zoo.metrics.by_length_names() if n in builtin] == ["exact_match", "token_accuracy", "bleu", "chrf"]
    bleu_metric, exact = zoo.metrics.get("bleu"), zoo.metrics.get("exact_match")
    assert (bleu_metric.scale, bleu_metric.higher_is_better, bleu_metric.label) == (100, True, "BLEU")
    assert (exact.scale, exact.higher_is_better, exact.label, exact.by_length) == (1, True, "exact match", True)
    assert zoo.metrics.get("length_ratio").higher_is_better is None
    assert zoo.metrics.lookup("test_chrf").name == "chrf" and zoo.metrics.lookup("train_seconds") is None
    with pytest.raises(ValueError, match="Unknown metric 'blue'. Available: (.*, )?bleu, "):
        zoo.metrics.get("blue")
    with pytest.raises(ValueError, match="Duplicate metric name 'bleu'"):
        zoo.metrics.register("bleu", scale=100, higher_is_better=True, label="BLEU")(lambda h, r, **inputs: 0.0)
    with pytest.raises(ValueError, match="argument `scale`.*Received: scale=10"):
        zoo.metrics.register("ten", scale=10, higher_is_better=True, label="ten")


def test_registered_scores_equal_the_functions_and_skip_missing_inputs():
    import zoo.metrics
    from zoo.evaluation.scoring import text_metrics
    from zoo.metrics.d2l_bleu import d2l_bleu
    from zoo.metrics.exact_match import exact_match

    scores = zoo.metrics.score_all(HYPOTHESES, REFERENCES)
    metrics, _ = text_metrics(HYPOTHESES, REFERENCES)
    assert {k: scores[k] for k in metrics} == metrics
    assert scores["exact_match"] == exact_match(HYPOTHESES, REFERENCES) == 0.75
    assert scores["d2l_bleu"] == pytest.approx(sum(map(d2l_bleu, HYPOTHESES, REFERENCES)) / 4)
    assert "token_accuracy" not in scores and "bleu_multiref" not in scores  # no tokens, no sources given
    tokens = [h.split() for h in HYPOTHESES], [r.split() for r in REFERENCES]
    more = zoo.metrics.score_all(HYPOTHESES, REFERENCES, hypothesis_tokens=tokens[0], reference_tokens=tokens[1],
                                 sources=SOURCES)
    assert more["token_accuracy"] == pytest.approx((2 + 5 + 5 + 5) / (6 + 5 + 5 + 5))
    assert more["bleu_multiref"] == pytest.approx(multi_reference_metrics(SOURCES, HYPOTHESES, REFERENCES)[0]["bleu_multiref"])


def test_scores_are_formatted_and_ranked_by_their_metric():
    import zoo.metrics

    bleu_metric, exact = zoo.metrics.get("bleu"), zoo.metrics.get("exact_match")
    assert (bleu_metric.format(23.456), exact.format(0.9), exact.format(0.9, precise=True)) == ("23.46", "0.900", "0.9000")
    assert exact.format(None) == exact.format(float("nan")) == "-"
    assert zoo.metrics.format_value("test_perplexity", 3.14159) == "3.1416"
    assert sorted([0.2, None, 0.9], key=exact.rank_key) == [0.9, 0.2, None]
    # The line a training run ends with: the task metric, then the summary metrics the run has.
    assert zoo.metrics.format_summary({"exact_match": 0.997, "bleu": 99.1234, "chrf": 99.5, "length_ratio": 1.0},
                                      "exact_match") == "test_exact_match = 0.9970   test_bleu = 99.12   test_chrf = 99.50"
    assert zoo.metrics.format_summary({"bleu": 23.45678, "bleu_multiref": 30.1, "chrf": 45.6, "chrf_multiref": 50.0},
                                      "bleu") == "test_bleu = 23.4568   test_bleu_multiref = 30.10   test_chrf = 45.60"


def test_the_metric_registry_imports_no_tensorflow():
    import subprocess
    import sys

    from conftest import ROOT

    code = ("import sys, zoo.metrics; zoo.metrics.score_all(['a'], ['a']); "
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
