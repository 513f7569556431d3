"""The speech task kind (``task: speech`` models, e.g. ``listen_attend_spell``, on ``data=spoken_digits``) of
the one run lifecycle.

What differs from translation lives here (``SpeechKind``): the data (``zoo.data.spoken_digits``'s
``((waveforms float32 [B, N], num_samples [B], target_in [B, T]), target_out [B, T])`` batches, turned
into ``((features [B, F, M], num_frames [B], target_in), target_out)`` in the input pipeline by
``zoo.export.speech_reader.listener_input``, the features the SavedModel computes too), the model's
sizes (``target_vocab_size``, ``num_mels`` from the data), and the scoring: greedy decoding of the
validation utterances gives ``val_exact_match`` per epoch, of the test utterances ``test_exact_match``,
``test_digit_error_rate`` and, against each digit's gold span mapped onto the listener's frames
(``zoo.metrics.alignment.spans_to_frames`` with the model's ``reduction``), ``test_alignment_accuracy``
and ``test_alignment_mass``; the test predictions go to ``predictions.csv``. The loop is
``zoo.training.fit.fit`` unchanged (the per-token loss of teacher forcing).

Validation, scoring and the export share one traced module (``TaskKind.module_of``): a
``zoo.export.speech_reader.SpeechReader``, whose ``transcribe(waveforms float32 [B, N])`` returns the
text and the attention ``[B, T_out, U]``; the ``.keras`` model and the run's config go in its
``assets.extra``; the MLflow pyfunc model over it (``tracking.log_pyfunc``) transcribes a DataFrame's
``audio`` column of WAV bytes or paths (``zoo/export/speech_pyfunc_model.py``).
"""

from __future__ import annotations

import numpy as np

from zoo.config import model_kwargs
from zoo.metrics.alignment import spans_to_frames
from zoo.training.digit_strings import DigitStringData, DigitStringKind
from zoo.training.lifecycle import ONE_REPLICA_FLOAT32
from zoo.training.model import create_model

TRAINER_CONSTRAINTS = ONE_REPLICA_FLOAT32 + (  # refused before TensorFlow starts (zoo.config.task_kind_problems)
    {"rule": "one_of", "key": "jit_compile", "values": (False,),
     "why": "its speller's teacher forcing is a scan, which XLA cannot differentiate"},
)


class SpeechData(DigitStringData):
    """``DigitStringData`` of ``zoo.data.spoken_digits``: ``((features, num_frames, target_in), target_out)``
    batches."""

    def dataset(self, split: str, shuffle: bool = False, seed: int = 0):
        import tensorflow as tf

        from zoo.data.spoken_digits import make_dataset
        from zoo.export.speech_reader import listener_input

        task = self.task

        def features(x, y):
            waves, num_samples, target_in = x
            feats, frames = listener_input(waves, num_samples, task.sample_rate, task.num_mels)
            return (feats, frames, target_in), y

        ds = make_dataset(task, split, self.batch_size, shuffle=shuffle, seed=seed)
        return ds.map(features, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def train_rows(self) -> int:
        return len(self.task.splits["train"])


def build_speech_model(cfg, task):
    """``zoo.models.create(cfg.model.name, target_vocab_size=..., num_mels=..., ...)``, built."""
    return create_model(cfg.model.name, target_vocab_size=task.vocab_size, num_mels=task.num_mels,
                        **model_kwargs(cfg.model)).ensure_built()


def transcribe_split(reader, task, split: str, batch_size: int):
    """Greedy decoding of a split through ``reader`` (a ``SpeechReader``): ``(texts [N], attention [N]
    of [T_out, U_b])``, each row's attention cut to its own listener frames."""
    waves, num_samples = task.splits[split].padded()
    texts, attention = [], []
    for start in range(0, len(waves), batch_size):
        rows = num_samples[start:start + batch_size]
        batch = waves[start:start + batch_size, :max(int(rows.max(initial=0)), 1)]
        out = reader.transcribe_padded(batch, rows.astype(np.int32))
        for text, weights, frames in zip(out["text"].numpy(), out["attention"].numpy(), out["frames"].numpy()):
            texts.append(text.decode("utf-8"))
            attention.append(weights[:, :int(frames)])
    return texts, attention


def gold_frames(model, task, split: str) -> np.ndarray:
    """Each digit's gold span of ``split`` in the model's listener frames, int32 ``[N, max_digits, 2]``."""
    from zoo.data.spoken_digits import FRAME_LENGTH, FRAME_STEP

    return spans_to_frames(task.splits[split].spans, FRAME_STEP, FRAME_LENGTH, reduction=model.reduction)


class SpeechKind(DigitStringKind):
    """Speech to digit strings for the run lifecycle (``zoo.training.lifecycle.run``): ``SpeechData``, a
    ``task: speech`` model; read through the one traced ``SpeechReader`` (validation, scoring and the
    export share it), each digit's gold span mapped onto the listener's frames."""

    def build_data(self, runtime) -> SpeechData:
        return SpeechData.from_config(self.cfg)

    def new_model(self, data):
        return build_speech_model(self.cfg, data.task)

    def exporter(self, data, model):
        """``transcribe(waveforms float32 [B, N])`` -> text, ids, attention ``[B, T_out, U]``
        (``zoo.export.speech_reader``)."""
        from zoo.export.speech_reader import SpeechReader

        return self.module_of(model, lambda: SpeechReader(model, data.task))

    def log_served_model(self, saved_model: str) -> None:
        from zoo.export.pyfunc import log_speech_pyfunc

        log_speech_pyfunc(saved_model)

    def read(self, data, model, split: str, batch_size: int):
        return transcribe_split(self.exporter(data, model), data.task, split, batch_size)

    def gold_regions(self, data, model, split: str):
        return gold_frames(model, data.task, split)

    def explorer_views(self, data, index: int, text: str, attention, region) -> list:
        """Every output token's weights over the listener's frames, each digit's gold span outlined."""
        from zoo.plots.explorer import view

        weights = np.asarray(attention)  # [T_out, U]
        tokens = (list(text) + ["<eos>"])[:weights.shape[0]]
        spans = np.asarray(region)
        cells = [(t, f) for t, (f0, f1) in enumerate(spans[:len(tokens)]) for f in range(f0, f1)]
        return [view("every output over the listener's frames (gold spans outlined)", tokens,
                     [f"frame {u}" for u in range(weights.shape[1])], weights, gold_cells=cells)]
