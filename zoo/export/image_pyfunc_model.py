"""The MLflow pyfunc model that serves an image run's SavedModel (``task: image``; logged as MLflow
"model from code").

Needs only ``mlflow``, ``pandas``, ``numpy`` and ``tensorflow`` to load:
``mlflow.pyfunc.load_model("runs:/<id>/model").predict(pd.DataFrame({"image": [...]}))`` returns a
``pandas.Series`` of the digit strings read. Each cell of the ``image`` column (or of the only column) is
the canvas the run trained on, ``[H, W]`` grey levels 0-255 (a NumPy array or nested lists), or the path
of a file holding one: ``.npy``, or an image TensorFlow decodes (PNG, JPEG, BMP, GIF; colour is turned
to grey).
"""

import os

import mlflow
import numpy as np
import pandas as pd


class SavedModelImageReader(mlflow.pyfunc.PythonModel):
    """Reads the digits of the ``image`` column (or the only column) of a DataFrame."""

    def load_context(self, context):
        import tensorflow as tf

        self._tf = tf
        self._model = tf.saved_model.load(context.artifacts["saved_model"])
        shape = self._model.read.concrete_functions[0].structured_input_signature[0][0].shape
        self._size = (int(shape[1]), int(shape[2]))  # the canvas, [H, W]

    def _canvas(self, row: int, cell) -> np.ndarray:
        if isinstance(cell, str) or hasattr(cell, "__fspath__"):
            path = os.fspath(cell)
            if path.endswith(".npy"):
                cell = np.load(path)
            else:
                tf = self._tf
                cell = tf.io.decode_image(tf.io.read_file(path), channels=1, expand_animations=False).numpy()[..., 0]
        image = np.asarray(cell)
        if image.shape != self._size:
            raise ValueError(f"image row {row}: shape {image.shape}; this model reads {self._size[0]} x "
                             f"{self._size[1]} canvases (grey levels 0-255), as its run's data made them")
        if image.dtype != np.uint8:
            if image.size and (np.nanmin(image) < 0 or np.nanmax(image) > 255 or np.isnan(image).any()):
                raise ValueError(f"image row {row}: values from {np.nanmin(image)} to {np.nanmax(image)}; "
                                 f"grey levels are 0-255")
            image = np.rint(image).astype(np.uint8)
        return image

    # The hint names the input the docstring describes (MLflow validates nothing for a DataFrame hint).
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.Series:
        frame = pd.DataFrame({"image": list(model_input)}) if not isinstance(model_input, pd.DataFrame) \
            else model_input
        column = "image" if "image" in frame.columns else frame.columns[0]
        images = [self._canvas(row, cell) for row, cell in enumerate(frame[column])]
        texts = []
        for start in range(0, len(images), 256):
            batch = np.stack(images[start:start + 256]) if images else np.zeros((0, *self._size), np.uint8)
            texts.extend(t.decode("utf-8") for t in self._model.read(self._tf.constant(batch))["text"].numpy())
        return pd.Series(texts, name="text")


mlflow.models.set_model(SavedModelImageReader())
