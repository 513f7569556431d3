"""zoo.models.vision.recurrent_attention (Mnih et al. 2014, Ba et al. 2015) at a tiny size: the glimpse
sensor against a numpy crop, the glimpse map, REINFORCE's gradient by hand, greedy decoding as teacher
forcing, the .keras round trip, and a smoke run through the image lifecycle with its SavedModel."""


import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import zoo.models  # noqa: E402
from zoo.models.vision.recurrent_attention import correct_from, reinforce_loss  # noqa: E402

from conftest import greedy_agrees_with_teacher_forcing, image_run_reads_as_scored  # noqa: E402

VOCAB = 14  # <pad> <unk> <bos> <eos> 0-9, as data=digit_strings
RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(3, 16, 32)).astype("uint8")
TARGET_IN = np.array([[2, 5, 6, 7], [2, 8, 0, 0], [2, 9, 4, 5]], dtype="int32")
TINY = {"embed_dim": 4, "hidden_size": 8, "glimpse_size": 4, "scales": 2, "glimpse_units": 8,
        "glimpses_per_digit": 2, "context_rows": 2, "context_cols": 4}


def make(**overrides):
    keras.utils.set_random_seed(0)
    return zoo.models.create("recurrent_attention", target_vocab_size=VOCAB, **{**TINY, **overrides}).ensure_built()


@pytest.fixture(scope="module")
def built():
    return make()


def numpy_glimpse(image, location, g, scales):
    """The retina by hand: zero-pad, cut the ``g 2^s`` square at ``round(c - side / 2)``, average its blocks."""
    height, width = image.shape
    pad = g * 2 ** scales
    padded = np.pad(image.astype("float64"), pad)
    cx, cy = (location[0] + 1) * width / 2, (location[1] + 1) * height / 2
    out = []
    for s in range(scales):
        f, side = 2 ** s, g * 2 ** s
        x0, y0 = int(np.floor(cx - side / 2 + 0.5)), int(np.floor(cy - side / 2 + 0.5))
        patch = padded[pad + y0:pad + y0 + side, pad + x0:pad + x0 + side]
        out.append(patch.reshape(g, f, g, f).mean(axis=(1, 3)).ravel())
    return np.concatenate(out)


def test_the_glimpse_sensor_is_the_numpy_crop_inside_the_image_and_at_its_border(built):
    model = built
    image = IMAGES[:1].astype("float32") / 255.0
    for location in ([-1.0, -1.0], [0.25, 0.0], [0.9, 1.0], [-0.3, 0.55]):
        got = keras.ops.convert_to_numpy(model.glimpse_sensor(image, np.array([location], "float32")))[0]
        np.testing.assert_allclose(got, numpy_glimpse(image[0], location, 4, 2), atol=1e-6)
    # One ink pixel in the top left corner, glimpse centred on the corner, c = (0, 0): the 4x4 patch
    # spans pixels -2..1 (the pixel at its (2, 2)); the 8x8 patch spans -4..3, averaged in 2x2 blocks
    # (the pixel a quarter of block (2, 2)); everything else is zero padding or background.
    corner = np.zeros((1, 16, 32), "float32")
    corner[0, 0, 0] = 1.0
    rho = keras.ops.convert_to_numpy(model.glimpse_sensor(corner, np.array([[-1.0, -1.0]], "float32")))[0]
    fine, coarse = rho[:16].reshape(4, 4), rho[16:].reshape(4, 4)
    assert fine[2, 2] == 1.0 and fine.sum() == 1.0
    assert coarse[2, 2] == 0.25 and coarse.sum() == 0.25


def test_shapes_and_the_glimpse_maps_of_a_string(built):
    model = built
    logits = keras.ops.convert_to_numpy(model((IMAGES, TARGET_IN)))
    assert logits.shape == (3, 4, VOCAB) and np.all(np.isfinite(logits))
    assert model.grid_shape(16, 32) == (4, 8) and model.grid_shape(32, 160) == (8, 40)
    features = model((IMAGES, TARGET_IN), return_features=True)
    assert tuple(features.shape) == (3, 4, 8)
    grids = keras.ops.convert_to_numpy(model.attention_grids(IMAGES, TARGET_IN))
    assert grids.shape == (3, 4, 4, 8)
    np.testing.assert_allclose(grids.sum(axis=(2, 3)), 1.0, atol=1e-5)


def test_the_glimpse_map_is_the_finest_patch_box_normalised_and_peaks_at_the_glimpse(built):
    model = built
    # centre (10, 6) on the 16x32 image: the 4x4 box is pixels x 8..11, y 4..7, exactly cell (1, 2)
    # of the 4x4-pixel cells; centre (21, 9): x 19..22, y 7..10, spread over 2x2 cells (1x1, 3x3, 1x3, 3x1 px).
    locations = np.array([[[10 / 16 - 1, 6 / 8 - 1]], [[21 / 16 - 1, 9 / 8 - 1]]], "float32")  # [B, N=1, 2]
    maps = keras.ops.convert_to_numpy(model.glimpse_map(locations, 16, 32)).reshape(2, 4, 8)
    expected = np.zeros((2, 4, 8))
    expected[0, 1, 2] = 1.0
    expected[1, 1:3, 4:6] = np.array([[1 * 1, 1 * 3], [3 * 1, 3 * 3]]) / 16.0
    np.testing.assert_allclose(maps, expected, atol=1e-6)
    # two glimpses of one digit: both boxes, each weighing its pixels
    both = keras.ops.convert_to_numpy(model.glimpse_map(locations.reshape(1, 2, 2), 16, 32)).reshape(4, 8)
    np.testing.assert_allclose(both, expected.sum(0) / 2, atol=1e-6)
    assert np.unravel_index(both.argmax(), both.shape) == (1, 2)


def test_reinforce_moves_the_location_network_by_the_sign_of_reward_minus_baseline():
    """``mu = tanh(W h + b_l)`` with ``W = 0``, ``b_l = 0``: ``mu = 0``; one glimpse drawn at
    ``l = (0.1, -0.2)``, ``sigma = 0.5``, one real step (``M = 1``). Then
    ``dL/db_l = -(R - b)(l - mu)(1 - mu^2) / sigma^2 = -(R - b) (0.4, -0.8)``: descent moves ``mu``
    towards ``l`` when the reward beat the baseline, away when it fell short, not at all when equal;
    and ``dL/db = -2 (R - b)`` moves the baseline towards the reward."""
    location = keras.layers.Dense(2, activation="tanh", kernel_initializer="zeros")
    location.build((None, 3))
    h = np.ones((1, 3), "float32")
    drawn = np.array([[[[0.1, -0.2]]]], "float32")  # [B, T, N, 2]
    for reward, base in ((3.0, 1.0), (1.0, 1.0), (0.0, 2.0)):
        baseline = tf.Variable([[[base]]])
        with tf.GradientTape() as tape:
            mean = tf.reshape(location(h), (1, 1, 1, 2))
            loss = reinforce_loss(drawn, mean, baseline, np.array([[reward]], "float32"), np.ones((1, 1), "float32"),
                                  0.5)
        grad_bias, grad_baseline = tape.gradient(loss, [location.bias, baseline])
        np.testing.assert_allclose(grad_bias.numpy(), -(reward - base) * np.array([0.4, -0.8]), atol=1e-6)
        np.testing.assert_allclose(grad_baseline.numpy().ravel(), [-2 * (reward - base)], atol=1e-6)
        if reward == base:
            assert not np.any(grad_bias.numpy())
        else:  # the descent step -grad_bias points along sign(R - b) (l - mu)
            assert np.all(np.sign(-grad_bias.numpy()) == np.sign(reward - base) * np.sign([0.1, -0.2]))


def test_the_reward_counts_the_correct_outputs_from_each_step_on():
    logits = np.full((2, 4, 5), -1.0, "float32")
    predicted = np.array([[4, 3, 4, 0], [1, 2, 0, 0]])
    np.put_along_axis(logits, predicted[..., None], 1.0, axis=-1)
    target_out = np.array([[4, 4, 4, 3], [1, 3, 0, 0]])
    target_in = np.array([[2, 4, 4, 4], [2, 1, 0, 0]])
    reward = keras.ops.convert_to_numpy(correct_from(logits, target_out, target_in))
    # row 0: hits 1, 0, 1, 0 -> from each step on 2, 1, 1, 0; row 1: hits 1, 0 and padding
    np.testing.assert_array_equal(reward, [[2, 1, 1, 0], [1, 0, 0, 0]])


def test_training_draws_locations_around_the_mean_and_adds_a_zero_valued_reinforce_loss(built):
    model = built
    _, _, locations, means, _ = model._teacher_forced(IMAGES, TARGET_IN, training=True)
    z = (keras.ops.convert_to_numpy(locations) - keras.ops.convert_to_numpy(means)) / model.location_std
    assert z.shape == (3, 4, 2, 2) and 0.6 < z.std() < 1.5 and abs(z.mean()) < 0.6
    _, _, locations, means, _ = model._teacher_forced(IMAGES, TARGET_IN, training=False)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(locations), keras.ops.convert_to_numpy(means))
    with tf.GradientTape() as tape:
        model((IMAGES, TARGET_IN), training=True)
        (extra,) = model.losses
    assert float(extra) == 0.0
    grads = dict(zip([v.path for v in model.trainable_variables], tape.gradient(extra, model.trainable_variables)))
    assert np.any(grads["recurrent_attention/f_l/bias"].numpy()) and np.any(grads["recurrent_attention/f_b/bias"].numpy())
    assert np.any(grads["recurrent_attention/core_lstm/kernel"].numpy())  # the policy gradient reaches the core
    assert grads["recurrent_attention/f_y/bias"] is None  # the classifier learns from the cross-entropy only


def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(built):
    greedy_agrees_with_teacher_forcing(built, IMAGES, cells=32)  # the glimpse maps' cells (policy means)


def test_keras_file_round_trip_gives_identical_outputs(tmp_path, built):
    before = keras.ops.convert_to_numpy(built((IMAGES, TARGET_IN)))
    built.save(tmp_path / "ram.keras")
    loaded = keras.models.load_model(tmp_path / "ram.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded((IMAGES, TARGET_IN))), before)
    assert loaded.get_config()["glimpse_size"] == 4 and loaded.grid_shape(16, 32) == (4, 8)


# Two retina scales, not three (each scale is one more crop to trace in every step of the time loop; the
# sensor's scales are checked against numpy above); two glimpses per digit, as the paper.
SMOKE = ["model=recurrent_attention", "data=digit_strings", "debug=smoke", "model.hidden_size=16",
         "model.glimpse_units=8", "model.context_cols=10", "model.scales=2", "trainer.epochs=1", "data.max_digits=4"]


@pytest.mark.slow
def test_recurrent_attention_trains_through_the_image_lifecycle_and_its_saved_model_reads(mlflow_store, tmp_path):
    # The run's metrics, and its SavedModel's read answering the test images as the run scored them:
    metrics, attention, ids, task = image_run_reads_as_scored(SMOKE, mlflow_store, tmp_path)
    assert len(ids) == 16
    # the glimpse maps: on the map_stride grid, each digit's summing to 1
    assert attention.shape[2:] == (task.height // 4, task.width // 4)
    np.testing.assert_allclose(attention.sum(axis=(2, 3))[ids != 0], 1.0, atol=1e-4)
