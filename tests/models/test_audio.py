"""zoo.models.audio: listen_attend_spell at a tiny size: the pyramid halves the frames and masks padding,
shapes and finite outputs, attention over real listener frames only, learning, greedy decoding as
teacher forcing, the .keras round trip."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import zoo.models  # noqa: E402
from zoo.models.audio.listen_attend_spell import normalize_frames, pyramid_pairs, reduced_frames  # noqa: E402

VOCAB = 14  # <pad> <unk> <bos> <eos> 0-9, as data=spoken_digits
MELS = 5
RNG = np.random.default_rng(0)
FEATURES = RNG.normal(size=(3, 13, MELS)).astype("float32")
FRAMES = np.array([13, 9, 6], dtype="int32")
TARGET_IN = np.array([[2, 5, 6, 7], [2, 8, 0, 0], [2, 9, 4, 5]], dtype="int32")
TARGET_OUT = np.array([[5, 6, 7, 3], [8, 3, 0, 0], [9, 4, 5, 3]], dtype="int32")
TINY = {"embed_dim": 8, "hidden_size": 12, "listener_units": 6, "pyramid_layers": 2,
        "attention_options": {"units": 8, "filters": 2, "kernel_size": 3}}


def make(**overrides):
    keras.utils.set_random_seed(0)
    return zoo.models.create("listen_attend_spell", target_vocab_size=VOCAB, num_mels=MELS, **{**TINY, **overrides})


@pytest.fixture(scope="module")
def built():
    """``make()`` built once, for the checks that only read it (outputs, decoding, saving); a test that
    trains calls ``make``."""
    return make().ensure_built()


def numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_a_pyramid_step_concatenates_pairs_and_halves_the_frames():
    """[h_0; h_1], [h_2; h_3], [h_4; 0]: five frames become three; a row of 3 real frames keeps 2, its padded
    frame zeroed before pairing."""
    h = np.arange(1, 11, dtype="float32").reshape(1, 5, 2).repeat(2, axis=0)
    mask = np.array([[True] * 5, [True, True, True, False, False]])
    pairs, reduced = pyramid_pairs(h, mask)
    pairs, reduced = numpy(pairs), numpy(reduced)
    np.testing.assert_array_equal(pairs[0], [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 0, 0]])
    np.testing.assert_array_equal(pairs[1], [[1, 2, 3, 4], [5, 6, 0, 0], [0, 0, 0, 0]])
    assert reduced.tolist() == [[True, True, True], [True, True, False]]
    assert reduced_frames(np.array([13, 9, 6, 1]), 2).tolist() == [4, 3, 2, 1]  # ceil(n / 4)


def test_features_are_normalised_over_each_rows_real_frames():
    mask = np.arange(13)[None, :] < FRAMES[:, None]
    got = numpy(normalize_frames(FEATURES, mask))
    for row, n in zip(range(3), FRAMES):
        real = FEATURES[row, :n]
        np.testing.assert_allclose(got[row, :n], (real - real.mean(0)) / np.sqrt(real.var(0) + 1e-5), atol=1e-4)
        np.testing.assert_array_equal(got[row, n:], 0.0)


def test_the_listener_reduces_time_and_padding_changes_no_row(built):
    model = built
    assert model.reduction == 4
    memory = model.encode((FEATURES, FRAMES))
    h, mask = numpy(memory["memory"]), numpy(memory["memory_mask"])
    assert h.shape == (3, 4, 12)  # ceil(13 / 4) frames of 2 * listener_units
    assert mask.tolist() == [[True] * 4, [True] * 3 + [False], [True] * 2 + [False] * 2]
    np.testing.assert_array_equal(h[~mask], 0.0)
    # Each row alone, cut to its own frames, gives its frames in the padded batch.
    for row, n in enumerate(FRAMES):
        alone = numpy(model.encode((FEATURES[row:row + 1, :n], FRAMES[row:row + 1]))["memory"])[0]
        np.testing.assert_allclose(h[row, :len(alone)], alone, atol=1e-5)
    # What lies in the padding does not matter.
    noisy = FEATURES.copy()
    noisy[1, 9:] = 100.0
    np.testing.assert_allclose(numpy(model.encode((noisy, FRAMES))["memory"]), h, atol=1e-5)


@pytest.mark.parametrize("overrides", [{}, {"cell": "gru", "speller_layers": 2},
                                       {"attention": "additive", "attention_options": {"units": 8}}])
def test_shapes_finite_outputs_and_attention_on_real_frames(overrides, built):
    model = make(**overrides) if overrides else built
    logits = numpy(model((FEATURES, FRAMES, TARGET_IN)))
    assert logits.shape == (3, 4, VOCAB) and np.all(np.isfinite(logits))
    attention = numpy(model.attention_weights((FEATURES, FRAMES, TARGET_IN)))
    assert attention.shape == (3, 4, 4)
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    assert np.all(attention[1, :, 3] == 0) and np.all(attention[2, :, 2:] == 0)


def test_a_few_gradient_steps_lower_the_loss_on_a_fixed_batch():
    import tensorflow as tf

    model = make()
    optimizer = keras.optimizers.Adam(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)

    def loss():
        return loss_fn(TARGET_OUT, model((FEATURES, FRAMES, TARGET_IN), training=True))

    before = float(loss())
    for _ in range(2):
        with tf.GradientTape() as tape:
            value = loss()
        grads = tape.gradient(value, model.trainable_variables)
        assert all(g is not None for g in grads)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert float(loss()) < before


def test_greedy_decoding_is_teacher_forcing_on_its_own_output_and_the_keras_file_round_trips(tmp_path, built):
    import tensorflow as tf

    from zoo.decoding import greedy_decode

    model = built
    ids, attention, _ = greedy_decode(model, (tf.constant(FEATURES), tf.constant(FRAMES)), 4)
    ids = ids.numpy()
    target_in = np.concatenate([np.full((3, 1), 2, "int32"), ids[:, :-1]], axis=1)
    logits = numpy(model((FEATURES, FRAMES, target_in)))
    np.testing.assert_array_equal(logits.argmax(-1)[:, 0], ids[:, 0])
    forced = numpy(model.attention_weights((FEATURES, FRAMES, target_in)))
    np.testing.assert_allclose(attention.numpy()[:, 0], forced[:, 0], atol=1e-5)
    path = tmp_path / "las.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(numpy(loaded((FEATURES, FRAMES, TARGET_IN))), numpy(model((FEATURES, FRAMES, TARGET_IN))),
                               atol=1e-5)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="pyramid_layers"):
        make(pyramid_layers=-1)
    with pytest.raises(ValueError, match="cell"):
        make(cell="rnn")
