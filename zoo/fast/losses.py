"""The fast path of ``zoo.training.losses.token_losses``: the loss and its gradient from one softmax.

The reference's ``log_softmax`` and gather are differentiated op by op by the tape (the gather's
gradient scattered into a dense ``[N, V]``, then ``log_softmax``'s); TensorFlow's own fused
``SparseSoftmaxCrossEntropyWithLogits`` runs slower Eigen passes than the ``Softmax`` (a oneDNN
primitive on x86: threaded and vectorised), and label smoothing took a ``logsumexp`` more (and its
gradient, another softmax). Here ``softmax_cross_entropy`` takes the loss and its gradient,
``(softmax - q) * upstream``, from one ``Softmax``. Forward and backward (2-core Zen 4,
``docs/performance.md``, 2026-11-25, late night): ``[534, 8000]`` (a base-size training step's real
tokens) 15.2 -> 6.4 ms, d2l's ``[450, 201]`` 616 -> 368 us.

Equal to the reference in values and gradients: ``tests/fast/test_losses.py``. Other backends run the
reference.
"""

import keras
import tensorflow as tf
from keras import ops

from zoo import kernels
from zoo.training import losses


@kernels.replaces("zoo.training.losses.token_losses", own_gradient=True)
def token_losses(y_true, y_pred, label_smoothing=0.0, pad_id=0):
    if keras.backend.backend() != "tensorflow":
        return losses.token_losses.reference(y_true, y_pred, label_smoothing, pad_id)
    labels = tf.cast(y_true, tf.int32)
    logits = tf.cast(y_pred, tf.float32)
    flat = softmax_cross_entropy(tf.reshape(logits, [-1, tf.shape(logits)[-1]]), tf.reshape(labels, [-1]),
                                 label_smoothing)
    nll = tf.reshape(flat, tf.shape(labels))
    return nll, ops.cast(ops.not_equal(labels, pad_id), nll.dtype)


def softmax_cross_entropy(logits, labels, label_smoothing=0.0):
    """``-log softmax(logits)[labels]`` of rows ``logits [N, V]``, ``labels [N]`` (TensorFlow), with
    label smoothing ``eps``: ``logsumexp - (1 - eps) logit - eps mean(logits)``; its gradient is
    ``(softmax - (1 - eps) onehot - eps / V) * upstream``. The log-normaliser comes from the softmax
    itself: the largest probability is ``exp(max - logsumexp) = 1 / sum(exp(logits - max))``, at
    least ``1 / V``, so ``logsumexp = max - log(max probability)`` with no second pass of ``exp`` and
    no underflow (a label's own probability can underflow to 0; its loss is ``logsumexp - logit``)."""
    eps = float(label_smoothing)

    @tf.custom_gradient
    def xent(z):
        p = tf.nn.softmax(z)
        picked = tf.gather(z, labels, batch_dims=1)
        lse = tf.reduce_max(z, -1) - tf.math.log(tf.reduce_max(p, -1))
        nll = lse - picked if eps == 0 else lse - (1.0 - eps) * picked - eps * tf.reduce_mean(z, -1)

        def grad(upstream):
            spread = eps / tf.cast(tf.shape(z)[-1], p.dtype)  # 0 without smoothing
            target = tf.one_hot(labels, tf.shape(z)[-1], on_value=1.0 - eps + spread, off_value=spread)
            return (p - target) * upstream[:, None]

        return nll, grad

    return xent(logits)
