"""Input attention, location-encoded memory and key-value memory against hand-computed numbers."""

import math

import keras
import numpy as np
import pytest
from keras import ops

import zoo.attention

from attention_helpers import fixed_seed, gradients, to_numpy  # noqa: F401 (autouse fixture)

# -- input attention (Wang et al. 2016) ----------------------------------------------------------

Z = np.array([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]], "float32")  # z_i, three words
WORDS = np.eye(3, dtype="float32")[None]  # w_i, one-hot: e_j . w_i picks entry i of e_j
E1 = np.array([[math.log(2.0), 0.0, 0.0]], "float32")  # alpha^1 = [2, 1, 1] / 4
E2 = np.array([[0.0, 0.0, math.log(3.0)]], "float32")  # alpha^2 = [1, 1, 3] / 5
A1, A2 = np.array([0.5, 0.25, 0.25]), np.array([0.2, 0.2, 0.6])


@pytest.mark.parametrize("combination, expected", [
    ("average", Z[0] * ((A1 + A2) / 2)[:, None]),
    ("concatenation", np.concatenate([Z[0] * A1[:, None], Z[0] * A2[:, None]], axis=-1)),
    ("distance", Z[0] * ((A1 - A2) / 2)[:, None]),
])
def test_input_attention_by_hand(combination, expected):
    layer = zoo.attention.create("input_attention", combination=combination)
    r, alpha = layer(Z, E1, E2, words=WORDS, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(alpha)[0], [A1, A2], atol=1e-6)
    np.testing.assert_allclose(to_numpy(r)[0], expected, atol=1e-6)
    assert tuple(layer.compute_output_shape(Z.shape)) == to_numpy(r).shape
    assert layer.weights == []


def test_input_attention_scores_the_sentence_itself_by_default():
    layer = zoo.attention.create("input_attention")
    _, alpha = layer(WORDS, E1, E2, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(alpha)[0], [A1, A2], atol=1e-6)


def test_input_attention_masks():
    layer = zoo.attention.create("input_attention", combination="concatenation")
    mask = np.array([[True, True, False]])
    r, alpha = layer(Z, E1, E2, words=WORDS, sentence_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(alpha)[0], [[2 / 3, 1 / 3, 0.0], [0.5, 0.5, 0.0]], atol=1e-6)
    assert np.all(to_numpy(alpha)[0, :, 2] == 0) and np.all(to_numpy(r)[0, 2] == 0)
    r, alpha = layer(Z, E1, E2, sentence_mask=np.zeros((1, 3), bool), words=WORDS, return_attention_scores=True)
    assert np.all(to_numpy(r) == 0) and np.all(to_numpy(alpha) == 0)


def test_input_attention_keras_mask_in_and_out():
    ids = np.array([[4, 2, 0], [1, 3, 5]])
    embedding = keras.layers.Embedding(6, 4, mask_zero=True)
    layer = zoo.attention.create("input_attention")
    sentence = embedding(ids)
    e1, e2 = to_numpy(sentence)[:, 0], to_numpy(sentence)[:, 1]
    r, alpha = layer(sentence, e1, e2, return_attention_scores=True)
    expected_r, expected_alpha = layer(to_numpy(sentence), e1, e2, sentence_mask=ids > 0,
                                       return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(alpha), to_numpy(expected_alpha), atol=1e-6)
    np.testing.assert_allclose(to_numpy(r), to_numpy(expected_r), atol=1e-6)
    assert np.all(to_numpy(alpha)[0, :, 2] == 0)
    out = layer(sentence, e1, e2)
    np.testing.assert_array_equal(to_numpy(out._keras_mask), ids > 0)  # the output keeps the sentence's mask


def test_input_attention_gradients_reach_words_and_entities():
    rng = np.random.default_rng(0)
    z, e1, e2 = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 4)), rng.normal(size=(2, 4))
    layer = zoo.attention.create("input_attention", combination="distance")
    layer(z, e1, e2)
    grads, _ = gradients(layer, lambda call, z, e1, e2: ops.sum(ops.square(call(z, e1, e2))), [z, e1, e2])
    for g in grads:
        assert g is not None and np.all(np.isfinite(g)) and np.any(g != 0)


# -- location-encoded memory (Tang et al. 2016) --------------------------------------------------

E = np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]], "float32")  # two words, d = 3: l = 1, 2; n = 3


def test_location_model_1_by_hand():
    # v_i^k = (1 - l_i/n) - (k/d)(1 - 2 l_i/n), n = 3, d = 3
    v = np.array([[5 / 9, 4 / 9, 3 / 9], [4 / 9, 5 / 9, 6 / 9]])
    m, weights = zoo.attention.create("location_memory", location_model=1)(E, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(weights)[0], v, atol=1e-6)
    np.testing.assert_allclose(to_numpy(m)[0], E[0] * v, atol=1e-6)


def test_location_model_2_by_hand_with_masks_and_aspect_distances():
    layer = zoo.attention.create("location_memory", location_model=2)
    m, weights = layer(E, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(weights)[0, :, 0], [2 / 3, 1 / 3], atol=1e-6)
    np.testing.assert_allclose(to_numpy(m)[0], E[0] * np.array([[2 / 3], [1 / 3]]), atol=1e-6)
    # Padding does not count in n and gets 0: [w1, w2, pad] is the same sentence.
    padded = np.concatenate([E, np.full((1, 1, 3), 9.0, "float32")], axis=1)
    m_padded = to_numpy(layer(padded, mask=np.array([[True, True, False]])))
    np.testing.assert_allclose(m_padded[0, :2], to_numpy(m)[0], atol=1e-6)
    assert np.all(m_padded[0, 2] == 0)
    # Tang's case: "great food but service" for the aspect "food" -> memory [great, but, service],
    # distances [1, 1, 2], n = 4 -> v = [0.75, 0.75, 0.5].
    memory = np.ones((1, 3, 2), "float32")
    _, weights = layer(memory, locations=np.array([[1, 1, 2]]), return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(weights)[0, :, 0], [0.75, 0.75, 0.5], atol=1e-6)


@pytest.mark.parametrize("location_model", [3, 4])
def test_learned_location_models_by_hand(location_model):
    layer = zoo.attention.create("location_memory", location_model=location_model, max_length=2)
    words = np.concatenate([E, E[:, :1]], axis=1)  # three words: l = 1, 2, 3 (3 > max_length: row 2)
    m0 = to_numpy(layer(words))
    np.testing.assert_allclose(m0, words if location_model == 3 else 0.5 * words, atol=1e-6)  # zero init
    table = np.array([[9.0, 9.0, 9.0], [0.5, -1.0, 2.0], [1.0, 0.0, -3.0]], "float32")  # rows l = 0, 1, 2
    layer.location_embeddings.assign(table)
    v = table[[1, 2, 2]]
    m, weights = layer(words, return_attention_scores=True)
    if location_model == 3:
        expected_v, expected_m = v, words[0] + v
    else:
        expected_v = 1 / (1 + np.exp(-v))
        expected_m = words[0] * expected_v
    np.testing.assert_allclose(to_numpy(weights)[0], expected_v, atol=1e-6)
    np.testing.assert_allclose(to_numpy(m)[0], expected_m, atol=1e-6)
    # masked steps are 0 (model 3 adds nothing there either); the table gets gradients
    m = to_numpy(layer(words, mask=np.array([[True, False, True]])))
    assert np.all(m[0, 1] == 0)
    _, (grad,) = gradients(layer, lambda call: ops.sum(call(ops.convert_to_tensor(words))))
    assert np.all(np.isfinite(grad)) and np.any(grad[1:] != 0) and np.all(grad[0] == 0)


def test_location_memory_on_stories_and_keras_masks():
    # [B, S, T, d]: sentences of a story, each encoded on its own; sum over words = sentence encoding
    ids = np.array([[[3, 1, 2, 0], [5, 5, 0, 0]]])
    embedding = keras.layers.Embedding(6, 4, mask_zero=True)
    layer = zoo.attention.create("location_memory", location_model=1)
    m = layer(embedding(ids))
    expected = layer(to_numpy(embedding(ids)), mask=ids > 0)
    np.testing.assert_allclose(to_numpy(m), to_numpy(expected), atol=1e-6)
    np.testing.assert_array_equal(to_numpy(m._keras_mask), ids > 0)
    # the second sentence has two words: n = 3, as if it stood alone
    alone = layer(to_numpy(embedding(ids[:, 1:, :2])))
    np.testing.assert_allclose(to_numpy(m)[:, 1:, :2], to_numpy(alone), atol=1e-6)
    assert tuple(ops.sum(m, axis=-2).shape) == (1, 2, 4)


@pytest.mark.parametrize("location_model", [3, 4])
def test_learned_location_models_round_trip(location_model):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    layer = zoo.attention.create("location_memory", location_model=location_model, max_length=4)
    layer(x)
    layer.location_embeddings.assign(rng.normal(size=(5, 3)).astype("float32"))
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    clone(x)
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(to_numpy(clone(x)), to_numpy(layer(x)))


# -- key-value memory (Miller et al. 2016) -------------------------------------------------------

def kv_numpy(q, keys, values, kernels, mask=None):
    """Miller et al. 2016, sec. 3.1, one hop per kernel: p = softmax(q.k), o = p V, q = (q + o) R."""
    ps = []
    for kernel in kernels:
        scores = np.einsum("bd,bnd->bn", q, keys)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        e = np.exp(scores - scores.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
        q = (q + np.einsum("bn,bnd->bd", p, values)) @ kernel
        ps.append(p)
    return q, np.stack(ps, 1)


def test_key_value_memory_one_hop_by_hand():
    layer = zoo.attention.create("key_value_memory", hops=1)
    q = np.array([[1.0, 0.0]], "float32")
    keys = np.array([[[math.log(3.0), 0.0], [0.0, 5.0]]], "float32")  # q . k = [ln 3, 0]: p = [3/4, 1/4]
    values = np.array([[[4.0, 0.0], [0.0, 8.0]]], "float32")  # o = [3, 2]
    layer(q, keys, values)
    layer.query_updates[0].kernel.assign(np.array([[1.0, 2.0], [0.0, 1.0]], "float32"))  # R_1
    out, p = layer(q, keys, values, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(p), [[[0.75, 0.25]]], atol=1e-6)
    np.testing.assert_allclose(to_numpy(out), [[4.0, 10.0]], atol=1e-5)  # (q + o) R_1 = [4, 2] R_1


def test_key_value_memory_hops_and_masks_match_numpy():
    rng = np.random.default_rng(2)
    q, keys, values = (rng.normal(size=s).astype("float32") for s in [(2, 4), (2, 5, 4), (2, 5, 4)])
    mask = np.array([[True] * 5, [True, False, True, False, False]])
    layer = zoo.attention.create("key_value_memory", hops=3)
    out, p = layer(q, keys, values, keys_mask=mask, return_attention_scores=True)
    kernels = [to_numpy(d.kernel) for d in layer.query_updates]
    assert len({k.tobytes() for k in kernels}) == 3  # one R_j per hop
    expected_out, expected_p = kv_numpy(q, keys, values, kernels, mask)
    np.testing.assert_allclose(to_numpy(p), expected_p, atol=1e-5)
    np.testing.assert_allclose(to_numpy(out), expected_out, atol=1e-4)
    assert np.all(to_numpy(p)[1, :, [1, 3, 4]] == 0)
    # values_mask counts the same; a Keras mask on the keys is used
    p_values = to_numpy(layer(q, keys, values, values_mask=mask, return_attention_scores=True)[1])
    np.testing.assert_allclose(p_values, to_numpy(p), atol=1e-6)
    masked_keys = keras.layers.Masking(0.0)(np.where(mask[..., None], keys, 0.0))
    p_keras = to_numpy(layer(q, masked_keys, values, return_attention_scores=True)[1])
    np.testing.assert_allclose(p_keras, to_numpy(p), atol=1e-6)


def test_key_value_memory_with_nothing_to_read_passes_the_query_through_r():
    rng = np.random.default_rng(3)
    q, memory = rng.normal(size=(1, 4)).astype("float32"), rng.normal(size=(1, 3, 4)).astype("float32")
    layer = zoo.attention.create("key_value_memory", hops=2)
    out, p = layer(q, memory, memory, keys_mask=np.zeros((1, 3), bool), return_attention_scores=True)
    r1, r2 = (to_numpy(d.kernel) for d in layer.query_updates)
    np.testing.assert_allclose(to_numpy(out), q @ r1 @ r2, atol=1e-5)
    assert np.all(to_numpy(p) == 0) and np.all(np.isfinite(to_numpy(out)))


def test_key_value_memory_gradients_and_sizes():
    rng = np.random.default_rng(4)
    q, keys, values = (rng.normal(size=s).astype("float32") for s in [(2, 4), (2, 5, 4), (2, 5, 4)])
    layer = zoo.attention.create("key_value_memory", hops=2)
    layer(q, keys, values)
    input_grads, variable_grads = gradients(
        layer, lambda call, q, k, v: ops.sum(ops.square(call(q, k, v))), [q, keys, values])
    for g in input_grads + variable_grads:
        assert g is not None and np.all(np.isfinite(g)) and np.any(g != 0)
    with pytest.raises(ValueError, match="same feature size. Received: query_shape=\\(2, 4\\), keys_shape=\\(2, 5, 3\\)"):
        zoo.attention.create("key_value_memory")(q, keys[..., :3], values)


@pytest.mark.parametrize("name, kwargs, message", [
    ("input_attention", {"combination": "variation"},
     "argument `combination`, expected one of 'average', 'concatenation', 'distance'"),
    ("location_memory", {"location_model": 5}, "argument `location_model`, expected one of 1, 2, 3, 4. Received: location_model=5"),
    ("location_memory", {"location_model": True}, "Received: location_model=True"),
    ("location_memory", {"max_length": 0}, "Received: max_length=0"),
    ("key_value_memory", {"hops": 0}, "argument `hops`, expected a positive integer. Received: hops=0"),
])
def test_invalid_arguments_are_rejected_eagerly(name, kwargs, message):
    with pytest.raises(ValueError, match="Received an invalid value for argument") as info:
        zoo.attention.create(name, **kwargs)
    assert message in str(info.value)
