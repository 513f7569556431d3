"""``Classifier``: the exported ``tf.Module`` of a text classifier: strings in, class ids and probabilities out.

Tokenization and vocabulary lookup run inside the graph (``zoo.data.classification.encode_texts``:
for ListOps, LRA's parentheses dropped, whitespace tokens, the fixed vocabulary), so the SavedModel
loads and runs with only ``tensorflow`` and ``tensorflow_text``.
"""

import tensorflow as tf

from zoo.data.classification import encode_texts
from zoo.export import saving

TEXTS = tf.TensorSpec([None], tf.string, name="text")


class Classifier(tf.Module):
    """Wraps a trained classifier (``classify(tokens [B, T]) -> logits [B, C]``) and its task's tokenizer.

    ``classify(text [B])`` -> dict (dense tensors only, for TF Serving):
      - ``class_id [B]`` int32: the most probable class;
      - ``label [B]`` string: its name (ListOps: the digit);
      - ``probabilities [B, C]`` float32: the softmax over the classes;
      - ``tokens [B, T]`` string: the tokens the model read, padded with "".
    ``serving_default`` is ``classify``.
    """

    def __init__(self, model, task):
        super().__init__(name="classifier")
        self.model = model.ensure_built()
        self.task = task
        self.tokenizer = task.tokenizer  # tracked: its lookup table goes into the SavedModel
        self._classes = tf.constant(list(task.classes))
        self.classify = tf.function(self._classify, input_signature=[TEXTS], autograph=False)
        self.serving_default = self.classify

    def _classify(self, text):
        ids = encode_texts(self.task, text)
        probabilities = tf.nn.softmax(tf.cast(self.model.classify(ids, training=False), tf.float32), axis=-1)
        class_id = tf.cast(tf.argmax(probabilities, axis=-1), tf.int32)
        tokens = tf.where(ids > 0, self.tokenizer.id_to_token(ids), "")
        return {"class_id": class_id, "label": tf.gather(self._classes, class_id), "probabilities": probabilities,
                "tokens": tokens}

    def serving_signatures(self):
        return {"serving_default": self.serving_default, "classify": self.classify}

    def save(self, directory, config_yaml=None):
        """Writes the SavedModel; ``config_yaml`` (the run's resolved config) goes to ``assets.extra``.
        A new classifier of the same model is traced for it (``zoo.export.saving``)."""
        def build():
            exported = Classifier(self.model, self.task)
            return exported, exported.serving_signatures()

        return saving.save(build, directory, config_yaml)


def classify_batched(classify_fn, texts, batch_size=256):
    """``{"class_id": [int], "probabilities": [array [C]]}`` of ``texts``, in batches."""
    out = {"class_id": [], "probabilities": []}
    for start in range(0, len(texts), batch_size):
        result = classify_fn(tf.constant(list(texts[start:start + batch_size])))
        out["class_id"].extend(int(c) for c in result["class_id"].numpy())
        out["probabilities"].extend(result["probabilities"].numpy())
    return out
