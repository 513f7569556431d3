"""``zoo.training.losses``' reference path: ``token_losses`` gives the textbook numbers (label smoothing
included) and gradient, and ``real_token_losses`` the loss of every position. (The one-softmax fast
path: ``tests/fast/test_losses.py``.)"""

import numpy as np
import pytest

from zoo import kernels
from zoo.training.losses import token_losses


@pytest.fixture(autouse=True)
def _reference():
    with kernels.using("reference"):
        yield


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


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_token_losses_gradient_is_softmax_minus_the_smoothed_target(smoothing):
    import tensorflow as tf

    logits = tf.constant(np.random.default_rng(1).normal(size=(2, 3, 5)), tf.float32)
    labels = tf.constant([[1, 2, 0], [4, 3, 3]])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        total = tf.reduce_sum(token_losses(labels, logits, smoothing)[0])
    expected = tf.nn.softmax(logits) - (1 - smoothing) * tf.one_hot(labels, 5) - smoothing / 5
    np.testing.assert_allclose(tape.gradient(total, logits).numpy(), expected.numpy(), atol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_real_token_losses_give_the_masked_loss_and_gradient_of_every_position(smoothing):
    """Projecting and scoring only the real tokens' feature rows (the training step) gives the loss
    of today's formula, sum(nll * mask) / sum(mask) over every position's logits, and the same
    gradients for the features and the projection."""
    import tensorflow as tf

    from zoo.training.losses import real_token_losses

    rng = np.random.default_rng(2)
    features = tf.Variable(rng.normal(size=(3, 4, 5)).astype("float32"))
    kernel = tf.Variable(rng.normal(size=(5, 7)).astype("float32"))
    labels = tf.constant([[4, 2, 0, 0], [1, 6, 3, 0], [0, 0, 0, 0]], tf.int32)  # a row of padding only

    def project(x):
        return tf.matmul(x, kernel) if len(x.shape) == 2 else tf.einsum("btf,fv->btv", x, kernel)

    results = []
    for gathered in (False, True):
        with tf.GradientTape() as tape:
            if gathered:
                nll, mask = real_token_losses(labels, features, project, smoothing)
            else:
                nll, mask = token_losses(labels, project(features), smoothing)
            loss = tf.reduce_sum(nll * mask / tf.maximum(tf.reduce_sum(mask), 1.0))
        grads = tape.gradient(loss, [features, kernel])
        results.append((float(loss), float(tf.reduce_sum(mask)), [tf.convert_to_tensor(g).numpy() for g in grads]))
    (full, full_tokens, full_grads), (real, real_tokens, real_grads) = results
    assert real_tokens == full_tokens == 5.0
    assert real == pytest.approx(full, rel=1e-6)
    for got, want in zip(real_grads, full_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert np.all(real_grads[0][labels.numpy() == 0] == 0.0)  # padding rows get no gradient


def test_a_label_whose_probability_underflows_has_a_finite_exact_loss():
    """A label ~200 below the largest logit has probability exp(-200) = 0 in float32; log_softmax
    gives its loss, logsumexp - logit (about 200), not inf."""
    logits = np.array([[200.0, 0.0, 1.0, 199.0], [0.0, 0.0, 0.0, 0.0]], "float32")
    labels = np.array([1, 3])
    nll = np.asarray(token_losses(labels, logits)[0])
    np.testing.assert_allclose(nll, _reference(labels, logits.astype("float64"), 0.0), rtol=1e-6)
    assert nll[0] == pytest.approx(200.0 + np.log1p(np.exp(-1.0)), rel=1e-6)


def test_real_token_losses_of_a_batch_of_padding_only_are_empty():
    import tensorflow as tf

    from zoo.training.losses import real_token_losses

    nll, mask = real_token_losses(tf.zeros((2, 3), tf.int32), tf.ones((2, 3, 4)), lambda x: tf.matmul(x, tf.ones((4, 5))))
    assert tuple(nll.shape) == tuple(mask.shape) == (0,)
