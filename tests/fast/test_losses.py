"""``zoo.fast.losses``: the loss from one softmax (``softmax_cross_entropy``) equals the reference
``token_losses`` (``log_softmax`` and a gather, differentiated by the tape) in losses, masks and
gradients, with label smoothing, padding and a different weight per token, in eager, graph and XLA;
and a label whose probability underflows keeps a finite, exact loss."""

import numpy as np
import pytest
import tensorflow as tf

from zoo import kernels
from zoo.fast import losses as fast_losses
from zoo.training import losses


def test_the_one_softmax_loss_is_registered_with_a_custom_gradient():
    with kernels.using("fast"):
        assert kernels.replacement(losses.token_losses.key) is fast_losses.token_losses
        with kernels.exporting():
            assert kernels.replacement(losses.token_losses.key) is None


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("compiled", ["eager", "graph", "xla"])
def test_fast_equals_reference_in_losses_and_gradients(compiled, smoothing):
    rng = np.random.default_rng(3)
    logits = tf.constant(rng.normal(size=(3, 5, 31)).astype("float32") * 4)
    labels = rng.integers(1, 31, size=(3, 5)).astype("int32")
    labels[0, 3:] = 0  # padding
    labels = tf.constant(labels)
    weights = tf.constant(rng.uniform(0, 2, size=(3, 5)).astype("float32"))

    def step(mode, z):
        with tf.GradientTape() as tape:
            tape.watch(z)
            with kernels.using(mode):
                nll, mask = losses.token_losses(labels, z, smoothing)
            total = tf.reduce_sum(nll * mask * weights)
        return nll, mask, tape.gradient(total, z)

    if compiled != "eager":
        step = tf.function(step, jit_compile=compiled == "xla", autograph=False)
    want, got = step("reference", logits), step("fast", logits)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    np.testing.assert_allclose(got[2].numpy(), want[2].numpy(), rtol=1e-5, atol=1e-6)


def test_fast_real_token_losses_equal_reference():
    """The training step's path: only the real tokens' rows projected and scored."""
    rng = np.random.default_rng(4)
    features = tf.Variable(rng.normal(size=(2, 4, 5)).astype("float32"))
    kernel = tf.Variable(rng.normal(size=(5, 7)).astype("float32"))
    labels = tf.constant([[4, 2, 0, 0], [1, 6, 3, 0]], tf.int32)
    results = []
    for mode in ("reference", "fast"):
        with tf.GradientTape() as tape, kernels.using(mode):
            nll, mask = losses.real_token_losses(labels, features, lambda x: tf.matmul(x, kernel), 0.1)
            loss = tf.reduce_sum(nll * mask) / tf.reduce_sum(mask)
        results.append([loss, *tape.gradient(loss, [features, kernel])])
    for want, got in zip(*results):
        np.testing.assert_allclose(tf.convert_to_tensor(got).numpy(), tf.convert_to_tensor(want).numpy(),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_softmax_cross_entropy_equals_tensorflows_fused_op_with_weighted_upstream(smoothing):
    """``softmax_cross_entropy`` gives TensorFlow's fused op's losses and gradient ``(softmax - onehot)
    * upstream`` (label smoothing: the textbook formula, differentiated by TensorFlow), with a
    different weight per row (masks, token counts), under XLA."""
    rng = np.random.default_rng(3)
    logits = tf.constant(rng.normal(size=(37, 301)).astype("float32") * 4)
    labels = tf.constant(rng.integers(0, 301, size=37).astype("int32"))
    weights = tf.constant(rng.uniform(0, 2, size=37).astype("float32"))

    def run(fn):
        @tf.function(jit_compile=True, autograph=False)
        def step(z):
            with tf.GradientTape() as tape:
                tape.watch(z)
                nll = fn(z, labels)
                total = tf.reduce_sum(nll * weights)
            return nll, tape.gradient(total, z)
        return step(logits)

    def textbook(z, y):
        nll = tf.nn.sparse_softmax_cross_entropy_with_logits(y, z)
        mean_logp = tf.reduce_mean(z, -1) - tf.reduce_logsumexp(z, -1)
        return (1.0 - smoothing) * nll - smoothing * mean_logp

    nll, grad = run(lambda z, y: fast_losses.softmax_cross_entropy(z, y, smoothing))
    want_nll, want_grad = run(textbook)
    np.testing.assert_allclose(nll.numpy(), want_nll.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad.numpy(), want_grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_label_whose_probability_underflows_is_finite_and_exact():
    """A label ~200 below the largest logit has probability exp(-200) = 0 in float32; its loss is
    still logsumexp - logit (about 200), not inf: the normaliser comes from the largest probability."""
    logits = tf.constant([[200.0, 0.0, 1.0, 199.0], [0.0, 0.0, 0.0, 0.0]])
    labels = tf.constant([1, 3])
    got = fast_losses.softmax_cross_entropy(logits, labels).numpy()
    with kernels.using("reference"):
        want = losses.token_losses(labels, logits)[0].numpy()
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[0] == pytest.approx(200.0 + np.log1p(np.exp(-1.0)), rel=1e-6)
