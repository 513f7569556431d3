"""The classification task kind (zoo.training.classify, zoo.export.classifier): ListOps through the one run
lifecycle, ``test_accuracy`` and the majority-class baseline in MLflow, a SavedModel that classifies
strings in a fresh process."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import compose, empty_store, evaluate_here, run_python

# One encoder layer of two heads: the lifecycle, the export and the scoring are per model, not per layer.
SMOKE = ["model=transformer_classifier", "data=listops", "debug=smoke", "data.min_length=10", "data.max_length=60",
         "model.num_layers=1", "model.num_heads=2", "model.intermediate_dim=16", "tracking.predictions=16"]


def tiny_task_and_model():
    import keras

    import zoo.models
    from zoo.data import load_task

    task = load_task(compose(["data=listops", "data.train_size=30", "data.val_size=4", "data.test_size=5",
                              "data.min_length=5", "data.max_length=30"]).data)
    keras.utils.set_random_seed(0)
    model = zoo.models.create("transformer_classifier", vocab_size=task.vocab_size, num_classes=task.num_classes,
                              embed_dim=8, intermediate_dim=8, num_layers=1, num_heads=2).ensure_built()
    return task, model


def test_the_exported_module_classifies_raw_strings_as_the_model_does():
    import tensorflow as tf

    from zoo.data.classification import encode_texts
    from zoo.evaluation.classify import accuracy
    from zoo.export.classifier import Classifier, classify_batched

    task, model = tiny_task_and_model()
    classifier = Classifier(model, task)
    texts = task.splits["test"][0]
    out = classifier.classify(tf.constant(texts))
    probabilities = out["probabilities"].numpy()
    assert probabilities.shape == (5, 10) and np.allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    expected = model.classify(encode_texts(task, tf.constant(texts))).numpy().argmax(-1)
    assert (out["class_id"].numpy() == expected).all()
    assert [t.decode() for t in out["label"].numpy()] == [str(c) for c in expected]
    assert [t.decode() for t in out["tokens"].numpy()[0] if t] == texts[0].split()
    odd = classifier.classify(tf.constant(["", "( ( [MAX 2 ) 9 ] )", "[MAX 2 9 ]", "hello [AVG 1 ]"]))
    assert odd["class_id"].shape == (4,) and odd["class_id"].numpy()[1] == odd["class_id"].numpy()[2]
    batched = classify_batched(classifier.classify, texts, batch_size=2)
    assert batched["class_id"] == expected.tolist()
    assert accuracy([1, 2, 3, 4], [1, 2, 0, 4]) == 0.75


def test_predictions_csv_names_the_classes(tmp_path):
    from zoo.evaluation.classify import write_predictions

    task, _ = tiny_task_and_model()
    labels = task.splits["test"][1]
    outputs = {"class_id": [labels[0], (labels[1] + 1) % 10], "probabilities": [np.full(10, 0.1)] * 2}
    rows = list(csv.DictReader(open(write_predictions(tmp_path / "p.csv", task, "test", outputs, 2))))
    assert [r["correct"] for r in rows] == ["1", "0"] and rows[0]["label"] == str(labels[0])
    assert rows[0]["text"] == task.splits["test"][0][0] and rows[0]["probability"] == "0.1000"


def test_classify_data_batches_every_training_example_once_per_epoch_and_counts_one_token_each():
    """``ClassifyData`` (an ``EncodedData`` of ``zoo.data.classification``): the splits encoded once, an
    epoch's bucketed batches hold each training label once, the validation batches the validation labels."""
    from zoo.training.classify import load_classify_data

    data = load_classify_data(compose(["data=listops", "data.train_size=30", "data.val_size=4", "data.test_size=5",
                                       "data.min_length=5", "data.max_length=30", "trainer.batch_size=8",
                                       "trainer.bucket_boundaries=[10,20]"]))
    labels = data.task.splits["train"][1]
    assert data.bucket_boundaries == [10, 20] and data.tokens_per_epoch == len(labels) == 30
    epoch = [np.asarray(y)[:, 0] - 1 for _, y in data.train_batches(1)]
    assert sorted(np.concatenate(epoch).tolist()) == sorted(labels)
    resumed = [np.asarray(y)[:, 0] - 1 for _, y in data.train_batches(1, skip_steps=2)]
    assert [y.tolist() for y in epoch[2:]] == [y.tolist() for y in resumed]
    assert np.concatenate([np.asarray(y)[:, 0] - 1 for _, y in data.val_batches()]).tolist() == \
        list(data.task.splits["val"][1])


FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
m = tf.saved_model.load(sys.argv[1])
texts = json.load(open(sys.argv[2]))
out = m.classify(tf.constant(texts))
served = m.signatures["serving_default"](text=tf.constant(texts))
print(json.dumps({"class_id": out["class_id"].numpy().tolist(), "label": [t.decode() for t in out["label"].numpy()],
                  "sums": out["probabilities"].numpy().sum(-1).tolist(),
                  "served": served["class_id"].numpy().tolist(), "signatures": sorted(m.signatures)}))
"""


@pytest.mark.slow
def test_listops_trains_through_the_lifecycle_logs_test_accuracy_and_exports_a_classifier(tmp_path, monkeypatch):
    import mlflow

    from zoo.training import train

    uri = empty_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    result = train(compose(SMOKE))
    assert result["objective"] == "test_accuracy"
    client = mlflow.MlflowClient(uri)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED" and run.data.params["model.name"] == "transformer_classifier"
    metrics = run.data.metrics
    assert metrics["test_accuracy"] == pytest.approx(result["test_accuracy"]) and 0 <= metrics["test_accuracy"] <= 1
    assert 0 <= metrics["test_majority_accuracy"] <= 1
    for key in ("train_loss", "val_loss", "val_accuracy"):
        history = client.get_metric_history(result["run_id"], key)
        assert [m.step for m in history] == [1, 2] and all(math.isfinite(m.value) for m in history), key
    art = Path(mlflow.artifacts.download_artifacts(run_id=result["run_id"], dst_path=str(tmp_path / "art"),
                                                   tracking_uri=uri))
    rows = list(csv.DictReader(open(art / "predictions.csv", encoding="utf-8")))
    assert len(rows) == 16 and sum(int(r["correct"]) for r in rows) / 16 == pytest.approx(metrics["test_accuracy"])
    assert (art / "saved_model" / "assets.extra" / "config.yaml").exists()
    assert (art / "vocab" / "tokens" / "vocab.txt").exists()

    texts = [r["text"] for r in rows]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    done = run_python(["-c", FRESH_PROCESS, str(art / "saved_model"), str(tmp_path / "texts.json")])
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["label"] == [r["prediction"] for r in rows]  # the run's own scoring, reloaded
    assert out["served"] == out["class_id"] and np.allclose(out["sums"], 1.0, atol=1e-5)
    assert {"classify", "serving_default"} <= set(out["signatures"])

    evaluated = evaluate_here(monkeypatch, uri, tmp_path, [f"run_id={result['run_id']}", "split=test"])
    assert evaluated["test_accuracy"] == pytest.approx(metrics["test_accuracy"])  # the SavedModel, scored again
    assert evaluated["test_majority_accuracy"] == pytest.approx(metrics["test_majority_accuracy"])


def test_experiment_listops_and_the_classifiers_attention_options_are_checked_before_tensorflow():
    from zoo.config import train_problems, validate_train

    cfg = compose(["experiment=listops"])
    validate_train(cfg)
    assert (cfg.model.name, cfg.data.name, cfg.model.attention) == ("transformer_classifier", "listops", "multi_head")
    assert cfg.data.min_length == 100 and cfg.data.max_length == 500
    owned = train_problems(compose(["experiment=listops", "model.attention_options.num_heads=8"]),
                           overridden=["model.attention_options.num_heads"])
    assert [p for p in owned if "is set by model=transformer_classifier itself" in p and "model.num_heads" in p]
    refused = train_problems(compose(["experiment=listops", "model.attention=dot"]))
    assert [p for p in refused if p.startswith("model.attention=dot is not a self-attention")]


def test_a_listops_input_longer_than_linformers_length_is_one_line_before_the_model_is_built():
    from zoo.data import load_task
    from zoo.errors import ConfigError
    from zoo.training.classify import build_classifier

    cfg = compose(["model=transformer_classifier", "data=listops", "model.attention=linformer", "model.max_length=20",
                   "data.train_size=10", "data.val_size=2", "data.test_size=2", "data.min_length=25",
                   "data.max_length=40"])
    task = load_task(cfg.data)
    with pytest.raises(ConfigError, match=rf"^model.max_length=20 is shorter than data=listops's longest input "
                                          rf"\({task.max_length} tokens\), and model.attention=linformer"):
        build_classifier(cfg, task)
    cfg.model.max_length = task.max_length
    model = build_classifier(cfg, task)
    assert model.encoder_layers[0].self_attention.max_length == task.max_length
