"""zoo.models.vision.vision_transformer at a tiny size (a 16x32 canvas in 8x8 patches, one layer, two heads,
width 8): shapes and masks, the patch embedding and attention rollout against numpy, greedy decoding as
teacher forcing, the .keras round trip, the fast kernels equal to the reference; a smoke run through the
image task's lifecycle whose SavedModel reads."""

import math

import numpy as np
import pytest

from conftest import greedy_agrees_with_teacher_forcing, image_run_reads_as_scored

keras = pytest.importorskip("keras")

import zoo.models  # noqa: E402
from zoo.decoding import greedy_decode  # noqa: E402
from zoo.models.vision.vision_transformer import rollout  # noqa: E402

VOCAB = 14  # <pad> <unk> <bos> <eos> 0-9, as data=digit_strings
RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(3, 16, 32)).astype("uint8")  # a 2x4 grid of 8x8 patches: N = 8
TARGET_IN = np.array([[2, 5, 6, 7], [2, 8, 0, 0], [2, 9, 4, 5]], dtype="int32")
TARGET_OUT = np.array([[5, 6, 7, 3], [8, 3, 0, 0], [9, 4, 5, 3]], dtype="int32")


def make(**overrides):
    keras.utils.set_random_seed(0)
    kwargs = {"patch_size": 8, "embed_dim": 8, "intermediate_dim": 16, "num_layers": 1, "num_heads": 2,
              "dropout": 0.0, **overrides}
    return zoo.models.create("vision_transformer", target_vocab_size=VOCAB, **kwargs)


@pytest.fixture(scope="module")
def built():
    """``make()`` built once, for the checks that only read it."""
    return make().ensure_built()


def numpy_of(x):
    return keras.ops.convert_to_numpy(x)


def test_shapes_masks_and_attention_over_the_patch_grid(built):
    model = built
    logits = numpy_of(model((IMAGES, TARGET_IN)))
    assert logits.shape == (3, 4, VOCAB) and np.all(np.isfinite(logits))
    assert model.grid_shape(16, 32) == (2, 4)
    memory = model.encode(IMAGES)
    assert tuple(memory["memory"].shape) == (3, 8, 8) and np.all(numpy_of(memory["memory_mask"]))
    assert tuple(memory["rollout"].shape) == (3, 8, 8)
    grids = numpy_of(model.attention_grids(IMAGES, TARGET_IN))
    assert grids.shape == (3, 4, 2, 4)  # [B, T_out, h, w], what the image task reshapes and scores
    np.testing.assert_allclose(grids.sum(axis=(2, 3)), 1.0, atol=1e-5)
    # The training features are 0 at target padding, and causality keeps padding from the real positions.
    features = numpy_of(model((IMAGES, TARGET_IN), return_features=True))
    assert features.shape == (3, 4, 8) and np.all(features[1, 2:] == 0) and np.all(features[1, :2] != 0)
    other = TARGET_IN.copy()
    other[1, 2:] = 7
    np.testing.assert_allclose(numpy_of(model((IMAGES, other)))[1, :2], logits[1, :2], rtol=1e-5, atol=1e-6)


def test_the_patch_embedding_is_a_reshape_and_a_matmul_plus_positions(built):
    model = built
    x = IMAGES.astype("float32") / 255.0
    # x_p^n: patch n = (r, c) of the 2x4 grid, row-major; its pixels row-major.
    patches = np.stack([x[:, r * 8:(r + 1) * 8, c * 8:(c + 1) * 8].reshape(3, 64) for r in range(2) for c in range(4)], 1)
    np.testing.assert_allclose(numpy_of(model.patches(IMAGES)), patches, rtol=1e-6)
    kernel, bias = model.patch_embedding.get_weights()
    positions = numpy_of(model.source_positions.embeddings)[:8]  # E_pos: learned, one row per patch
    z0 = numpy_of(model.source_positions(model.patch_embedding(model.patches(IMAGES))))
    np.testing.assert_allclose(z0, patches @ kernel + bias + positions, rtol=1e-5, atol=1e-6)  # eq. 1


def test_grid_positions_give_each_patch_its_rows_and_its_columns_embedding():
    """2-D positions (Dosovitskiy et al. 2021, appendix D.4): E_pos(r, c) = [E_Y(r); E_X(c)], D/2 each: learned,
    the table's first and last halves; sinusoidal, the sinusoids of D/2 channels of r and of c."""
    model = make(grid_positions=True).ensure_built()
    table = numpy_of(model.source_positions.embeddings)
    expected = np.stack([np.concatenate([table[r, :4], table[c, 4:]]) for r in range(2) for c in range(4)])
    np.testing.assert_allclose(numpy_of(model.grid_position_embedding(2, 4))[0], expected, rtol=1e-6)
    z = numpy_of(model((IMAGES, TARGET_IN)))  # the model runs with them
    assert np.all(np.isfinite(z))
    sines = make(positions="sinusoidal", grid_positions=True)
    pe = numpy_of(sines.source_positions(np.zeros((1, 4, 4), "float32")))[0]  # PE of D/2 = 4 channels, indices 0-3
    expected = np.stack([np.concatenate([pe[r], pe[c]]) for r in range(2) for c in range(4)])
    np.testing.assert_allclose(numpy_of(sines.grid_position_embedding(2, 4))[0], expected, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="positions"):
        make(positions="rotary", grid_positions=True)


def test_rollout_is_the_product_of_the_residual_mixed_layers(built):
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(2, 2, 2, 3, 3))  # [layers, B, H, N, N]
    maps = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    a1, a2 = (0.5 * m.mean(1) + 0.5 * np.eye(3) for m in maps)
    expected = np.einsum("bij,bjk->bik", a2 / a2.sum(-1, keepdims=True), a1 / a1.sum(-1, keepdims=True))
    np.testing.assert_allclose(numpy_of(rollout(list(maps))), expected, rtol=1e-5)
    # The model's attention over the image: the last cross-attention (heads averaged) times R of its encoder.
    model = built
    maps = model.attention_maps((IMAGES, TARGET_IN))
    r = numpy_of(maps["rollout"])
    np.testing.assert_allclose(r, numpy_of(rollout(maps["encoder"])), rtol=1e-6)
    cross = numpy_of(maps["cross"][-1]).mean(1)  # [B, T, N]
    _, attention = model.teacher_forced(IMAGES, TARGET_IN)
    np.testing.assert_allclose(numpy_of(attention), np.einsum("btj,bji->bti", cross, r), rtol=1e-5, atol=1e-6)
    plain = make(rollout=False)
    _, attention = plain.teacher_forced(IMAGES, TARGET_IN)
    np.testing.assert_allclose(numpy_of(attention), numpy_of(plain.attention_maps((IMAGES, TARGET_IN))["cross"][-1]).mean(1),
                               rtol=1e-5, atol=1e-6)


def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(built):
    greedy_agrees_with_teacher_forcing(built, IMAGES, cells=8)  # [B, T_out, N]: the patches


def test_every_position_option_decodes_as_it_teacher_forces():
    """The Transformer's positions over the patch sequence inside self-attention: each step of the cached
    decoder gives teacher forcing's logits."""
    for positions in ("rotary", "alibi"):  # in self-attention: a rotation, a bias (sinusoidal: the round trip's)
        model = make(positions=positions)
        logits, _ = model.teacher_forced(IMAGES, TARGET_IN)
        memory = model.encode(IMAGES)
        state = model.initial_state(memory, max_length=4)
        for t in range(4):
            step, state, _ = model.decode_step(TARGET_IN[:, t], state, memory)
            np.testing.assert_allclose(numpy_of(step), numpy_of(logits)[:, t], rtol=1e-4, atol=1e-5,
                                       err_msg=positions)


def test_a_patch_size_that_does_not_tile_the_image_or_too_few_learned_positions_are_refused():
    with pytest.raises(ValueError, match=r"patch_size.*divisor of the image's height 16 and width 30.*patch_size=2"):
        make().grid_shape(16, 30)
    with pytest.raises(ValueError, match=r"max_length.*at least the 8 patches.*max_length=8"):
        make(max_length=6).grid_shape(16, 32)
    with pytest.raises(ValueError, match="patch_size"):
        make(patch_size=0)


def test_keras_file_round_trip_gives_identical_outputs(tmp_path):
    model = make(positions="sinusoidal", rollout=False)
    before = numpy_of(model((IMAGES, TARGET_IN)))
    model.save(tmp_path / "vit.keras")
    loaded = keras.models.load_model(tmp_path / "vit.keras")
    np.testing.assert_array_equal(numpy_of(loaded((IMAGES, TARGET_IN))), before)
    assert loaded.get_config()["rollout"] is False and loaded.grid_shape(16, 32) == (2, 4)
    assert "source_vocab_size" not in loaded.get_config()


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the fast kernels are TensorFlow's")
def test_the_fast_kernels_give_the_reference_features_gradients_and_decoding():
    import tensorflow as tf

    from zoo import kernels

    model = make(dropout=0.0)
    model.ensure_built()
    results = {}
    for mode in ("reference", "fast"):
        with kernels.using(mode):
            with tf.GradientTape() as tape:
                features = model((IMAGES, TARGET_IN), training=True, return_features=True)
                loss = tf.reduce_sum(model.output_logits(features) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            ids, weights, _ = greedy_decode(model, IMAGES, max_length=5)
            results[mode] = (features, grads, ids, weights)
    (f0, g0, i0, w0), (f1, g1, i1, w1) = results["reference"], results["fast"]
    np.testing.assert_allclose(numpy_of(f1), numpy_of(f0), rtol=1e-5, atol=1e-5)
    for v, a, b in zip(model.trainable_variables, g0, g1):
        if a is None:
            assert b is None, v.path
            continue
        np.testing.assert_allclose(numpy_of(b), numpy_of(a), rtol=1e-4, atol=1e-5, err_msg=v.path)
    np.testing.assert_array_equal(numpy_of(i1), numpy_of(i0))
    np.testing.assert_allclose(numpy_of(w1), numpy_of(w0), atol=1e-5)


@pytest.mark.slow
def test_vision_transformer_trains_through_the_image_lifecycle_and_its_saved_model_reads(mlflow_store, tmp_path):
    smoke = ["model=vision_transformer", "data=digit_strings", "debug=smoke", "model.intermediate_dim=16",
             "model.num_layers=1", "model.num_heads=2", "trainer.epochs=1"]
    # The run's metrics, and its SavedModel's read answering the test images as the run scored them:
    metrics, attention, ids, task = image_run_reads_as_scored(smoke, mlflow_store, tmp_path)
    assert 0 <= metrics["test_exact_match"] <= 1 and metrics["test_digit_error_rate"] >= 0
    assert math.isfinite(metrics["train_loss"])
    # attention on the patch grid (patch_size 16), each step up to and with <eos> summing to 1
    assert attention.shape[0] == 16 and attention.shape[2:] == (task.height // 16, task.width // 16)
    steps = (np.cumsum(ids == 3, axis=1) - (ids == 3)) == 0
    np.testing.assert_allclose(attention.sum(axis=(2, 3))[steps], 1.0, atol=1e-4)
