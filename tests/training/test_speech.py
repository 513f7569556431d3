"""The speech task kind (zoo.training.speech): digit strings transcribed from spoken digits through the one
run lifecycle, exact match, digit error rate and alignment against the gold spans in MLflow; the
SavedModel (zoo.export.speech_reader) transcribes waveforms in a fresh process."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, compose, empty_store, run_python

SHARED_FSDD = ROOT.parent / "shared" / "data" / "fsdd.zip"
NEEDS_FSDD = pytest.mark.skipif(not SHARED_FSDD.exists(), reason=f"the shared FSDD zip is not at {SHARED_FSDD} "
                                f"(../shared/data/fsdd.zip from the repository root)")
SMOKE = ["model=listen_attend_spell", "data=spoken_digits", "debug=smoke", f"data.path={SHARED_FSDD}",
         "data.max_digits=4", "model.hidden_size=16", "model.listener_units=8", "model.pyramid_layers=2",
         "model.attention_options.units=8", "data.train_size=16", "data.val_size=8"]


def test_the_trainer_rules_read_from_the_file_are_the_modules():
    from zoo import catalog
    from zoo.training import speech

    assert catalog.task_trainer_constraints("speech") == speech.TRAINER_CONSTRAINTS
    assert [r["key"] for r in speech.TRAINER_CONSTRAINTS] == ["strategy", "precision", "jit_compile"]


def test_gold_spans_map_onto_the_listeners_frames_by_hand():
    """Frame f (25 ms every 10 ms) is centred on sample 80 f + 100; a span covers the frames centred inside
    it, a listener frame u of reduction 4 covers frames [4u, 4u + 4)."""
    from types import SimpleNamespace

    from zoo.training.speech import gold_frames

    # digit 0: samples [300, 1000): centres 300..999 -> frames 3 (340) .. 11 (980): [3, 12) -> groups [0, 3)
    # digit 1: samples [1700, 2500): frames 20 (1700) .. 29 (2420): [20, 30) -> groups [5, 8)
    spans = np.array([[[300, 1000], [1700, 2500], [0, 0]]])
    task = SimpleNamespace(splits={"test": SimpleNamespace(spans=spans)})
    regions = gold_frames(SimpleNamespace(reduction=4), task, "test")
    assert regions.tolist() == [[[0, 3], [5, 8], [0, 0]]]
    assert gold_frames(SimpleNamespace(reduction=1), task, "test").tolist() == [[[3, 12], [20, 30], [0, 0]]]


def test_listener_input_is_log_mel_with_each_rows_frames():
    tf = pytest.importorskip("tensorflow")
    from zoo.data.spoken_digits import NUM_MELS, log_mel, num_frames
    from zoo.export.speech_reader import listener_input

    waves = np.random.default_rng(0).normal(size=(2, 1000)).astype("float32")
    features, frames = listener_input(tf.constant(waves), tf.constant([1000, 450]))
    assert tuple(features.shape) == (2, num_frames(1000), NUM_MELS)
    assert frames.numpy().tolist() == [num_frames(1000), num_frames(450)] == [11, 4]
    np.testing.assert_allclose(features.numpy(), log_mel(waves).numpy())
    short, frames = listener_input(tf.zeros((1, 50)), tf.constant([50]))  # under one frame: none real
    assert tuple(short.shape) == (1, 1, NUM_MELS) and frames.numpy().tolist() == [0]


@pytest.mark.slow
@NEEDS_FSDD
def test_listen_attend_spell_trains_through_the_lifecycle_and_its_saved_model_transcribes(tmp_path, monkeypatch):
    import mlflow

    from zoo.training import train

    uri = empty_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    result = train(compose(SMOKE))
    assert result["objective"] == "test_exact_match"
    client = mlflow.MlflowClient(uri)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED" and run.data.params["model.name"] == "listen_attend_spell"
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

    # The SavedModel transcribes the test waveforms in a fresh process with only TensorFlow, as the run
    # scored them (padded rows with their lengths), and one whole waveform as the in-memory model does.
    import keras
    import tensorflow as tf

    from zoo.data import load_task
    from zoo.decoding import greedy_decode
    from zoo.export.speech_reader import listener_input

    task = load_task(compose(SMOKE).data)
    waves, num_samples = task.splits["test"].padded()
    np.save(tmp_path / "waves.npy", waves)
    np.save(tmp_path / "num_samples.npy", num_samples)
    done = run_python(["-I", "-c", FRESH_PROCESS, str(saved), str(tmp_path / "waves.npy"),
                       str(tmp_path / "num_samples.npy")])
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["text"] == [r["hypothesis"] for r in rows]
    assert out["attention"][0] == 16 and np.allclose(out["sums"], 1.0, atol=1e-4)
    assert {"transcribe", "transcribe_padded", "transcribe_wav", "serving_default"} <= set(out["signatures"])
    assert out["wav"] == out["text"][:3]  # the same utterances as 8 kHz WAV files
    assert "48000" in out["wrong_rate"]  # a WAV file at another rate is refused, naming its rate
    model = keras.saving.load_model(saved / "assets.extra" / "model.keras")
    one = waves[:1, :num_samples[0]]
    ids, _, _ = greedy_decode(model, listener_input(tf.constant(one), tf.constant([one.shape[1]])),
                              task.max_target_length)
    ids = ids.numpy()[0].tolist()
    digits = ids[:ids.index(3)] if 3 in ids else ids
    expected = "".join(task.vocabulary[i] for i in digits if i >= 4)
    assert out["whole"] == expected

    # The pyfunc model transcribes WAV files from a DataFrame, as contents and as a path.
    import pandas as pd

    (tmp_path / "second.wav").write_bytes(wav_bytes(waves[1, :num_samples[1]]))
    served = mlflow.pyfunc.load_model(f"runs:/{result['run_id']}/model")
    frame = pd.DataFrame({"audio": [wav_bytes(waves[0, :num_samples[0]]), str(tmp_path / "second.wav")]})
    assert list(served.predict(frame)) == out["text"][:2]
    with pytest.raises(ValueError, match="audio row 0: a float; give a WAV file's contents"):
        served.predict(pd.DataFrame({"audio": [0.5]}))


def wav_bytes(samples, rate=8000) -> bytes:
    """A 16-bit mono WAV file of ``samples`` (floats in [-1, 1])."""
    import io
    import wave

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as f:
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(rate)
        f.writeframes(np.rint(samples * 32768).astype("<i2").tobytes())
    return buffer.getvalue()


FRESH_PROCESS = r"""
import json, sys
import numpy as np
import tensorflow as tf
m = tf.saved_model.load(sys.argv[1])
waves, num_samples = np.load(sys.argv[2]), np.load(sys.argv[3]).astype("int32")
out = m.transcribe_padded(tf.constant(waves), tf.constant(num_samples))
attention, ids, frames = out["attention"].numpy(), out["ids"].numpy(), out["frames"].numpy()
sums = [float(attention[b, t].sum()) for b in range(len(ids)) for t in range(ids.shape[1]) if ids[b, t] != 0]
whole = m.signatures["serving_default"](waveforms=tf.constant(waves[:1, :num_samples[0]]))["text"].numpy()[0]

def wav(samples, rate=8000):
    import io, wave
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as f:
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(rate)
        f.writeframes(np.rint(samples * 32768).astype("<i2").tobytes())
    return buffer.getvalue()

files = [wav(w[:n]) for w, n in zip(waves[:3], num_samples[:3])]
heard = [t.decode() for t in m.transcribe_wav(tf.constant(files))["text"].numpy()]
try:
    m.transcribe_wav(tf.constant([wav(waves[0, :num_samples[0]], rate=48000)]))
    wrong_rate = ""
except tf.errors.InvalidArgumentError as error:
    wrong_rate = str(error)
print(json.dumps({"text": [t.decode() for t in out["text"].numpy()], "attention": list(attention.shape),
                  "sums": sums, "signatures": sorted(m.signatures), "whole": whole.decode(), "wav": heard,
                  "wrong_rate": wrong_rate}))
"""
