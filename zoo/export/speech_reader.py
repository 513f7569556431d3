"""``SpeechReader``: the exported ``tf.Module`` of a speech-to-digits model (``task: speech``): 8 kHz
waveforms in, text and attention out.

The log-mel features (``zoo.data.spoken_digits.log_mel``, ``tf.signal``) and greedy decoding
(``zoo.decoding.greedy_decode``) run inside the graph, and the ids become text with the data's fixed
vocabulary, so the SavedModel loads and runs with only ``tensorflow``. ``listener_input`` is also what
the training batches are made of (``zoo.training.speech``): the model sees the same features in
training and in service.
"""

import tensorflow as tf

from zoo.data.spoken_digits import FRAME_LENGTH, FRAME_STEP, NUM_MELS, SAMPLE_RATE, decode_wavs, log_mel
from zoo.decoding import greedy_decode
from zoo.export import saving
from zoo.tokens import SPECIALS


def listener_input(waveforms, num_samples, sample_rate=SAMPLE_RATE, num_mels=NUM_MELS):
    """``(features float32 [B, F, M], num_frames int32 [B])`` of zero-padded ``waveforms float32 [B, N]``
    whose rows hold ``num_samples [B]`` real samples: ``log_mel`` of the batch (a batch shorter than one
    frame is padded to one) and each row's frames, ``max(0, 1 + (n - FRAME_LENGTH) // FRAME_STEP)``
    (frames past it read padding)."""
    waveforms = tf.convert_to_tensor(waveforms, tf.float32)
    short = tf.maximum(FRAME_LENGTH - tf.shape(waveforms)[1], 0)
    waveforms = tf.pad(waveforms, [[0, 0], [0, short]])
    frames = tf.maximum((tf.cast(num_samples, tf.int32) - FRAME_LENGTH) // FRAME_STEP + 1, 0)
    return log_mel(waveforms, sample_rate, num_mels), frames


class SpeechReader(tf.Module):
    """Wraps a trained ``task: speech`` model (a ``Seq2SeqModel`` over ``(features, num_frames)`` with
    ``reduction``, input frames per listener frame) and its task's vocabulary.

    ``transcribe(waveforms float32 [B, N])`` (8 kHz mono samples in [-1, 1), every sample of a row
    real), ``transcribe_padded(waveforms float32 [B, N], num_samples int32 [B])`` (rows zero-padded
    after their ``num_samples``) and ``transcribe_wav(wav [B] string)`` (WAV file contents, 8 kHz mono,
    decoded in the graph by ``zoo.data.spoken_digits.decode_wavs``: another rate or channel count is an
    ``InvalidArgumentError`` naming it) -> dict (dense tensors only, for TF Serving):
      - ``text [B]`` string: the digits heard, up to ``<eos>``;
      - ``ids [B, T_out]`` int32: the decoded ids (``<eos>`` included, then 0);
      - ``attention [B, T_out, U]`` float32: each output step's weights over the listener's frames
        (frame ``u`` covers input frames ``[u r, (u + 1) r)``, 10 ms each; rows after ``<eos>`` are 0);
      - ``frames [B]`` int32: each row's listener frames ``U_b`` (its attention is 0 past them).
    ``serving_default`` is ``transcribe``.
    """

    def __init__(self, model, task):
        super().__init__(name="speech_reader")
        self.model = model.ensure_built()
        self.task = task
        self._vocabulary = tf.constant(list(task.vocabulary))
        waves = tf.TensorSpec([None, None], tf.float32, name="waveforms")
        self.transcribe = tf.function(self._transcribe, input_signature=[waves], autograph=False)
        self.transcribe_padded = tf.function(self._transcribe_padded, autograph=False, input_signature=[
            waves, tf.TensorSpec([None], tf.int32, name="num_samples")])
        self.transcribe_wav = tf.function(self._transcribe_wav, autograph=False,
                                          input_signature=[tf.TensorSpec([None], tf.string, name="wav")])
        self.serving_default = self.transcribe

    # ``transcribe`` and ``transcribe_wav`` call the traced ``transcribe_padded``: the listener and the
    # greedy search are traced (and saved) once, not once per signature.
    def _transcribe(self, waveforms):
        shape = tf.shape(waveforms)
        return self.transcribe_padded(waveforms, tf.fill([shape[0]], shape[1]))

    def _transcribe_wav(self, wav):
        return self.transcribe_padded(*decode_wavs(wav))

    def _transcribe_padded(self, waveforms, num_samples):
        features, frames = listener_input(waveforms, num_samples, self.task.sample_rate, self.task.num_mels)
        ids, attention, _ = greedy_decode(self.model, (features, frames), self.task.max_target_length)
        digits = tf.where(ids >= len(SPECIALS), tf.gather(self._vocabulary, ids), "")
        reduction = self.model.reduction
        return {"text": tf.strings.reduce_join(digits, axis=1), "ids": ids, "attention": attention,
                "frames": (frames + reduction - 1) // reduction}

    def serving_signatures(self):
        return {"serving_default": self.serving_default, "transcribe": self.transcribe,
                "transcribe_padded": self.transcribe_padded, "transcribe_wav": self.transcribe_wav}

    def save(self, directory, config_yaml=None):
        """Writes the SavedModel; ``config_yaml`` (the run's resolved config) goes to ``assets.extra``."""
        def build():
            exported = SpeechReader(self.model, self.task)
            return exported, exported.serving_signatures()

        return saving.save(build, directory, config_yaml)
