"""zoo.models.vision: show_attend_tell at a tiny size: shapes, attention rows, the doubly stochastic
penalty against numpy, learning, greedy decoding as teacher forcing, the .keras round trip."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import zoo.models  # noqa: E402
from zoo.decoding import greedy_decode  # noqa: E402

VOCAB = 14  # <pad> <unk> <bos> <eos> 0-9, as data=digit_strings
RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(3, 16, 24)).astype("uint8")
TARGET_IN = np.array([[2, 5, 6, 7], [2, 8, 0, 0], [2, 9, 4, 5]], dtype="int32")
TARGET_OUT = np.array([[5, 6, 7, 3], [8, 3, 0, 0], [9, 4, 5, 3]], dtype="int32")


def make(**overrides):
    keras.utils.set_random_seed(0)
    kwargs = {"embed_dim": 8, "hidden_size": 12, "conv_layers": 2, "filters": 4, "attention_penalty": 0.5,
              **overrides}
    return zoo.models.create("show_attend_tell", target_vocab_size=VOCAB, **kwargs)


def test_shapes_attention_rows_and_the_grid():
    model = make()
    logits = keras.ops.convert_to_numpy(model((IMAGES, TARGET_IN)))
    assert logits.shape == (3, 4, VOCAB) and np.all(np.isfinite(logits))
    assert model.grid_shape(16, 24) == (4, 6) and model.stride == 4
    grids = keras.ops.convert_to_numpy(model.attention_grids(IMAGES, TARGET_IN))
    assert grids.shape == (3, 4, 4, 6)
    np.testing.assert_allclose(grids.sum(axis=(2, 3)), 1.0, atol=1e-5)
    # The memory is the grid's cells, row-major: L = h w annotation vectors of D = filters * 2 channels.
    memory = model.encode(IMAGES)
    assert tuple(memory["memory"].shape) == (3, 24, 8)
    grid = keras.ops.convert_to_numpy(model.annotations(IMAGES))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(memory["memory"]), grid.reshape(3, 24, 8))


def test_the_doubly_stochastic_penalty_is_the_papers_sum_over_real_steps():
    model = make()
    model((IMAGES, TARGET_IN))
    (penalty,) = model.losses
    _, attention = model.teacher_forced(IMAGES, TARGET_IN)
    alpha = keras.ops.convert_to_numpy(attention)  # [B, T, L]
    totals = (alpha * (TARGET_IN != 0)[..., None]).sum(axis=1)  # sum_t alpha_ti over real steps
    expected = 0.5 * np.mean(((1.0 - totals) ** 2).sum(axis=-1))
    np.testing.assert_allclose(float(penalty), expected, rtol=1e-5)
    no_penalty = make(attention_penalty=0.0)
    no_penalty((IMAGES, TARGET_IN))
    assert not no_penalty.losses


def test_the_gate_scales_the_context():
    """beta_t = sigmoid(f_beta(h_{t-1})): with f_beta's bias at -inf-ish the context is gone from z_t."""
    model = make()
    model.ensure_built()
    memory = model.encode(IMAGES)
    state = model.initial_state(memory)
    kernel, bias = model.gate.get_weights()
    model.gate.set_weights([np.zeros_like(kernel), np.full_like(bias, -50.0)])
    features, _, _ = model.decode_features(np.array([2, 2, 2], "int32"), state, memory)
    z = keras.ops.convert_to_numpy(features)[:, 12 + 8:]
    np.testing.assert_allclose(z, 0.0, atol=1e-12)


def test_a_gradient_step_lowers_the_loss_on_a_fixed_batch():
    import tensorflow as tf

    model = make()
    optimizer = keras.optimizers.Adam(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)

    def loss():
        logits = model((IMAGES, TARGET_IN), training=True)
        return loss_fn(TARGET_OUT, logits) + tf.add_n(model.losses)

    before = float(loss())
    for _ in range(5):
        with tf.GradientTape() as tape:
            value = loss()
        grads = tape.gradient(value, model.trainable_variables)
        assert all(g is not None for g in grads)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert float(loss()) < before


@pytest.mark.parametrize("attention", ["additive", "location_aware"])
def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(attention):
    model = make(attention=attention)
    ids, weights, lengths = greedy_decode(model, IMAGES, max_length=5)
    ids, weights, lengths = ids.numpy(), weights.numpy(), lengths.numpy()
    assert weights.shape == (3, ids.shape[1], 24)  # [B, T_out, L]: the grid's cells
    target_in = np.concatenate([np.full((3, 1), 2, "int32"), ids[:, :-1]], axis=1)
    logits, forced = model.teacher_forced(IMAGES, target_in)
    logits, forced = keras.ops.convert_to_numpy(logits), keras.ops.convert_to_numpy(forced)
    for row in range(3):
        n = lengths[row]
        np.testing.assert_array_equal(logits[row, :n].argmax(-1), ids[row, :n])
        np.testing.assert_allclose(weights[row, :n], forced[row, :n], atol=1e-5)
        np.testing.assert_allclose(weights[row, :n].sum(-1), 1.0, atol=1e-5)


def test_keras_file_round_trip_gives_identical_outputs(tmp_path):
    model = make(attention="location_aware")
    before = keras.ops.convert_to_numpy(model((IMAGES, TARGET_IN)))
    model.save(tmp_path / "sat.keras")
    loaded = keras.models.load_model(tmp_path / "sat.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded((IMAGES, TARGET_IN))), before)
    assert loaded.get_config()["attention_penalty"] == 0.5 and loaded.grid_shape(16, 24) == (4, 6)


def test_beam_search_of_size_one_is_greedy_and_wider_beams_attend_over_the_grid():
    from zoo.decoding.beam_search import beam_search

    model = make()
    greedy_ids, greedy_weights, _ = greedy_decode(model, IMAGES, max_length=5)
    best = beam_search(model, IMAGES, max_length=5, beam_size=1)
    steps = greedy_ids.shape[1]
    np.testing.assert_array_equal(best["ids"].numpy()[:, :steps], greedy_ids.numpy())
    np.testing.assert_allclose(best["attention"].numpy()[:, :steps], greedy_weights.numpy(), atol=1e-5)
    best = beam_search(model, IMAGES, max_length=5, beam_size=3, beta=0.2)
    assert best["attention"].shape[0] == 3 and best["attention"].shape[-1] == 24
