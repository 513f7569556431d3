"""The MLflow pyfunc model that serves a run's SavedModel (logged as MLflow "model from code").

Needs only ``mlflow``, ``pandas``, ``tensorflow`` and ``tensorflow_text`` to load:
``mlflow.pyfunc.load_model("runs:/<id>/model").predict(pd.DataFrame({"source": [...]}))``
returns a ``pandas.Series`` of translations.
"""

import mlflow
import pandas as pd


class SavedModelTranslator(mlflow.pyfunc.PythonModel):
    """Translates the ``source`` column (or the only column) of a DataFrame."""

    def load_context(self, context):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 - registers the ops the SavedModel uses

        self._tf = tf
        self._model = tf.saved_model.load(context.artifacts["saved_model"])

    # The hint names what the signature declares (MLflow validates nothing for a DataFrame hint and,
    # with a hint, does not warn that one is missing); a list of strings is taken as well.
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.Series:
        if isinstance(model_input, pd.DataFrame):
            column = "source" if "source" in model_input.columns else model_input.columns[0]
            texts = model_input[column]
        else:
            texts = pd.Series(list(model_input))
        texts = ["" if t is None else str(t) for t in texts]
        translations = []
        for start in range(0, len(texts), 256):
            result = self._model.translate(self._tf.constant(texts[start:start + 256]))
            translations.extend(t.decode("utf-8") for t in result["text"].numpy())
        return pd.Series(translations, name="translation")


mlflow.models.set_model(SavedModelTranslator())
