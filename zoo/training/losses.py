"""Losses and learning-rate schedules for sequence training."""

import keras
from keras import ops


def token_losses(y_true, y_pred, label_smoothing=0.0, pad_id=0):
    """Per-token cross-entropy from logits (float32 whatever the logits' dtype) and the mask of
    real tokens (1.0, padding 0.0), both ``[B, T]``. ``MaskedCrossEntropy`` and the training
    loop's global-batch loss are built from these two."""
    y_true = ops.cast(y_true, "int32")
    logits = ops.cast(y_pred, "float32")
    nll = sparse_cross_entropy(y_true, logits, label_smoothing)
    return nll, ops.cast(ops.not_equal(y_true, pad_id), nll.dtype)


def sparse_cross_entropy(labels, logits, label_smoothing=0.0):
    """``-log softmax(logits)[label]`` per position (``labels [...]`` int32, ``logits [..., V]``
    float32), with label smoothing ``eps``: ``(1 - eps) nll - eps mean_v log p(v)``.

    On TensorFlow, ``softmax_cross_entropy``: the loss and its gradient from one ``Softmax`` (a
    oneDNN primitive on x86: threaded and vectorised), where TensorFlow's fused
    ``SparseSoftmaxCrossEntropyWithLogits`` runs slower Eigen passes, and label smoothing took a
    ``logsumexp`` more (and its gradient, another softmax): forward and backward at ``[534, 8000]`` (a
    base-size training step's real tokens) 15.2 -> 6.4 ms, at d2l's ``[450, 201]`` 616 -> 368 us
    (docs/performance.md, 2026-11-25, late night). Other backends: ``keras.ops``' fused op. (Before the
    fused op, ``log_softmax`` + a gather scattered its gradient into a dense ``[B, T, V]``.)"""
    if keras.backend.backend() != "tensorflow":
        nll = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        if label_smoothing > 0:  # mean_v log p(v) = mean_v z_v - logsumexp(z)
            mean_logp = ops.mean(logits, axis=-1) - ops.logsumexp(logits, axis=-1)
            nll = (1.0 - label_smoothing) * nll - label_smoothing * mean_logp
        return nll
    import tensorflow as tf

    shape = tf.shape(labels)
    flat = softmax_cross_entropy(tf.reshape(logits, [-1, tf.shape(logits)[-1]]), tf.reshape(labels, [-1]),
                                 label_smoothing)
    return tf.reshape(flat, shape)


def softmax_cross_entropy(logits, labels, label_smoothing=0.0):
    """``-log softmax(logits)[labels]`` of rows ``logits [N, V]``, ``labels [N]`` (TensorFlow), with
    label smoothing ``eps``: ``logsumexp - (1 - eps) logit - eps mean(logits)``; its gradient is
    ``(softmax - (1 - eps) onehot - eps / V) * upstream``. The log-normaliser comes from the softmax
    itself: the largest probability is ``exp(max - logsumexp) = 1 / sum(exp(logits - max))``, at
    least ``1 / V``, so ``logsumexp = max - log(max probability)`` with no second pass of ``exp`` and
    no underflow (a label's own probability can underflow to 0; its loss is ``logsumexp - logit``)."""
    import tensorflow as tf

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


def real_token_losses(y_true, features, output_logits, label_smoothing=0.0, pad_id=0):
    """``token_losses`` of the real target tokens only: the rows of ``features [B, T, F]`` where
    ``y_true [B, T]`` is not padding are gathered (``[N, F]``), projected with ``output_logits``
    (``[N, F] -> [N, V]``, position by position) and scored. Returns ``(nll [N], mask [N])``, the
    mask all ones: the same sum and token count as ``token_losses`` on the logits of every
    position, without projecting or scoring the padding (``[B T, F] x [F, V]`` becomes
    ``[N, F] x [F, V]``; the gradient of the gathered rows scatters back into ``[B, T, F]``)."""
    y_true = ops.cast(y_true, "int32")
    real = ops.reshape(ops.not_equal(y_true, pad_id), (-1,))
    index = ops.nonzero(real)[0]  # [N]
    rows = ops.take(ops.reshape(features, (-1, ops.shape(features)[-1])), index, axis=0)
    labels = ops.take(ops.reshape(y_true, (-1,)), index, axis=0)
    return token_losses(labels, output_logits(rows), label_smoothing, pad_id)


@keras.saving.register_keras_serializable(package="zoo")
class MaskedCrossEntropy(keras.losses.Loss):
    """Token cross-entropy from logits, ignoring padding (id 0), with optional label smoothing.

    ``loss = (1 - eps) * (-log p(y)) + eps * mean_v(-log p(v))`` averaged over real target
    tokens (Szegedy et al. 2016; used by Vaswani et al. 2017 with eps = 0.1).
    """

    def __init__(self, label_smoothing=0.0, pad_id=0, name="masked_cross_entropy", reduction="sum", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1). Received: label_smoothing={label_smoothing}")
        self.label_smoothing = float(label_smoothing)
        self.pad_id = int(pad_id)

    def call(self, y_true, y_pred):
        nll, mask = token_losses(y_true, y_pred, self.label_smoothing, self.pad_id)
        # With reduction="sum" this is the mean over the batch's real tokens.
        return nll * mask / ops.maximum(ops.sum(mask), 1.0)

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing, "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="zoo")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to ``learning_rate`` over ``warmup_steps``, then constant or ``lr * sqrt(w / step)``."""

    def __init__(self, learning_rate, warmup_steps=0, decay="none"):
        if decay not in ("none", "inverse_sqrt"):
            raise ValueError(f"optimizer.decay={decay!r} is not valid. Available: none, inverse_sqrt")
        self.learning_rate = float(learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.decay = decay

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = float(max(self.warmup_steps, 1))
        lr = self.learning_rate * ops.minimum(1.0, step / warmup)
        if self.decay == "inverse_sqrt":
            lr = lr * ops.minimum(1.0, ops.sqrt(warmup / step))
        return lr

    def get_config(self):
        return {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps, "decay": self.decay}
