"""Every story-QA (``task: qa``) model at tiny sizes: shapes, masks, no NaN, learning, .keras round trip."""

import functools

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import zoo.models  # noqa: E402
from zoo.config import compose_train, model_kwargs  # noqa: E402

QA = zoo.models.names(task="qa")
# One line per registered qa model: the smallest sizes that exercise it.
TINY = {
    "memory_network": {"embed_dim": 8, "hops": 2},
    "aoa_reader": {"embed_dim": 8, "hidden_size": 6},
    "coattention_reader": {"embed_dim": 8, "hidden_size": 6, "units": 5},
    "self_attentive_reader": {"embed_dim": 8, "hidden_size": 6, "units": 5, "hops": 3, "mlp_units": 7},
    "relation_reader": {"embed_dim": 8, "hidden_size": 6, "mlp_units": 7},
}
VOCAB, MEMORY = 17, 6
# Two stories of [S=4, W=5] word ids (0 = padding): the second has 2 sentences, one of 2 words.
STORY = np.array([[[5, 6, 7, 8, 0], [9, 10, 11, 0, 0], [5, 12, 7, 13, 0], [14, 6, 7, 8, 15]],
                  [[9, 6, 7, 16, 0], [5, 4, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]], dtype="int32")
QUESTION = np.array([[4, 5, 6], [4, 9, 0]], dtype="int32")
ANSWER = np.array([[13], [16]], dtype="int32")


@functools.lru_cache(maxsize=None)
def qa_config(name):
    """``compose_train([model=<name>, data=story_qa])``, composed once per model for this file's read-only checks."""
    return compose_train([f"model={name}", "data=story_qa"])


def make(name, **overrides):
    keras.utils.set_random_seed(0)
    return zoo.models.create(name, vocab_size=VOCAB, memory_size=MEMORY, **{**TINY[name], **overrides})


@pytest.fixture(scope="module")
def built():
    """Each qa model at its tiny setting (``make(name)``), built once for this file's read-only checks: ``built(name)``."""
    from conftest import built_once

    return built_once(make)


def test_every_qa_model_has_a_tiny_setting_and_a_qa_config():
    assert sorted(TINY) == QA
    for name in QA:
        assert qa_config(name).model.task == "qa"


@pytest.mark.parametrize("name", QA)
def test_shapes_masks_and_finite_outputs(name, built):
    model = built(name)
    out = model.read(STORY, QUESTION)
    logits = keras.ops.convert_to_numpy(out["logits"])
    sentences = keras.ops.convert_to_numpy(out["sentence_attention"])
    assert logits.shape == (2, VOCAB) and np.all(np.isfinite(logits))
    assert sentences.shape == (2, model.hops, 4)
    assert np.all(sentences[1, :, 2:] == 0.0)  # padding sentences get no attention
    np.testing.assert_allclose(sentences.sum(-1), 1.0, atol=1e-5)
    if model.has_word_attention:
        words = keras.ops.convert_to_numpy(out["word_attention"])
        assert words.shape == (2, 4, 5) and np.all(words[STORY == 0] == 0.0)
    assert tuple(model((STORY, QUESTION)).shape) == (2, 1, VOCAB)


@pytest.mark.parametrize("name", QA)
def test_padding_does_not_change_the_answer(name, built):
    model = built(name)
    wider = np.pad(STORY, [(0, 0), (0, 2), (0, 3)])
    longer_question = np.pad(QUESTION, [(0, 0), (0, 2)])
    before = keras.ops.convert_to_numpy(model.read(STORY, QUESTION)["logits"])
    after = keras.ops.convert_to_numpy(model.read(wider, longer_question)["logits"])
    np.testing.assert_allclose(before, after, atol=1e-4)


@pytest.mark.parametrize("name", QA)
def test_training_steps_lower_the_loss(name):
    model = make(name)
    # Eagerly: two steps cost less than tracing Keras' train function (the graph step is fit.py's, tested there).
    # Each step returns the loss before its update: ``last`` is the loss after the first update.
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    first = model.train_on_batch((STORY, QUESTION), ANSWER)
    last = model.train_on_batch((STORY, QUESTION), ANSWER)
    assert np.isfinite(last) and last < first


@pytest.mark.parametrize("name", QA)
def test_keras_file_round_trip_gives_identical_outputs(name, tmp_path, built):
    model = built(name)
    before = keras.ops.convert_to_numpy(model((STORY, QUESTION)))
    model.save(tmp_path / f"{name}.keras")
    loaded = keras.models.load_model(tmp_path / f"{name}.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded((STORY, QUESTION))), before, atol=1e-6)


@pytest.mark.parametrize("encoding", ["bag_of_words", "location_1", "location_2", "location_3", "location_4"])
def test_memory_network_sentence_encodings(encoding):
    model = make("memory_network", encoding=encoding)
    logits = keras.ops.convert_to_numpy(model.read(STORY, QUESTION)["logits"])
    assert logits.shape == (2, VOCAB) and np.all(np.isfinite(logits))


def test_memory_network_key_value_read_has_one_row_per_hop():
    model = make("memory_network", key_value=True, hops=3)
    out = model.read(STORY, QUESTION)
    assert tuple(out["sentence_attention"].shape) == (2, 3, 4)
    assert len(model.memory.query_updates) == 3  # R_1 .. R_3 of Miller et al.
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out["sentence_attention"]).sum(-1), 1.0, atol=1e-5)


def test_memory_network_temporal_encoding_tells_order():
    # Bag of words without temporal encoding cannot tell the order of two sentences; with it, it can.
    swapped = STORY[:, [1, 0, 2, 3]]
    swapped[1] = STORY[1, [1, 0, 2, 3]]
    plain = make("memory_network", encoding="bag_of_words", temporal=False)
    a = keras.ops.convert_to_numpy(plain.read(STORY[:1], QUESTION[:1])["logits"])
    b = keras.ops.convert_to_numpy(plain.read(swapped[:1], QUESTION[:1])["logits"])
    np.testing.assert_allclose(a, b, atol=1e-5)
    timed = make("memory_network", encoding="bag_of_words", temporal=True)
    a = keras.ops.convert_to_numpy(timed.read(STORY[:1], QUESTION[:1])["logits"])
    b = keras.ops.convert_to_numpy(timed.read(swapped[:1], QUESTION[:1])["logits"])
    assert not np.allclose(a, b, atol=1e-5)


def test_self_attentive_reader_adds_its_penalty_to_the_losses():
    model = make("self_attentive_reader", penalty=1.0)
    model((STORY, QUESTION))
    assert len(model.losses) == 1 and float(model.losses[0]) > 0
    unpenalized = make("self_attentive_reader", penalty=0.0)
    unpenalized((STORY, QUESTION))
    assert not unpenalized.losses


def test_aoa_reader_without_generator_answers_only_story_words():
    model = make("aoa_reader", generator=False)
    p = np.exp(keras.ops.convert_to_numpy(model.read(STORY, QUESTION)["logits"]))
    outside = np.ones((2, VOCAB), bool)
    for b in range(2):
        outside[b, np.unique(STORY[b])] = False
    assert np.all(p[outside] < 1e-6)
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-4)


@pytest.mark.parametrize("name", QA)
def test_config_kwargs_build_the_model(name):
    kwargs = model_kwargs(qa_config(name).model)
    assert zoo.models.create(name, vocab_size=VOCAB, memory_size=MEMORY, **kwargs).ensure_built().count_params() > 0


def test_relation_reader_answers_story_words_through_its_entity_attentions():
    # With the gate open (g = 1) the answer is the pointer sum p_1: a distribution over the story's words only.
    model = make("relation_reader")
    model.read(STORY, QUESTION)
    kernel, bias = model.gate.get_weights()
    model.gate.set_weights([np.zeros_like(kernel), np.full_like(bias, 30.0)])
    p = np.exp(keras.ops.convert_to_numpy(model.read(STORY, QUESTION)["logits"]).astype("float64"))
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-4)
    for b in range(2):
        elsewhere = np.setdiff1d(np.arange(VOCAB), STORY[b])
        assert np.all(p[b, elsewhere] < 1e-6) and np.all(p[b, np.setdiff1d(STORY[b], [0])] > 0)
    assert p[1, 0] < 1e-6  # padding is no answer
