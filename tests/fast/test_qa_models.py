"""Every story-QA model reads the same with the fast path as with the reference: answer logits and
the gradients of every weight. Today only ``memory_network`` runs replacements (the alignment
attention's ``attend`` and its moves); the other readers run the same code in both modes, and this
keeps them equal when one of their layers gets a replacement."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

from models.test_readers import QUESTION, STORY, TINY  # noqa: E402  (the tiny sizes and stories of tests/models/test_readers.py)

import zoo.models  # noqa: E402
from zoo import kernels  # noqa: E402


def test_every_qa_model_has_a_case():
    assert sorted(TINY) == sorted(zoo.models.names(task="qa"))


def logits_and_gradients(model):
    with tf.GradientTape() as tape:
        logits = model((STORY, QUESTION))
        loss = tf.reduce_sum(tf.square(logits)) + sum(model.losses)
    gradients = tape.gradient(loss, model.trainable_variables)
    return np.asarray(logits), [np.asarray(tf.convert_to_tensor(g)) for g in gradients if g is not None]


@pytest.mark.parametrize("name", sorted(TINY))
def test_fast_equals_reference_in_logits_and_gradients(name):
    keras.utils.set_random_seed(0)
    model = zoo.models.create(name, vocab_size=17, memory_size=6, **TINY[name])
    model((STORY, QUESTION))
    results = {}
    for mode in ("reference", "fast"):
        with kernels.using(mode):
            results[mode] = logits_and_gradients(model)
    (ref_logits, ref_grads), (fast_logits, fast_grads) = results["reference"], results["fast"]
    np.testing.assert_allclose(fast_logits, ref_logits, rtol=1e-5, atol=1e-5)
    assert len(fast_grads) == len(ref_grads) > 0
    for fast, reference in zip(fast_grads, ref_grads):
        np.testing.assert_allclose(fast, reference, rtol=1e-4, atol=1e-5)
