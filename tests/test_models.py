"""Every registered model, at tiny sizes: shapes, no NaN, learning, .keras round trip, decoding."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import zoo.models  # noqa: E402
from zoo.decoding import greedy_decode  # noqa: E402

# One line per registered model: the smallest sizes that exercise it.
TINY = {
    "bahdanau": {"embed_dim": 8, "hidden_size": 12},
}
SRC_VOCAB, TGT_VOCAB = 13, 11
SOURCE = np.array([[5, 6, 7, 8, 3, 0, 0], [9, 4, 3, 0, 0, 0, 0], [4, 5, 6, 7, 8, 9, 3]], dtype="int32")
TARGET_IN = np.array([[2, 5, 6, 7, 0], [2, 8, 0, 0, 0], [2, 9, 4, 5, 6]], dtype="int32")
TARGET_OUT = np.array([[5, 6, 7, 3, 0], [8, 3, 0, 0, 0], [9, 4, 5, 6, 3]], dtype="int32")


def test_every_registered_model_has_a_config_and_a_tiny_setting():
    from zoo.config import options

    assert zoo.models.names() == options("model")
    assert sorted(TINY) == zoo.models.names()


def make(name):
    keras.utils.set_random_seed(0)
    return zoo.models.create(name, source_vocab_size=SRC_VOCAB, target_vocab_size=TGT_VOCAB, **TINY[name])


@pytest.mark.parametrize("name", zoo.models.names())
def test_shapes_and_finite_outputs(name):
    model = make(name)
    logits = model((SOURCE, TARGET_IN))
    assert tuple(logits.shape) == (3, 5, TGT_VOCAB)
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(logits)))


@pytest.mark.parametrize("name", zoo.models.names())
def test_attention_weights_have_the_documented_shape_and_mask(name):
    weights = keras.ops.convert_to_numpy(make(name).attention_weights((SOURCE, TARGET_IN)))
    assert weights.shape == (3, 5, 7)  # [B, T_out, T_in]
    pad = SOURCE == 0
    assert np.all(weights[np.broadcast_to(pad[:, None, :], weights.shape)] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("name", zoo.models.names())
def test_training_steps_lower_the_loss(name):
    model = make(name)
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    first = model.train_on_batch((SOURCE, TARGET_IN), TARGET_OUT)
    for _ in range(4):
        last = model.train_on_batch((SOURCE, TARGET_IN), TARGET_OUT)
    assert np.isfinite(last) and last < first


@pytest.mark.parametrize("name", zoo.models.names())
def test_keras_file_round_trip_gives_identical_outputs(name, tmp_path):
    model = make(name)
    before = keras.ops.convert_to_numpy(model((SOURCE, TARGET_IN)))
    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    after = keras.ops.convert_to_numpy(loaded((SOURCE, TARGET_IN)))
    np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("name", zoo.models.names())
def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(name):
    model = make(name)
    ids, attention, lengths = greedy_decode(model, SOURCE, max_length=6)
    ids, attention, lengths = ids.numpy(), attention.numpy(), lengths.numpy()
    assert ids.shape[0] == 3 and ids.shape[1] <= 6 and attention.shape == (3, ids.shape[1], 7)
    # Feeding the greedy tokens back with teacher forcing must reproduce them step by step.
    target_in = np.concatenate([np.full((3, 1), 2, "int32"), ids[:, :-1]], axis=1)
    logits = keras.ops.convert_to_numpy(model((SOURCE, target_in)))
    for row in range(3):
        n = lengths[row]
        assert n >= 1
        np.testing.assert_array_equal(logits[row, :n].argmax(-1), ids[row, :n])
        assert np.all(ids[row, n:] == 0) and np.all(attention[row, n:] == 0)
