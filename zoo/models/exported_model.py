"""The base of every registered model whose SavedModel entry points are its exporter's."""

import keras


class ExportedModel(keras.Model):
    """A model exported through its own entry points (``zoo.export``: the translator's ``translate``,
    the reader's, the classifier's ``classify``), never through Keras' traced ``call``; its weights'
    shapes do not depend on the data, so ``ensure_built`` builds it before any batch is seen."""

    @property
    def _default_save_signature(self):
        # Keras (TensorFlow backend) would trace ``call`` as a serving function whenever a SavedModel
        # holds this model; the exported entry points are the exporter's.
        return None

    def ensure_built(self):
        """Builds the weights (their shapes do not depend on the data) if not built yet."""
        if not self.built:
            self.build(None)
        return self
