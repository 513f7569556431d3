"""The figures runs log (zoo.plots), drawn from small hand-made arrays and compared as pixels."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")

from matplotlib.image import imread  # noqa: E402

from zoo.plots.attention import attention_heatmap  # noqa: E402
from zoo.plots.qa import sentence_heatmap  # noqa: E402
from zoo.plots.sweep import sweep_chart  # noqa: E402


def pixels(path):
    return imread(str(path))


def test_attention_heatmap_cuts_padding_off_both_axes(tmp_path):
    weights = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    plain = attention_heatmap(weights, ["le", "chat", "noir"], ["the", "cat"], str(tmp_path / "plain.png"))
    padded_weights = np.zeros((4, 5))
    padded_weights[:2, :3] = weights
    padded_weights[2:, :] = 0.5  # rows and columns of padding: never drawn
    padded = attention_heatmap(padded_weights, [b"le", b"chat", b"noir", b"", b""], ["the", "cat", "", ""],
                               str(tmp_path / "padded.png"))
    assert np.array_equal(pixels(plain), pixels(padded))
    other = attention_heatmap(weights[::-1], ["le", "chat", "noir"], ["the", "cat"], str(tmp_path / "other.png"))
    assert not np.array_equal(pixels(plain), pixels(other))  # the weights are what is drawn


def test_attention_heatmap_grows_with_the_tokens(tmp_path):
    small = pixels(attention_heatmap(np.eye(3), list("abc"), list("xyz"), str(tmp_path / "small.png")))
    large = pixels(attention_heatmap(np.eye(30), [f"s{i}" for i in range(30)], [f"t{i}" for i in range(30)],
                                     str(tmp_path / "large.png")))
    assert large.shape[0] > small.shape[0] and large.shape[1] > small.shape[1]


def test_sentence_heatmap_marks_the_gold_sentences(tmp_path):
    weights = np.array([[0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])  # [hops, sentences]
    sentences = ["Mary went home.", "John took the milk.", "John went to the garden."]
    marked = pixels(sentence_heatmap(weights, sentences, [1, 2], str(tmp_path / "marked.png")))
    unmarked = pixels(sentence_heatmap(weights, sentences, [], str(tmp_path / "unmarked.png")))
    assert marked.shape == unmarked.shape and not np.array_equal(marked, unmarked)


def test_sweep_chart_draws_a_missing_value_as_zero(tmp_path):
    labels = ["seed=0", "seed=1"]
    with_nan = pixels(sweep_chart(labels, {"bleu": [12.5, float("nan")]}, str(tmp_path / "nan.png")))
    with_zero = pixels(sweep_chart(labels, {"bleu": [12.5, 0.0]}, str(tmp_path / "zero.png")))
    with_value = pixels(sweep_chart(labels, {"bleu": [12.5, 9.0]}, str(tmp_path / "value.png")))
    assert np.array_equal(with_nan, with_zero)
    assert not np.array_equal(with_nan, with_value)
