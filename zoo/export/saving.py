"""Writing a SavedModel for serving: the translator's and the reader's ``save``."""

import os

import tensorflow as tf

# The SavedModel serves inference. Its functions are saved without their custom gradients: the RNN
# layers' time loop has its gradient written out (``zoo/models/rnn.py``), and that gradient reads
# tensors of the forward loop, which a SavedModel cannot hold. A loaded model runs forward only (as
# serving does): differentiating one raises TensorFlow's LookupError (no gradient for the loop).
INFERENCE_ONLY = tf.saved_model.SaveOptions(experimental_custom_gradients=False)


def save(module, directory, signatures, config_yaml=None):
    """Writes ``module`` with ``signatures`` to ``directory``; ``config_yaml`` (the run's resolved
    config) goes to ``assets.extra/config.yaml``. Returns ``directory``."""
    tf.saved_model.save(module, directory, signatures=signatures, options=INFERENCE_ONLY)
    if config_yaml is not None:
        extra = os.path.join(directory, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        with open(os.path.join(extra, "config.yaml"), "w", encoding="utf-8") as f:
            f.write(config_yaml)
    return directory
