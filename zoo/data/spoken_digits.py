"""``data=spoken_digits``: utterances of 3-8 spoken digits; the target is the digit string.

The pieces are real recordings: the Free Spoken Digit Dataset (FSDD; Zohar Jackson and
contributors, github.com/Jakobovski/free-spoken-digit-dataset, CC BY-SA 4.0), WAV files
``recordings/<digit>_<speaker>_<index>.wav`` (8 kHz mono, 16-bit, trimmed to near-minimal silence)
in a zip this project never copies: ``data.path``, else ``fsdd.zip`` in ``$ZOO_DATA_DIR``, else in the
cache (``zoo.catalog.find_fsdd``, as Tatoeba's pair files are found; a missing zip is one line from
the config validator, before TensorFlow starts).

An utterance is one speaker saying ``n`` digits (``min_digits <= n <= max_digits``): ``n`` of that
speaker's recordings, one per digit, joined with a random pause (``min_pause`` to ``max_pause``
seconds of silence) before, between and after them; with ``snr_db`` set, white Gaussian noise is
added to the whole utterance at that signal-to-noise ratio (signal power measured over the
recordings' samples). Recordings and speakers are held out as FSDD's README splits them:

- recordings with index 0-4 (FSDD's own test set) make the test utterances, 5-9 the validation
  utterances, 10-49 the training ones; no recording is in two splits;
- ``test_speakers=[theo, ...]``: those speakers' recordings (every index) make the test
  utterances and appear in no other split (unseen voices); the others split as above.

**Gold alignment**: each digit's span ``(start, end)`` in samples, half-open: samples
``start <= i < end`` are exactly that recording's (plus the noise, when there is noise).
``zoo.metrics.alignment.spans_to_frames`` maps spans onto the feature frames (``FRAME_STEP``,
``FRAME_LENGTH``) and onto a listener's coarser frames.

**The arrays** (``SpokenDigits``, one per split, in ``task.splits``)::

    waveforms   N float32 arrays [num_samples_i], in [-1, 1)   (``padded()``: float32 [N, max] + num_samples)
    num_samples int32 [N]
    targets     N strings of digits                             "3917"
    spans       int32 [N, max_digits, 2]   (start, end) per digit, in samples; 0 past the length
    lengths     int32 [N]                  digits in each utterance
    recordings  [N] tuples of the recordings' names ("3_theo_12"), speakers [N]

**Features in the graph**: ``log_mel(waveform [B, N] float32, sample_rate=8000)`` -> ``[B, frames,
NUM_MELS]``, TensorFlow ops only (``tf.signal``), so a SavedModel takes audio (``decode_wavs``: WAV
file contents ``[B]`` to padded waveforms in the graph, 8 kHz mono only); 25 ms frames every 10 ms (``FRAME_RATE`` = 100 frames a second; frame ``f`` covers samples ``[f * FRAME_STEP,
f * FRAME_STEP + FRAME_LENGTH)``).

**How a task kind uses it** (``task: speech``): ``load_task(cfg.data)`` gives a ``SpokenDigitsTask``;
``make_dataset(task, split, batch_size, shuffle, seed)`` gives ``((waveforms float32 [B, N],
num_samples int32 [B], target_in [B, T]), target_out [B, T])`` batches (waveforms zero-padded to the
batch's longest, ``T = max_digits + 1``, ids of ``zoo.data.digit_strings.VOCABULARY``); the model
computes ``log_mel`` itself (the frames of sample ``n`` are ``num_frames(n)``). Scoring hands the
strings, the attention ``[B, T_out, frames]`` and ``spans_to_frames(split.spans, ...)`` to
``zoo.metrics``.

Importing this module imports no TensorFlow; ``log_mel`` and ``make_dataset`` do.
"""

from __future__ import annotations

import dataclasses
import io
import wave
import zipfile
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from zoo import catalog
from zoo.checks import enforce_config
from zoo.data.digit_strings import DIGITS, STRING_CONSTRAINTS, VOCABULARY, DigitStringTargets
from zoo.data.manythings import file_sha256
from zoo.data.task import DATASETS
from zoo.errors import ConfigError, CorpusError

SAMPLE_RATE = 8000
FRAME_LENGTH = 200  # samples: 25 ms
FRAME_STEP = 80  # samples: 10 ms
FFT_LENGTH = 256
NUM_MELS = 40
LOWER_HZ, UPPER_HZ = 20.0, 4000.0
FRAME_RATE = SAMPLE_RATE / FRAME_STEP  # feature frames per second
LOG_OFFSET = 1e-6  # log(mel energy + offset): silence stays finite
TEST_INDICES = range(0, 5)  # FSDD's own test recordings
VAL_INDICES = range(5, 10)  # held out of training for validation utterances
ATTRIBUTION = ("Spoken digits: Free Spoken Digit Dataset, Zohar Jackson and contributors "
               "(github.com/Jakobovski/free-spoken-digit-dataset), CC BY-SA 4.0.")

CONSTRAINTS = STRING_CONSTRAINTS + (  # the utterances'
    {"rule": "at_least", "key": "min_pause", "min": 0, "why": "seconds"},
    {"rule": "not_above", "key": "min_pause", "of": "max_pause"},
    {"rule": "at_most", "key": "max_pause", "max": 5, "why": "seconds"},
)


@dataclasses.dataclass
class SpokenDigits:
    """One split's utterances and their gold alignment (shapes in the module docstring)."""

    waveforms: List[np.ndarray]
    num_samples: np.ndarray
    targets: List[str]
    spans: np.ndarray
    lengths: np.ndarray
    recordings: List[Tuple[str, ...]]
    speakers: List[str]

    def __len__(self) -> int:
        return len(self.targets)

    def padded(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(waveforms float32 [N, longest], num_samples int32 [N])``, zero-padded."""
        out = np.zeros((len(self), int(self.num_samples.max(initial=0))), dtype=np.float32)
        for row, wave_ in zip(out, self.waveforms):
            row[:len(wave_)] = wave_
        return out, self.num_samples


@dataclasses.dataclass
class SpokenDigitsTask(DigitStringTargets):
    """``data=spoken_digits``: the splits' utterances, the target vocabulary, the feature settings."""

    name: str
    splits: Dict[str, SpokenDigits]
    max_digits: int
    speakers: Dict[str, Tuple[str, ...]]  # the speakers of each split
    sample_rate: int = SAMPLE_RATE
    frame_rate: float = FRAME_RATE
    num_mels: int = NUM_MELS
    metric: str = "exact_match"
    attribution: str = ATTRIBUTION
    vocabulary: Tuple[str, ...] = VOCABULARY
    fingerprint: Optional[str] = None
    info: Dict[str, object] = dataclasses.field(default_factory=dict)

    def stats(self) -> Dict[str, object]:
        out = {"target_vocab_size": self.vocab_size, "sample_rate": self.sample_rate, "num_mels": self.num_mels}
        for split, data in self.splits.items():
            out[f"{split}_examples"] = len(data)
            out[f"{split}_audio_seconds"] = round(float(data.num_samples.sum()) / self.sample_rate, 1)
            out[f"{split}_speakers"] = ",".join(self.speakers[split])
        out.update(self.info)
        return out

    def split_texts(self):
        """``(split, texts, profile)`` per split: each utterance's target and recordings."""
        for split, data in self.splits.items():
            texts = [f"{t}\t{' '.join(r)}" for t, r in zip(data.targets, data.recordings)]
            yield split, texts, {"examples": len(data), "sample_rate": self.sample_rate}


def decode_wav(data: bytes, where: str) -> np.ndarray:
    """float32 samples in [-1, 1) of an 8 kHz mono 16-bit WAV file; ``CorpusError`` naming ``where``
    for anything else."""
    try:
        with wave.open(io.BytesIO(data)) as f:
            channels, width, rate, frames = f.getnchannels(), f.getsampwidth(), f.getframerate(), f.getnframes()
            raw = f.readframes(frames)
    except (wave.Error, EOFError) as error:
        raise CorpusError(f"{where} is not a readable WAV file ({error}).") from None
    if (channels, width, rate) != (1, 2, SAMPLE_RATE):
        raise CorpusError(f"{where} is {rate} Hz, {channels} channel(s), {8 * width}-bit: expected FSDD's "
                          f"{SAMPLE_RATE} Hz mono 16-bit PCM.")
    return (np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0)


def read_recordings(path) -> Dict[Tuple[int, str, int], np.ndarray]:
    """``{(digit, speaker, index): samples}`` of every recording in the FSDD zip at ``path``."""
    members = catalog.fsdd_recordings(path)
    out = {}
    with zipfile.ZipFile(path) as archive:
        for member, key in members.items():
            out[key] = decode_wav(archive.read(member), f"{path}:{member}")
    return out


def recording_name(key: Tuple[int, str, int]) -> str:
    return f"{key[0]}_{key[1]}_{key[2]}"


def split_recordings(keys: Sequence[Tuple[int, str, int]], test_speakers: Sequence[str] = ()
                     ) -> Dict[str, List[Tuple[int, str, int]]]:
    """The recordings of each split (module docstring): by index, and ``test_speakers`` held out."""
    held = set(test_speakers)
    pools = {"train": [], "val": [], "test": []}
    for key in sorted(keys):
        _, speaker, index = key
        if held:
            split = "test" if speaker in held else "val" if index in VAL_INDICES else \
                "train" if index not in TEST_INDICES else None
        else:
            split = "test" if index in TEST_INDICES else "val" if index in VAL_INDICES else "train"
        if split:
            pools[split].append(key)
    return pools


def compose(recordings: Dict[Tuple[int, str, int], np.ndarray], pool: Sequence[Tuple[int, str, int]],
            rng: np.random.Generator, num_digits: int, min_pause: float = 0.05, max_pause: float = 0.3,
            snr_db: Optional[float] = None) -> Tuple[np.ndarray, str, np.ndarray, Tuple[str, ...], str]:
    """One utterance: ``(waveform float32 [n], target, spans int32 [num_digits, 2], recording names,
    speaker)``: one speaker of ``pool``, a recording of theirs per digit, random pauses, optional
    noise. A speaker with no recording of a digit in ``pool`` is not asked to say it."""
    by_speaker: Dict[str, Dict[int, list]] = {}
    for key in pool:
        by_speaker.setdefault(key[1], {}).setdefault(key[0], []).append(key)
    speaker = sorted(by_speaker)[int(rng.integers(len(by_speaker)))]
    said = sorted(by_speaker[speaker])
    digits = [said[i] for i in rng.integers(len(said), size=num_digits)]
    pauses = np.rint(rng.uniform(min_pause, max_pause, size=num_digits + 1) * SAMPLE_RATE).astype(np.int64)
    picks = [by_speaker[speaker][d][int(rng.integers(len(by_speaker[speaker][d])))] for d in digits]
    pieces, spans, at = [], np.zeros((num_digits, 2), dtype=np.int32), 0
    for i, key in enumerate(picks):
        pieces.append(np.zeros(pauses[i], dtype=np.float32))
        at += int(pauses[i])
        pieces.append(recordings[key])
        spans[i] = (at, at + len(recordings[key]))
        at += len(recordings[key])
    pieces.append(np.zeros(pauses[-1], dtype=np.float32))
    waveform = np.concatenate(pieces)
    if snr_db is not None:
        speech = np.concatenate([recordings[k] for k in picks])
        power = float(np.mean(np.square(speech, dtype=np.float64))) if len(speech) else 0.0
        noise = rng.normal(0.0, np.sqrt(power / 10.0 ** (snr_db / 10.0)), size=len(waveform))
        waveform = (waveform + noise).astype(np.float32)
    target = "".join(DIGITS[d] for d in digits)
    return waveform, target, spans, tuple(recording_name(k) for k in picks), speaker


def generate(recordings, pool, count: int, seed, min_digits: int, max_digits: int, min_pause: float = 0.05,
             max_pause: float = 0.3, snr_db: Optional[float] = None) -> SpokenDigits:
    """``count`` utterances from the recordings of ``pool`` (the same for the same arguments)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_digits, max_digits + 1, size=count).astype(np.int32)
    waves, targets, names, speakers = [], [], [], []
    spans = np.zeros((count, max_digits, 2), dtype=np.int32)
    for n in range(count):
        waveform, target, span, recorded, speaker = compose(recordings, pool, rng, int(lengths[n]), min_pause,
                                                            max_pause, snr_db)
        waves.append(waveform)
        targets.append(target)
        spans[n, :len(span)] = span
        names.append(recorded)
        speakers.append(speaker)
    num_samples = np.asarray([len(w) for w in waves], dtype=np.int32)
    return SpokenDigits(waves, num_samples, targets, spans, lengths, names, speakers)


@DATASETS.register("spoken_digits", task="speech")
def build_task(seed: int = 0, path: Optional[str] = None, cache_dir: Optional[str] = None, train_size: int = 4000,
               val_size: int = 400, test_size: int = 400, min_digits: int = 3, max_digits: int = 8,
               min_pause: float = 0.05, max_pause: float = 0.3, snr_db: Optional[float] = None,
               test_speakers: Sequence[str] = ()) -> SpokenDigitsTask:
    """``data=spoken_digits``: the FSDD recordings split (module docstring), then each split's utterances."""
    enforce_config(CONSTRAINTS, "data", train_size=train_size, val_size=val_size, test_size=test_size,
                   min_digits=min_digits, max_digits=max_digits, min_pause=min_pause, max_pause=max_pause)
    if snr_db is not None and (isinstance(snr_db, bool) or not isinstance(snr_db, (int, float))):
        raise ConfigError(f"data.snr_db={snr_db!r} is not valid: expected a number of decibels, or null for no noise.")
    test_speakers = list(test_speakers or ())
    zip_path = catalog.find_fsdd(path, cache_dir)
    if zip_path is None:
        raise ConfigError(catalog.fsdd_not_found(path, cache_dir))
    problem = catalog.fsdd_speaker_problem(zip_path, test_speakers)
    if problem:
        raise ConfigError(problem)
    recordings = read_recordings(zip_path)
    pools = split_recordings(list(recordings), test_speakers)
    sizes = {"train": train_size, "val": val_size, "test": test_size}
    splits = {split: generate(recordings, pools[split], sizes[split], [seed, number], min_digits, max_digits,
                              min_pause, max_pause, snr_db)
              for number, split in enumerate(sizes)}
    speakers = {split: tuple(sorted({k[1] for k in pool})) for split, pool in pools.items()}
    info = {f"{split}_recordings": len(pool) for split, pool in pools.items()}
    return SpokenDigitsTask("spoken_digits", splits, max_digits, speakers, fingerprint=file_sha256(zip_path),
                            info=info)


def num_frames(num_samples):
    """Feature frames ``log_mel`` gives ``num_samples`` samples (it pads nothing): ``1 + (n - FRAME_LENGTH)
    // FRAME_STEP``, 0 below one frame (ints or NumPy arrays; in a graph, the same with ``tf.maximum``)."""
    return np.maximum((np.asarray(num_samples) - FRAME_LENGTH) // FRAME_STEP + 1, 0)


def log_mel(waveform, sample_rate: int = SAMPLE_RATE, num_mels: int = NUM_MELS):
    """Log-mel filterbank energies, ``[B, N] float32`` -> ``[B, frames, num_mels]``, TensorFlow ops only
    (usable inside a ``tf.function`` and a SavedModel).

    ``|STFT|^2`` over 25 ms Hann windows every 10 ms (``FRAME_LENGTH``, ``FRAME_STEP`` at 8 kHz;
    ``FFT_LENGTH`` bins), projected on ``num_mels`` triangular mel filters from ``LOWER_HZ`` to the
    Nyquist frequency (``tf.signal.linear_to_mel_weight_matrix``), then ``log(. + 1e-6)``. The frames
    of a padded batch past a row's own ``num_frames`` are padding.
    """
    import tensorflow as tf

    if sample_rate != SAMPLE_RATE:
        raise ValueError(f"Received an invalid value for argument `sample_rate`, expected {SAMPLE_RATE} (the "
                         f"frames are {FRAME_LENGTH} and {FRAME_STEP} samples at that rate). Received: "
                         f"sample_rate={sample_rate}")
    waveform = tf.convert_to_tensor(waveform, tf.float32)
    stft = tf.signal.stft(waveform, frame_length=FRAME_LENGTH, frame_step=FRAME_STEP, fft_length=FFT_LENGTH,
                          window_fn=tf.signal.hann_window, pad_end=False)
    power = tf.math.square(tf.math.abs(stft))
    filters = tf.signal.linear_to_mel_weight_matrix(num_mels, FFT_LENGTH // 2 + 1, sample_rate, LOWER_HZ,
                                                    min(UPPER_HZ, sample_rate / 2))
    return tf.math.log(tf.tensordot(power, filters, 1) + LOG_OFFSET)


def decode_wavs(contents):
    """WAV file contents ``[B]`` (strings) -> ``(waveforms float32 [B, N], num_samples int32 [B])``,
    zero-padded, TensorFlow ops only (``tf.audio.decode_wav``), for a SavedModel that takes audio
    files. 8 kHz mono only: another rate or channel count fails (``InvalidArgumentError``) naming it.
    """
    import tensorflow as tf

    def one(content):
        audio, rate = tf.audio.decode_wav(content)
        channels = tf.shape(audio)[1]
        checks = [tf.debugging.Assert(tf.equal(rate, SAMPLE_RATE), ["a WAV file at", rate, "Hz: expected",
                                                                    SAMPLE_RATE, "Hz mono (resample it)"]),
                  tf.debugging.Assert(tf.equal(channels, 1), ["a WAV file with", channels, "channels: expected "
                                                              "mono (mix it down to one channel)"])]
        with tf.control_dependencies(checks):
            return tf.identity(audio[:, 0])

    contents = tf.convert_to_tensor(contents, tf.string)
    waves = tf.map_fn(one, contents, fn_output_signature=tf.RaggedTensorSpec([None], tf.float32))
    return waves.to_tensor(), tf.cast(waves.row_lengths(), tf.int32)


def make_dataset(task: SpokenDigitsTask, split: str, batch_size: int, shuffle: bool = False, seed: int = 0):
    """``((waveforms float32 [B, N], num_samples int32 [B], target_in int32 [B, T]), target_out int32
    [B, T])`` batches of a split, waveforms zero-padded to the batch's longest."""
    import tensorflow as tf

    data = task.splits[split]
    flat = np.concatenate(data.waveforms) if len(data) else np.zeros(0, np.float32)
    waves = tf.RaggedTensor.from_row_lengths(flat, data.num_samples.astype(np.int64))
    ids = task.target_ids(split)
    ds = tf.data.Dataset.from_tensor_slices((waves, data.num_samples, ids))
    if shuffle:
        ds = ds.shuffle(len(data), seed=seed, reshuffle_each_iteration=True)
    ds = ds.map(lambda w, n, t: ((w, n, t[:-1]), t[1:]), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.padded_batch(batch_size, padded_shapes=(([None], [], [None]), [None]))
    return ds.prefetch(tf.data.AUTOTUNE)
