"""The image task kind (zoo.training.image): digit strings read from images through the one run
lifecycle, exact match, digit error rate and alignment against the gold boxes in MLflow."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import compose, empty_store, run_python

SMOKE = ["model=show_attend_tell", "data=digit_strings", "debug=smoke", "model.hidden_size=16",
         "model.filters=4"]


def test_decoded_ids_become_digit_strings_up_to_eos():
    from zoo.data.digit_strings import VOCABULARY
    from zoo.training.image import ids_to_text

    assert ids_to_text([4 + 3, 4 + 9, 4 + 0, 3, 4 + 5, 0], VOCABULARY) == "390"
    assert ids_to_text([2, 1, 4 + 7, 0, 0], VOCABULARY) == "7"  # specials dropped, padding too
    assert ids_to_text([3, 4 + 1], VOCABULARY) == ""


def test_the_alignment_metrics_read_the_models_grid():
    """The scorer maps the gold pixel boxes onto the model's grid: attention put on the digit's cells
    scores 1, on other cells 0."""
    from zoo.data import load_task
    from zoo.metrics.alignment import boxes_to_grid
    from zoo.training.image import build_image_model

    cfg = compose(SMOKE + ["data.test_size=4"])
    task = load_task(cfg.data)
    model = build_image_model(cfg, task)
    grid = model.grid_shape(task.height, task.width)
    assert grid == (task.height // 8, task.width // 8)
    data = task.splits["test"]
    regions = boxes_to_grid(data.boxes, (task.height, task.width), grid)
    inside = [np.zeros((len(t) + 1, *grid)) for t in data.targets]
    for weights, boxes, text in zip(inside, regions, data.targets):
        for j in range(len(text)):
            x0, y0, x1, y1 = boxes[j]
            weights[j, y0:y1, x0:x1] = 1.0 / ((y1 - y0) * (x1 - x0))
    import zoo.metrics

    accuracy = zoo.metrics.get("alignment_accuracy")
    assert accuracy.score(data.targets, data.targets, attention=inside, regions=list(regions)) == 1.0
    elsewhere = [np.roll(w, 1, axis=0) for w in inside]  # step t looks at digit t - 1
    assert accuracy.score(data.targets, data.targets, attention=elsewhere, regions=list(regions)) == 0.0


def test_image_data_counts_the_digits_and_eos_of_the_rows_an_epoch_trains():
    """``ImageData`` (an ``ArrayData`` of ``zoo.data.digit_strings``): tokens per epoch are the digits and
    ``<eos>`` of the rows ``steps_per_epoch`` batches hold; the run records the images' sha256."""
    from zoo.training.image import load_image_data

    data = load_image_data(compose(SMOKE + ["data.train_size=12", "data.val_size=4", "data.test_size=4",
                                            "trainer.batch_size=4", "trainer.steps_per_epoch=2"]))
    targets = data.task.splits["train"].targets
    assert data.tokens_per_epoch == pytest.approx(8 * (sum(len(t) + 1 for t in targets) / len(targets)))
    assert len(data.task.fingerprint) == 64
    batches = list(data.train_batches(1))
    assert len(batches) == 2 and all(np.asarray(x[0]).dtype == np.uint8 for x, _ in batches)
    assert sum(len(np.asarray(y)) for _, y in data.val_batches()) == 4


@pytest.mark.slow
def test_show_attend_tell_trains_through_the_lifecycle_and_logs_digit_and_alignment_metrics(tmp_path, monkeypatch,
                                                                                           capfd):
    import mlflow

    from zoo.training import train

    uri = empty_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    result = train(compose(SMOKE))
    assert "signature" not in capfd.readouterr().err  # the pyfunc model has none, and the run does not say so
    assert result["objective"] == "test_exact_match"
    client = mlflow.MlflowClient(uri)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED" and run.data.params["model.name"] == "show_attend_tell"
    metrics = run.data.metrics
    for key in ("test_exact_match", "test_digit_error_rate", "test_alignment_accuracy", "test_alignment_mass"):
        assert key in metrics and metrics[key] == pytest.approx(result[key], nan_ok=True), key
    assert 0 <= metrics["test_exact_match"] <= 1 and metrics["test_digit_error_rate"] >= 0
    for key in ("train_loss", "val_loss", "val_exact_match"):
        history = client.get_metric_history(result["run_id"], key)
        assert [m.step for m in history] == [1, 2] and all(math.isfinite(m.value) for m in history), key
    art = Path(mlflow.artifacts.download_artifacts(run_id=result["run_id"], dst_path=str(tmp_path / "art"),
                                                   tracking_uri=uri))
    rows = list(csv.DictReader(open(art / "predictions.csv", encoding="utf-8")))
    assert len(rows) == 16
    assert sum(int(r["correct"]) for r in rows) / 16 == pytest.approx(metrics["test_exact_match"])
    saved = art / "saved_model"
    assert (saved / "assets.extra" / "model.keras").exists() and (saved / "assets.extra" / "config.yaml").exists()

    # The SavedModel reads the test images in a fresh process with only TensorFlow, as the run scored them.
    from zoo.data import load_task

    task = load_task(compose(SMOKE).data)
    np.save(tmp_path / "images.npy", task.splits["test"].images)
    done = run_python(["-I", "-c", FRESH_PROCESS, str(saved), str(tmp_path / "images.npy")])
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["text"] == [r["hypothesis"] for r in rows]
    grid = (task.height // 8, task.width // 8)
    assert out["attention"][0] == 16 and out["attention"][2:] == list(grid)
    assert np.allclose(out["sums"], 1.0, atol=1e-4) and "read" in out["signatures"]

    # The pyfunc model reads the same images from a DataFrame: arrays, a .npy file and a PNG file.
    import tensorflow as tf

    images = task.splits["test"].images
    model = mlflow.pyfunc.load_model(f"runs:/{result['run_id']}/model")
    assert list(model.predict(pd.DataFrame({"image": list(images)}))) == out["text"]
    np.save(tmp_path / "first.npy", images[0])
    (tmp_path / "second.png").write_bytes(tf.io.encode_png(images[1][..., None]).numpy())
    files = pd.DataFrame({"image": [str(tmp_path / "first.npy"), str(tmp_path / "second.png")]})
    assert list(model.predict(files)) == out["text"][:2]
    with pytest.raises(ValueError, match=rf"image row 0: shape \(8, 8\); this model reads {task.height} x {task.width}"):
        model.predict(pd.DataFrame({"image": [np.zeros((8, 8), np.uint8)]}))


FRESH_PROCESS = r"""
import json, sys
import numpy as np
import tensorflow as tf
m = tf.saved_model.load(sys.argv[1])
out = m.read(tf.constant(np.load(sys.argv[2])))
attention, ids = out["attention"].numpy(), out["ids"].numpy()
sums = [float(attention[b, t].sum()) for b in range(len(ids)) for t in range(ids.shape[1]) if ids[b, t] != 0]
print(json.dumps({"text": [t.decode() for t in out["text"].numpy()], "attention": list(attention.shape),
                  "sums": sums, "signatures": sorted(m.signatures)}))
"""
