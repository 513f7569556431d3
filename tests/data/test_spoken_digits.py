"""``zoo.data.spoken_digits``: utterances of spoken digit strings, their gold spans, log-mel features.

Most tests use a tiny zip in FSDD's layout written here (80 short recordings of two speakers), so
they run everywhere; one reads the shared ``../shared/data/fsdd.zip`` and is skipped with the reason
when it is absent."""

import io
import wave
import zipfile

import numpy as np
import pytest

from zoo.config import problems
from zoo.data import spoken_digits
from zoo.data.spoken_digits import (
    FRAME_STEP,
    SAMPLE_RATE,
    build_task,
    compose,
    num_frames,
    read_recordings,
    split_recordings,
)
from zoo.errors import ConfigError

from conftest import ROOT

SHARED_FSDD = ROOT.parent / "shared" / "data" / "fsdd.zip"
SPEAKERS = ("ann", "bob")
INDICES = (0, 3, 5, 10, 11)  # test (0-4), validation (5-9), training (10-49)
TINY = dict(train_size=12, val_size=4, test_size=4, min_digits=2, max_digits=4, min_pause=0.01, max_pause=0.02)


def wav_bytes(samples, rate=SAMPLE_RATE, channels=1):
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as f:
        f.setnchannels(channels)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(np.asarray(samples, dtype="<i2").tobytes())
    return buffer.getvalue()


@pytest.fixture(scope="module")
def tiny_zip(tmp_path_factory):
    """fsdd.zip in FSDD's layout: each recording 160-400 random non-zero samples."""
    folder = tmp_path_factory.mktemp("fsdd")
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(folder / "fsdd.zip", "w") as archive:
        archive.writestr("free-spoken-digit-dataset/README.md", "tiny")
        for speaker in SPEAKERS:
            for digit in range(10):
                for index in INDICES:
                    samples = rng.integers(1, 20000, size=int(rng.integers(160, 400))) * rng.choice([-1, 1], 1)
                    archive.writestr(f"free-spoken-digit-dataset/recordings/{digit}_{speaker}_{index}.wav",
                                     wav_bytes(samples))
    return folder / "fsdd.zip"


def test_a_composed_utterance_holds_each_recording_exactly_inside_its_span(tiny_zip):
    recordings = read_recordings(tiny_zip)
    assert len(recordings) == 2 * 10 * len(INDICES)
    rng = np.random.default_rng(1)
    waveform, target, spans, names, speaker = compose(recordings, list(recordings), rng, num_digits=4,
                                                      min_pause=0.01, max_pause=0.03)
    assert waveform.dtype == np.float32 and len(target) == 4 and speaker in SPEAKERS
    inside = np.zeros(len(waveform), dtype=bool)
    previous_end = 0
    for (start, end), name, digit in zip(spans, names, target):
        d, who, index = name.split("_")
        assert d == digit and who == speaker
        np.testing.assert_array_equal(waveform[start:end], recordings[(int(d), who, int(index))])
        assert 0.01 * SAMPLE_RATE <= start - previous_end <= 0.03 * SAMPLE_RATE  # the pause before it
        inside[start:end] = True
        previous_end = end
    assert 0.01 * SAMPLE_RATE <= len(waveform) - previous_end <= 0.03 * SAMPLE_RATE
    assert not waveform[~inside].any(), "sound outside the spans"


def test_noise_is_added_at_the_signal_to_noise_ratio(tiny_zip):
    recordings = read_recordings(tiny_zip)
    pool = list(recordings)
    clean, _, spans, _, _ = compose(recordings, pool, np.random.default_rng(2), 8, 0.2, 0.3)
    noisy, _, noisy_spans, _, _ = compose(recordings, pool, np.random.default_rng(2), 8, 0.2, 0.3, snr_db=5.0)
    np.testing.assert_array_equal(spans, noisy_spans)
    speech = np.concatenate([clean[s:e] for s, e in spans])
    snr = 10 * np.log10(np.mean(speech.astype(np.float64) ** 2) / np.mean((noisy - clean).astype(np.float64) ** 2))
    assert abs(snr - 5.0) < 0.3, snr


def test_splits_hold_fsdd_test_recordings_and_held_out_speakers(tiny_zip):
    pools = split_recordings(read_recordings(tiny_zip))
    assert {k[2] for k in pools["test"]} == {0, 3} and {k[2] for k in pools["val"]} == {5}
    assert {k[2] for k in pools["train"]} == {10, 11}
    task = build_task(path=str(tiny_zip), seed=3, **TINY)
    for split, indices in (("test", {"0", "3"}), ("val", {"5"}), ("train", {"10", "11"})):
        data = task.splits[split]
        assert {name.split("_")[2] for row in data.recordings for name in row} <= indices
        assert data.spans.shape == (len(data), 4, 2) and ((data.lengths >= 2) & (data.lengths <= 4)).all()
        for wave_, n, spans, k in zip(data.waveforms, data.num_samples, data.spans, data.lengths):
            assert len(wave_) == n and spans[k - 1, 1] < n and not spans[k:].any()
    held = build_task(path=str(tiny_zip), seed=3, test_speakers=["bob"], **TINY)
    assert set(held.splits["test"].speakers) == {"bob"} and held.speakers["test"] == ("bob",)
    assert "bob" not in held.speakers["train"] + held.speakers["val"]
    assert {name.split("_")[2] for row in held.splits["test"].recordings for name in row} <= {"0", "3", "5", "10", "11"}
    waves, lengths = task.splits["val"].padded()
    assert waves.shape == (4, lengths.max()) and not waves[0, lengths[0]:].any()


def test_a_missing_zip_is_one_line_before_tensorflow_and_from_the_builder(tiny_zip, tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_DATA_DIR", str(tmp_path))
    lines = [line for line in problems(["data=spoken_digits", f"data.cache_dir={tmp_path}"]) if "model=" not in line]
    assert len(lines) == 1 and "Free Spoken Digit Dataset was not found" in lines[0]
    assert f"$ZOO_DATA_DIR ({tmp_path})" in lines[0] and "data.path=<path to fsdd.zip>" in lines[0]
    with pytest.raises(ConfigError, match="Free Spoken Digit Dataset was not found"):
        build_task(cache_dir=str(tmp_path), **TINY)
    monkeypatch.setenv("ZOO_DATA_DIR", str(tiny_zip.parent))
    assert [line for line in problems(["data=spoken_digits"]) if "model=" not in line] == []
    (line,) = [line for line in problems(["data=spoken_digits", "data.test_speakers=[cid]"]) if "model=" not in line]
    assert line.startswith("data.test_speakers=['cid'] is not valid") and "ann, bob" in line
    with pytest.raises(ConfigError, match=r"'cid' recorded nothing"):
        build_task(test_speakers=["cid"], **TINY)


def test_a_wav_of_another_rate_is_refused_naming_it(tmp_path):
    with zipfile.ZipFile(tmp_path / "fsdd.zip", "w") as archive:
        archive.writestr("recordings/1_ann_0.wav", wav_bytes([1, 2, 3], rate=16000))
    with pytest.raises(Exception, match=r"1_ann_0.wav is 16000 Hz, 1 channel\(s\), 16-bit: expected FSDD's 8000 Hz"):
        read_recordings(tmp_path / "fsdd.zip")


def test_log_mel_in_a_graph_frames_and_a_tone_in_its_band(tiny_zip):
    tf = pytest.importorskip("tensorflow")
    t = np.arange(4000) / SAMPLE_RATE
    tone = np.stack([np.sin(2 * np.pi * 500 * t), np.sin(2 * np.pi * 2500 * t)]).astype(np.float32)
    graph = tf.function(spoken_digits.log_mel, input_signature=[tf.TensorSpec([None, None], tf.float32)])
    features = graph(tf.constant(tone)).numpy()
    assert features.shape == (2, int(num_frames(4000)), spoken_digits.NUM_MELS) and np.isfinite(features).all()
    assert num_frames(4000) == 1 + (4000 - 200) // FRAME_STEP and spoken_digits.FRAME_RATE == 100
    low, high = features.mean(axis=1).argmax(axis=1)
    mel = 1127.0 * np.log1p(np.array([spoken_digits.LOWER_HZ, 4000.0]) / 700.0)  # TensorFlow's HTK mel scale
    centres = 700.0 * np.expm1(np.linspace(mel[0], mel[1], spoken_digits.NUM_MELS + 2)[1:-1] / 1127.0)
    assert abs(centres[low] - 500) < 100 and abs(centres[high] - 2500) < 250
    task = build_task(path=str(tiny_zip), seed=0, **TINY)
    (waves, lengths, target_in), target_out = next(iter(spoken_digits.make_dataset(task, "val", batch_size=3)))
    assert waves.shape == (3, int(lengths.numpy().max())) and waves.dtype == tf.float32
    np.testing.assert_array_equal(waves.numpy()[1, :lengths[1]], task.splits["val"].waveforms[1])
    np.testing.assert_array_equal(target_out.numpy(), task.target_ids("val")[:3, 1:])


@pytest.mark.skipif(not SHARED_FSDD.exists(), reason=f"the shared FSDD zip is not at {SHARED_FSDD} "
                    f"(../shared/data/fsdd.zip from the repository root)")
def test_the_shared_fsdd_zip():
    task = build_task(path=str(SHARED_FSDD), seed=0, **TINY)
    assert task.speakers["test"] == ("george", "jackson", "nicolas", "theo", "yweweler")
    assert task.info == {"train_recordings": 2000, "val_recordings": 250, "test_recordings": 250}
    for split, allowed in (("test", range(0, 5)), ("val", range(5, 10)), ("train", range(10, 50))):
        assert {int(name.split("_")[2]) for row in task.splits[split].recordings for name in row} <= set(allowed)


def test_wav_files_are_decoded_in_the_graph_and_another_rate_is_refused_naming_it():
    tf = pytest.importorskip("tensorflow")
    first, second = wav_bytes([1, -2, 3, 4]), wav_bytes([5, 6])
    waves, lengths = tf.function(spoken_digits.decode_wavs)(tf.constant([first, second]))
    assert lengths.numpy().tolist() == [4, 2]
    np.testing.assert_array_equal(waves.numpy()[0], spoken_digits.decode_wav(first, "first"))
    np.testing.assert_array_equal(waves.numpy()[1], np.r_[spoken_digits.decode_wav(second, "second"), 0, 0])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)a WAV file at.{0,12}16000.{0,12}Hz: expected.{0,12}8000"):
        spoken_digits.decode_wavs(tf.constant([wav_bytes([1, 2], rate=16000)]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)a WAV file with.{0,12}2.{0,12}channels: expected mono"):
        spoken_digits.decode_wavs(tf.constant([wav_bytes([1, 2, 3, 4], channels=2)]))
