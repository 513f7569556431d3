"""The MLflow pyfunc model that serves a speech run's SavedModel (``task: speech``; logged as MLflow
"model from code").

Needs only ``mlflow``, ``pandas`` and ``tensorflow`` to load:
``mlflow.pyfunc.load_model("runs:/<id>/model").predict(pd.DataFrame({"audio": [...]}))`` returns a
``pandas.Series`` of the digit strings heard. Each cell of the ``audio`` column (or of the only column)
is a WAV file's contents (``bytes``) or its path: 16-bit mono at the rate the run trained on (the
SavedModel's ``transcribe_wav`` decodes it in the graph; another rate is an error naming it).
"""

import mlflow
import pandas as pd


class SavedModelTranscriber(mlflow.pyfunc.PythonModel):
    """Transcribes the ``audio`` column (or the only column) of a DataFrame."""

    def load_context(self, context):
        import tensorflow as tf

        self._tf = tf
        self._model = tf.saved_model.load(context.artifacts["saved_model"])

    @staticmethod
    def _wav(row: int, cell) -> bytes:
        if isinstance(cell, (bytes, bytearray, memoryview)):
            return bytes(cell)
        if isinstance(cell, str) or hasattr(cell, "__fspath__"):
            with open(cell, "rb") as f:
                return f.read()
        raise ValueError(f"audio row {row}: a {type(cell).__name__}; give a WAV file's contents (bytes) or its path")

    # The hint names the input the docstring describes (MLflow validates nothing for a DataFrame hint).
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.Series:
        frame = pd.DataFrame({"audio": list(model_input)}) if not isinstance(model_input, pd.DataFrame) \
            else model_input
        column = "audio" if "audio" in frame.columns else frame.columns[0]
        wavs = [self._wav(row, cell) for row, cell in enumerate(frame[column])]
        texts = []
        for start in range(0, len(wavs), 64):
            result = self._model.transcribe_wav(self._tf.constant(wavs[start:start + 64], self._tf.string))
            texts.extend(t.decode("utf-8") for t in result["text"].numpy())
        return pd.Series(texts, name="text")


mlflow.models.set_model(SavedModelTranscriber())
