"""token_losses: the fused sparse cross-entropy gives the textbook numbers, label smoothing included."""

import numpy as np
import pytest

from zoo.training.losses import token_losses


def _reference(labels, logits, smoothing):
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, labels[..., None], -1)[..., 0]
    return (1 - smoothing) * nll - smoothing * logp.mean(-1)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_token_losses_match_log_softmax(smoothing):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 4, 7)).astype("float32") * 3
    labels = rng.integers(0, 7, size=(3, 4)).astype("int32")
    labels[0, 2:] = 0  # padding
    nll, mask = token_losses(labels, logits, smoothing)
    np.testing.assert_allclose(np.asarray(nll), _reference(labels, logits.astype("float64"), smoothing), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(np.asarray(mask), (labels != 0).astype("float32"))


def test_token_losses_gradient_is_softmax_minus_onehot():
    import tensorflow as tf

    logits = tf.constant(np.random.default_rng(1).normal(size=(2, 3, 5)), tf.float32)
    labels = tf.constant([[1, 2, 0], [4, 3, 3]])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        total = tf.reduce_sum(token_losses(labels, logits)[0])
    expected = tf.nn.softmax(logits) - tf.one_hot(labels, 5)
    np.testing.assert_allclose(tape.gradient(total, logits).numpy(), expected.numpy(), atol=1e-6)
