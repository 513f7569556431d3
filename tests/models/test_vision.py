"""zoo.models.vision: show_attend_tell at a tiny size: shapes, attention rows, the doubly stochastic
penalty against numpy, learning, greedy decoding as teacher forcing, the .keras round trip."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import zoo.models  # noqa: E402
from zoo.decoding import greedy_decode  # noqa: E402

from conftest import greedy_agrees_with_teacher_forcing  # noqa: E402

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


@pytest.fixture(scope="module")
def built():
    """``make()`` built once, for the checks that only read it (outputs, penalty, decoding); a test that
    changes its weights calls ``make``."""
    return make().ensure_built()


def test_shapes_attention_rows_and_the_grid(built):
    model = built
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


def test_the_doubly_stochastic_penalty_is_the_papers_sum_over_real_steps(built):
    model = built
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
    for _ in range(2):
        with tf.GradientTape() as tape:
            value = loss()
        grads = tape.gradient(value, model.trainable_variables)
        assert all(g is not None for g in grads)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert float(loss()) < before


@pytest.mark.parametrize("attention", ["additive", "location_aware"])
def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(attention, built):
    model = built if attention == "additive" else make(attention=attention)  # additive: make()'s
    greedy_agrees_with_teacher_forcing(model, IMAGES, cells=24)  # the grid's L cells


def test_keras_file_round_trip_gives_identical_outputs(tmp_path):
    model = make(attention="location_aware")
    before = keras.ops.convert_to_numpy(model((IMAGES, TARGET_IN)))
    model.save(tmp_path / "sat.keras")
    loaded = keras.models.load_model(tmp_path / "sat.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded((IMAGES, TARGET_IN))), before)
    assert loaded.get_config()["attention_penalty"] == 0.5 and loaded.grid_shape(16, 24) == (4, 6)


def test_beam_search_of_size_one_is_greedy_and_wider_beams_attend_over_the_grid(built):
    from zoo.decoding.beam_search import beam_search

    model = built
    greedy_ids, greedy_weights, _ = greedy_decode(model, IMAGES, max_length=5)
    best = beam_search(model, IMAGES, max_length=5, beam_size=1)
    steps = greedy_ids.shape[1]
    np.testing.assert_array_equal(best["ids"].numpy()[:, :steps], greedy_ids.numpy())
    np.testing.assert_allclose(best["attention"].numpy()[:, :steps], greedy_weights.numpy(), atol=1e-5)
    best = beam_search(model, IMAGES, max_length=5, beam_size=3, beta=0.2)
    assert best["attention"].shape[0] == 3 and best["attention"].shape[-1] == 24


# -- stochastic hard attention (Xu et al. 2015, sec. 4.1): attention_mode="hard" --------------------


def test_multinoulli_draws_one_hot_locations_at_the_distributions_frequencies():
    from zoo.attention.hard_attention import gumbel_noise, multinoulli

    alpha = np.array([0.1, 0.6, 0.0, 0.3], "float32")
    draws = 4000
    noise = gumbel_noise((draws, 4), "float32", keras.random.SeedGenerator(7))
    s = keras.ops.convert_to_numpy(multinoulli(np.tile(alpha, (draws, 1)), noise))
    assert set(np.unique(s)) == {0.0, 1.0} and np.all(s.sum(-1) == 1)
    # Each frequency within 4 standard errors of alpha_i (sqrt(0.25 / 4000) < 0.008); weight 0 never drawn.
    np.testing.assert_allclose(s.mean(0), alpha, atol=0.032)
    assert s[:, 2].sum() == 0


def test_hard_mode_samples_one_location_per_step_and_tests_with_the_expectation():
    model = make(attention_mode="hard", expectation_rate=0.0)
    features, alpha, s, expected = model._teacher_forced(IMAGES, TARGET_IN, training=True)
    s, alpha = keras.ops.convert_to_numpy(s), keras.ops.convert_to_numpy(alpha)
    assert s.shape == (3, 4, 24) and set(np.unique(s)) == {0.0, 1.0} and np.all(s.sum(-1) == 1)
    assert np.all(alpha[s == 1] > 0) and np.all(keras.ops.convert_to_numpy(expected) == 0)
    # z_t's context is the drawn cell's annotation vector: beta_t a_{s_t} at the first step.
    memory = model.encode(IMAGES)
    h0 = keras.ops.convert_to_numpy(memory["initial_states"][0])
    beta = keras.ops.convert_to_numpy(model.gate(h0))
    a = keras.ops.convert_to_numpy(memory["memory"])
    z0 = keras.ops.convert_to_numpy(features)[:, 0, 12 + 8:]
    np.testing.assert_allclose(z0, beta * a[np.arange(3), s[:, 0].argmax(-1)], rtol=1e-5, atol=1e-6)
    # At test time the context is the expectation: the same logits as the soft model with the same weights.
    soft = make()
    soft((IMAGES, TARGET_IN))
    model((IMAGES, TARGET_IN))
    hard_weights = {v.path: v for v in model.weights}
    for v in soft.weights:
        v.assign(hard_weights[v.path])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model((IMAGES, TARGET_IN))),
                               keras.ops.convert_to_numpy(soft((IMAGES, TARGET_IN))), rtol=1e-5, atol=1e-6)
    assert len(model.losses) == 1  # the doubly stochastic penalty only: no REINFORCE term at test time


def test_the_surrogates_gradient_is_the_reinforce_and_entropy_terms_of_eq_12():
    import tensorflow as tf

    from zoo.models.vision.show_attend_tell import reinforce_surrogate

    e = tf.Variable([[[0.5, -1.0, 2.0], [0.0, 0.3, -0.2]], [[1.0, 1.0, 0.0], [0.7, -0.4, 0.1]]])  # [B=2, T=2, L=3]
    s = np.array([[[0, 1, 0], [0, 0, 1]], [[1, 0, 0], [0, 1, 0]]], "float32")
    reward, baseline, lam = np.array([-2.0, -0.5], "float32"), -1.25, 0.1
    steps = np.array([[1, 1], [1, 0]], "float32")  # the second string has one real step
    sampled = np.array([1.0, 1.0], "float32")
    with tf.GradientTape() as tape:
        loss = reinforce_surrogate(tf.nn.softmax(e), s, reward, baseline, steps, sampled, lam)
    grad = tape.gradient(loss, e).numpy()
    alpha = tf.nn.softmax(e).numpy()
    entropy = -(alpha * np.log(alpha)).sum(-1, keepdims=True)
    # d log alpha_s / de = s - alpha; dH / de = -alpha (log alpha + H); N = 3 real steps.
    expected = -((reward - baseline)[:, None, None] * (s - alpha) - lam * alpha * (np.log(alpha) + entropy))
    expected = expected * steps[..., None] / 3.0
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)
    # A string given the expectation (sampled 0) keeps only its entropy term.
    with tf.GradientTape() as tape:
        loss = reinforce_surrogate(tf.nn.softmax(e), s, reward, baseline, steps, np.array([1.0, 0.0], "float32"), lam)
    grad = tape.gradient(loss, e).numpy()
    np.testing.assert_allclose(grad[1, 0], lam * alpha[1, 0] * (np.log(alpha[1, 0]) + entropy[1, 0]) / 3.0, rtol=1e-5)


def test_hard_mode_adds_the_surrogate_with_the_strings_log_likelihood_and_moves_the_baseline():
    model = make(attention_mode="hard", expectation_rate=0.0, attention_penalty=0.0, baseline_decay=0.75)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model.target_output(TARGET_IN)), TARGET_OUT)
    logits = model((IMAGES, TARGET_IN), training=True)
    (surrogate,) = model.losses
    assert float(surrogate) == 0.0  # x - sg(x): only its gradient counts, the logged loss stays the token loss
    log_p = keras.ops.convert_to_numpy(keras.ops.log_softmax(logits, -1))
    rows = np.arange(3)[:, None], np.arange(4)[None, :]
    reward = (log_p[rows[0], rows[1], TARGET_OUT] * (TARGET_OUT != 0)).sum(-1)
    np.testing.assert_allclose(float(model.baseline), 0.25 * reward.mean(), rtol=1e-5)  # b_1 = 0.75 * 0 + 0.25 R


def test_hard_mode_lowers_the_loss_on_a_fixed_batch():
    import tensorflow as tf

    model = make(attention_mode="hard", expectation_rate=0.0)
    optimizer = keras.optimizers.Adam(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)

    def token_loss():  # the expectation's loss at test time
        return float(loss_fn(TARGET_OUT, model((IMAGES, TARGET_IN))))

    before = token_loss()
    attention_weights = {id(v) for v in model.attention.trainable_variables}
    for _ in range(2):
        with tf.GradientTape() as tape:
            value = loss_fn(TARGET_OUT, model((IMAGES, TARGET_IN), training=True)) + tf.add_n(model.losses)
        grads = tape.gradient(value, model.trainable_variables)
        # f_att learns through the REINFORCE and entropy terms: no gradient goes through the sample.
        assert all(g is not None for v, g in zip(model.trainable_variables, grads) if id(v) in attention_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert token_loss() < before


def test_hard_mode_round_trips_and_refuses_a_second_sampler():
    model = make(attention_mode="hard", entropy_weight=0.05)
    config = model.get_config()
    assert (config["attention_mode"], config["entropy_weight"], config["baseline_decay"],
            config["expectation_rate"]) == ("hard", 0.05, 0.9, 0.5)
    with pytest.raises(ValueError, match="attention_mode"):
        make(attention_mode="hard", attention="hard")
    with pytest.raises(ValueError, match="attention_mode"):
        make(attention_mode="sharp")


@pytest.mark.slow
def test_hard_attention_trains_through_the_lifecycle(tmp_path, monkeypatch):
    import math

    from zoo.training import train

    from conftest import compose, empty_store

    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = train(compose(["model=show_attend_tell", "data=digit_strings", "debug=smoke", "model.attention_mode=hard",
                            "model.hidden_size=16", "model.filters=4",
                            # the run's figures, predictions, export and pyfunc wrapper do not depend on the
                            # attention mode (tests/training and tests/export run them)
                            "tracking.attention_plots=0", "tracking.log_pyfunc=false", "tracking.export=false",
                            "tracking.predictions=0"]))
    assert 0 <= result["test_exact_match"] <= 1 and math.isfinite(result["test_digit_error_rate"])
