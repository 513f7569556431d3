"""The MLflow pyfunc model that serves a story-QA run's SavedModel (logged as MLflow "model from code").

Needs only ``mlflow``, ``pandas``, ``tensorflow`` and ``tensorflow_text`` to load:
``mlflow.pyfunc.load_model("runs:/<id>/model").predict(pd.DataFrame({"story": [...], "question": [...]}))``
returns a ``pandas.Series`` of answers. A story is its sentences one per line (or ended by ``. ! ?``).
"""

import mlflow
import pandas as pd


class SavedModelReader(mlflow.pyfunc.PythonModel):
    """Answers the ``question`` column about the ``story`` column of a DataFrame."""

    def load_context(self, context):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 - registers the ops the SavedModel uses

        self._tf = tf
        self._model = tf.saved_model.load(context.artifacts["saved_model"])

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.Series:  # the hint: see pyfunc_model.py
        frame = pd.DataFrame(model_input)
        missing = [c for c in ("story", "question") if c not in frame.columns]
        if missing:
            raise ValueError(f"The input needs the columns story and question; missing: {', '.join(missing)}")
        stories = ["" if s is None else str(s) for s in frame["story"]]
        questions = ["" if q is None else str(q) for q in frame["question"]]
        answers = []
        for start in range(0, len(stories), 256):
            result = self._model.answer(story=self._tf.constant(stories[start:start + 256]),
                                        question=self._tf.constant(questions[start:start + 256]))
            answers.extend(a.decode("utf-8") for a in result["answer"].numpy())
        return pd.Series(answers, name="answer")


mlflow.models.set_model(SavedModelReader())
