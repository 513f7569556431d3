"""The attention explorer (zoo.plots.explorer): its views, the self-contained page and what it holds,
the side-by-side comparison, and the views the translation, story-QA and Transformer runs give it."""

import json
import re

import numpy as np
import pytest

from zoo.plots.explorer import explorer_payload, side_by_side, view, write_explorer


def page_data(path):
    """The JSON the page's script reads, taken back out of the written file."""
    text = open(path, encoding="utf-8").read()
    return json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S).group(1))


def test_a_view_cuts_padding_and_keeps_the_weights_of_the_real_tokens():
    weights = np.arange(12, dtype=float).reshape(3, 4) / 10
    v = view("v", [b"the", b"cat", b""], [b"le", b" ", b"chat", b""], weights, gold=[2, 3])
    assert v["rows"] == ["the", "cat"] and v["columns"] == ["le", "␣", "chat"]
    assert v["weights"] == [[0.0, 0.1, 0.2], [0.4, 0.5, 0.6]]
    assert v["gold"] == [2]  # the padding column is gone, so is its mark
    with pytest.raises(ValueError, match=r"weights of shape \(2, 2\) for 2 rows and 3 columns"):
        view("short", ["a", "b"], ["x", "y", "z"], np.ones((2, 2)))


def test_the_page_is_self_contained_and_carries_every_view(tmp_path):
    views = [view("cross", ["x", "</script>"], ["a", "b"], [[0.9, 0.1], [0.2, 0.8]]),
             view("self", ["a", "b"], ["a", "b"], [[1.0, 0.0], [0.5, 0.5]])]
    path = write_explorer(tmp_path / "attention" / "explorer.html", [{"title": "a b -> x", "views": views}],
                          title="bahdanau: test split", footnote="CC-BY 2.0 (FR) Tatoeba")
    text = open(path, encoding="utf-8").read()
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", text)  # nothing fetched: opens offline
    assert "Plotly.react" in text and len(text) > 1_000_000  # plotly's own JavaScript is inlined
    data = page_data(path)  # a token "</script>" does not end the data block early
    assert data["title"] == "bahdanau: test split" and data["footnote"] == "CC-BY 2.0 (FR) Tatoeba"
    assert [v["name"] for v in data["examples"][0]["views"]] == ["cross", "self"]
    assert data["examples"][0]["views"][0]["rows"] == ["x", "</script>"]
    assert data["examples"][0]["views"][0]["weights"] == [[0.9, 0.1], [0.2, 0.8]]


def test_a_view_whose_weights_do_not_match_its_tokens_is_refused():
    bad = {"name": "bad", "rows": ["x"], "columns": ["a", "b"], "weights": [[1.0]]}
    with pytest.raises(ValueError, match="weights are not 1 x 2"):
        explorer_payload([{"title": "t", "views": [bad]}], "title")
    with pytest.raises(ValueError, match="has no view"):
        explorer_payload([{"title": "t", "views": []}], "title")


def test_side_by_side_keeps_the_examples_every_run_has_with_each_runs_views_labelled():
    def run(weight, titles):
        return [{"title": t, "views": [view("attention", ["x"], ["a", "b"], [[weight, 1 - weight]])]} for t in titles]

    joined = side_by_side({"bahdanau": run(0.9, ["s1", "s2", "s3"]), "luong": run(0.2, ["s3", "s1"])})
    assert [e["title"] for e in joined] == ["s1", "s3"]
    assert [v["name"] for v in joined[0]["views"]] == ["bahdanau: attention", "luong: attention"]
    assert [v["weights"][0][0] for v in joined[1]["views"]] == [0.9, 0.2]


def test_a_translation_report_writes_the_explorer_of_its_plotted_examples(tmp_path):
    from zoo.evaluation.report import write_report

    outputs = {"text": ["x y", "z"],
               "attention": [np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.0, 0.0, 1.0]]), np.eye(3)[:2]],
               "source_tokens": [np.array([b"a", b"b", b"<eos>"]), np.array([b"c", b"<eos>", b""])],
               "target_tokens": [np.array([b"x", b"y", b"<eos>"]), np.array([b"z", b"<eos>", b""])]}
    extra = [[view("layer 1", ["x"], ["a"], [[1.0]])], []]
    report = write_report(tmp_path, "test", ["a b", "c"], ["x y", "w"], {"bleu": 10.0}, outputs, n_plots=2,
                          n_predictions=2, extra_views=extra, label="bahdanau")
    assert str(tmp_path / "attention") in report.paths
    data = page_data(tmp_path / "attention" / "explorer.html")
    assert data["title"] == "bahdanau: test split"
    first, second = data["examples"]
    assert first["title"] == "a b -> x y (ref x y)"
    assert [v["name"] for v in first["views"]] == ["attention while decoding (output token -> source tokens)",
                                                   "layer 1"]
    assert first["views"][0]["rows"] == ["x", "y", "<eos>"] and first["views"][0]["columns"] == ["a", "b", "<eos>"]
    assert second["views"][0]["weights"] == [[1.0, 0.0], [0.0, 1.0]]  # padding cut from both axes
    (tmp_path / "none").mkdir()
    write_report(tmp_path / "none", "test", ["a b", "c"], ["x y", "w"], {"bleu": 10.0}, outputs, n_plots=0,
                 n_predictions=2)
    assert not (tmp_path / "none" / "attention" / "explorer.html").exists()  # attention_plots=0: no explorer


def test_story_qa_views_give_each_hop_over_the_sentences_with_the_gold_evidence():
    from zoo.evaluation.qa import explorer_views

    outputs = {"sentence_attention": [np.array([[0.1, 0.8, 0.1], [0.6, 0.2, 0.2]])],
               "word_attention": [np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])],
               "story_tokens": [np.array([[b"mary", b"went", b""], [b"john", b"", b""], [b"he", b"took", b"it"]])]}
    hops, words = explorer_views(outputs, 0, ["mary went", "john", "he took it"], [1], word_attention=True)
    assert hops["rows"] == ["hop 1", "hop 2"] and hops["columns"] == ["mary went", "john", "he took it"]
    assert hops["gold"] == [1] and hops["weights"][1] == [0.6, 0.2, 0.2]
    assert words["columns"] == ["mary", "went", "john", "he", "took", "it"]
    assert words["weights"] == [[0.5, 0.5, 1.0, 0.2, 0.3, 0.5]]


def test_a_transformer_gives_every_layer_and_head_of_its_three_attentions():
    import keras

    import zoo.models
    from zoo.data import load_task
    from zoo.training.score import layer_and_head_views

    from conftest import compose

    task = load_task(compose(["model=transformer", "debug=smoke"]).data)
    keras.utils.set_random_seed(0)
    model = zoo.models.create("transformer", source_vocab_size=task.source_tokenizer.vocab_size,
                              target_vocab_size=task.target_tokenizer.vocab_size, embed_dim=8, intermediate_dim=16,
                              num_layers=2, num_heads=2)
    outputs = {"source_tokens": [np.array([b"9", b"may", b"<eos>", b""])],
               "target_tokens": [np.array([b"2", b"0", b"<eos>"])]}
    (views,) = layer_and_head_views(model, task, outputs, count=1)
    names = [v["name"] for v in views]
    assert len(views) == 3 * 2 * 3  # encoder, decoder self, cross; 2 layers; the average and 2 heads
    assert names[:3] == ["encoder self-attention, layer 1, heads' average", "encoder self-attention, layer 1, head 1",
                         "encoder self-attention, layer 1, head 2"]
    cross = views[names.index("cross-attention, layer 2, head 2")]
    assert cross["rows"] == ["2", "0", "<eos>"] and cross["columns"] == ["9", "may", "<eos>"]
    np.testing.assert_allclose(np.sum(cross["weights"], axis=1), 1.0, atol=1e-3)  # softmax rows
    decoder = views[names.index("decoder self-attention, layer 1, head 1")]["weights"]
    assert decoder[0][1:] == [0.0, 0.0] and decoder[1][2] == 0.0  # causal: no weight on later tokens
    average = views[names.index("cross-attention, layer 1, heads' average")]["weights"]
    heads = [views[names.index(f"cross-attention, layer 1, head {h}")]["weights"] for h in (1, 2)]
    np.testing.assert_allclose(average, np.mean(heads, axis=0), atol=2e-4)
    assert layer_and_head_views(zoo.models.create("bahdanau", source_vocab_size=12, target_vocab_size=12), task,
                                outputs, 1) is None  # no attention_maps: the decoding view alone


def test_compare_explorer_puts_the_newest_run_of_each_model_side_by_side(mlflow_store, tmp_path, capsys):
    """``python -m zoo.compare --data dates --explorer`` on a real store: runs logged with their
    explorer pages, one older run of a model (left out), one run on other data (left out)."""
    import mlflow

    from zoo.compare import main

    def logged(model, data, weight, keys):
        examples = [{"title": f"{k} -> ?", "key": k, "views": [view("attention", ["x"], ["a", "b"],
                                                                    [[weight, 1 - weight]])]} for k in keys]
        page = write_explorer(tmp_path / model / data / str(weight) / "explorer.html", examples)
        with mlflow.start_run(tags={"zoo.model": model, "zoo.data": data}):
            mlflow.log_metric("test_exact_match", 0.5)
            mlflow.log_artifact(page, "attention")

    mlflow.set_tracking_uri(mlflow_store)
    mlflow.set_experiment("attention-zoo")
    logged("luong", "dates", 0.1, ["s1", "s2"])  # older: the newer luong run below is the one compared
    logged("bahdanau", "dates", 0.9, ["s1", "s2", "s3"])
    logged("luong", "dates", 0.2, ["s2", "s1"])
    logged("transformer", "reverse", 0.5, ["s1"])
    out = tmp_path / "side_by_side.html"
    assert main(["--data", "dates", "--explorer", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 test examples, side by side: bahdanau, luong" in printed
    data = page_data(out)
    assert [e["title"] for e in data["examples"]] == ["s1", "s2"]
    assert [(v["name"], v["weights"][0][0]) for v in data["examples"][0]["views"]] == [
        ("bahdanau: attention", 0.9), ("luong: attention", 0.2)]
    client = mlflow.MlflowClient(mlflow_store)
    (comparison,) = client.search_runs([client.get_experiment_by_name("attention-zoo").experiment_id],
                                       "tags.`zoo.kind` = 'comparison'")
    assert comparison.info.run_name == "compare-dates" and comparison.data.tags["zoo.compare.explorer"] == "true"
    assert [a.path for a in client.list_artifacts(comparison.info.run_id)] == ["explorer.html"]
    assert main(["--data", "reverse", "--explorer", "--no-log"]) == 0  # one run: its page alone
    assert main(["--data", "story_qa", "--explorer", "--no-log"]) == 1  # none: said, not a crash
    assert "No finished runs with attention/explorer.html" in capsys.readouterr().err
    assert main(["--explorer", "--by-length"]) == 2


def test_image_views_draw_each_digit_over_the_pixels_with_its_gold_box():
    from types import SimpleNamespace

    from zoo.training.image import ImageKind

    attention = np.random.default_rng(0).dirichlet(np.ones(6), size=3).reshape(3, 2, 3)  # [T_out, h, w]
    images = np.arange(2 * 4 * 6, dtype=np.uint8).reshape(2, 4, 6)  # [N, H, W]: 2x2 pixels per cell
    data = SimpleNamespace(task=SimpleNamespace(splits={"test": SimpleNamespace(images=images)}))
    boxes = np.array([[0, 0, 1, 2], [1, 0, 3, 1]])  # (x0, y0, x1, y1) in cells: digit 1 column 0, digit 2 row 0
    views = ImageKind.explorer_views(None, data, 1, "47", attention, boxes)
    assert [v["name"] for v in views] == ["output 1 ('4') over the image", "output 2 ('7') over the image",
                                          "output 3 ('<eos>') over the image",
                                          "every output over the grid's cells (row-major)"]
    first = views[0]
    assert first["rows"] == ["row 0", "row 1"] and first["columns"] == ["col 0", "col 1", "col 2"]
    np.testing.assert_allclose(first["weights"], attention[0], atol=1e-4)
    assert first["gold_cells"] == [[0, 0], [1, 0]] and views[1]["gold_cells"] == [[0, 1], [0, 2]]
    assert "gold_cells" not in views[2]  # <eos> has no box
    background = first["background"]
    assert np.array_equal(background["z"], images[1]) and background["dx"] == 0.5 and background["x0"] == -0.25
    flat = views[3]
    assert flat["rows"] == ["4", "7", "<eos>"] and flat["columns"][:4] == ["0,0", "0,1", "0,2", "1,0"]
    assert flat["gold_cells"] == [[0, 0], [0, 3], [1, 1], [1, 2]]


def test_speech_views_outline_each_digits_gold_frames():
    from zoo.training.speech import SpeechKind

    attention = np.full((3, 5), 0.2)
    (only,) = SpeechKind.explorer_views(None, None, 0, "12", attention, np.array([[0, 2], [3, 5]]))
    assert only["rows"] == ["1", "2", "<eos>"] and only["columns"][-1] == "frame 4"
    assert only["gold_cells"] == [[0, 0], [0, 1], [1, 3], [1, 4]]
