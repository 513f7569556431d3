"""Every story-QA model reads the same with the fast path as with the reference: answer logits and
the gradients of every weight. Today only ``memory_network`` runs replacements (the alignment
attention's ``attend`` and its moves); the other readers run the same code in both modes, and this
keeps them equal when one of their layers gets a replacement."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import zoo.models  # noqa: E402
from zoo import kernels  # noqa: E402

TINY = {
    "memory_network": {"embed_dim": 8, "hops": 2},
    "aoa_reader": {"embed_dim": 8, "hidden_size": 6},
    "coattention_reader": {"embed_dim": 8, "hidden_size": 6, "units": 5},
    "self_attentive_reader": {"embed_dim": 8, "hidden_size": 6, "units": 5, "hops": 3, "mlp_units": 7},
    "relation_reader": {"embed_dim": 8, "hidden_size": 6, "mlp_units": 7},
}
STORY = np.array([[[5, 6, 7, 8, 0], [9, 10, 11, 0, 0], [5, 12, 7, 13, 0], [14, 6, 7, 8, 15]],
                  [[9, 6, 7, 16, 0], [5, 4, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]], dtype="int32")
QUESTION = np.array([[4, 5, 6], [4, 9, 0]], dtype="int32")


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
