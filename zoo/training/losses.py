"""Losses for sequence training."""

import keras
from keras import ops

from zoo import kernels


@kernels.replaceable
def token_losses(y_true, y_pred, label_smoothing=0.0, pad_id=0):
    """Per-token cross-entropy from logits, and the mask of real tokens: ``(nll, mask)``, both ``[B, T]``.

    With ``p = softmax(z)`` over the vocabulary (``z = y_pred [B, T, V]``, computed in float32
    whatever its dtype) and the label ``y`` (``y_true [B, T]``)::

        nll  = -log p(y) = -log_softmax(z)[y]
        with label smoothing eps (Szegedy et al. 2016, sec. 7), the cross-entropy against
        q = (1 - eps) onehot(y) + eps / V:
        nll  = (1 - eps) (-log p(y)) + eps mean_v(-log p(v))
        mask = 1 where y is a real token, 0 at padding (``pad_id``)

    ``MaskedCrossEntropy`` and the training loop's global-batch loss, ``sum(nll mask) / sum(mask)``,
    are built from these two. The gradient of ``nll`` with respect to ``z`` is ``p - q``.

    References:
        Szegedy et al. Rethinking the Inception Architecture for Computer Vision. CVPR 2016,
        sec. 7. https://arxiv.org/abs/1512.00567
    """
    labels = ops.cast(y_true, "int32")
    log_p = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)
    nll = -ops.take_along_axis(log_p, ops.expand_dims(labels, -1), axis=-1)[..., 0]
    if label_smoothing > 0:
        nll = (1.0 - label_smoothing) * nll - label_smoothing * ops.mean(log_p, axis=-1)
    return nll, ops.cast(ops.not_equal(labels, pad_id), nll.dtype)


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
