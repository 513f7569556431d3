"""``ImageReader``: the exported ``tf.Module`` of an image-to-digits model (``task: image``): images in,
text and attention out.

Greedy decoding (``zoo.decoding.greedy_decode``) runs inside the graph and the ids become text with the
data's fixed vocabulary, so the SavedModel loads and runs with only ``tensorflow``.
"""

import tensorflow as tf

from zoo.decoding import greedy_decode
from zoo.export import saving
from zoo.tokens import SPECIALS


class ImageReader(tf.Module):
    """Wraps a trained ``task: image`` model (a ``Seq2SeqModel`` over ``uint8 [B, H, W]`` images with
    ``grid_shape(H, W)``) and its task's canvas and vocabulary.

    ``read(images uint8 [B, H, W])`` -> dict (dense tensors only, for TF Serving):
      - ``text [B]`` string: the digits read, up to ``<eos>``;
      - ``ids [B, T_out]`` int32: the decoded ids (``<eos>`` included, then 0);
      - ``attention [B, T_out, h, w]`` float32: each output step's weights over the model's grid
        (rows after ``<eos>`` are 0).
    ``serving_default`` is ``read``.
    """

    def __init__(self, model, task):
        super().__init__(name="image_reader")
        self.model = model.ensure_built()
        self.task = task
        self._vocabulary = tf.constant(list(task.vocabulary))
        self._grid = model.grid_shape(task.height, task.width)
        spec = tf.TensorSpec([None, task.height, task.width], tf.uint8, name="images")
        self.read = tf.function(self._read, input_signature=[spec], autograph=False)
        self.serving_default = self.read

    def _read(self, images):
        ids, attention, _ = greedy_decode(self.model, images, self.task.max_target_length)
        digits = tf.where(ids >= len(SPECIALS), tf.gather(self._vocabulary, ids), "")
        h, w = self._grid
        shape = tf.shape(attention)
        return {"text": tf.strings.reduce_join(digits, axis=1), "ids": ids,
                "attention": tf.reshape(attention, [shape[0], shape[1], h, w])}

    def serving_signatures(self):
        return {"serving_default": self.serving_default, "read": self.read}

    def save(self, directory, config_yaml=None):
        """Writes the SavedModel; ``config_yaml`` (the run's resolved config) goes to ``assets.extra``."""
        def build():
            exported = ImageReader(self.model, self.task)
            return exported, exported.serving_signatures()

        return saving.save(build, directory, config_yaml)
