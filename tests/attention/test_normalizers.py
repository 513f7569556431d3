"""``zoo.attention.normalizers`` (softmax, sparsemax, 1.5-entmax) and the ``normalizer`` option of every
alignment attention: the values against a bisection for the threshold in float64, hand-computed
cases, the masks (masked weights exactly 0, a fully masked row all 0 and no NaN), the Jacobians
against central finite differences and sparsemax's closed form, and each alignment layer's weights
equal to the normaliser of its scores. Runs on the TensorFlow and JAX backends."""

import inspect

import keras
import numpy as np
import pytest
from keras import ops

import zoo.attention
from zoo.attention import normalizers
from zoo.attention.base_attention import SOFTMAX_ONLY

from attention_helpers import ALIGNMENT_NAMES, fixed_seed, layer_class  # noqa: F401 (fixed_seed: autouse fixture)

SPARSE = ("sparsemax", "entmax15")
K = 7  # positions per row


def numpy_of(x):
    return np.asarray(ops.convert_to_numpy(x), "float64")


def float_dtype():
    """float64 where the backend keeps it (TensorFlow; JAX only with x64 enabled), else float32."""
    return keras.backend.standardize_dtype(ops.convert_to_tensor(np.zeros(1, "float64")).dtype)


def bisection(name, z, valid):
    """The normaliser of one row ``z`` over ``valid`` by bisection on its threshold, in float64:
    ``sum_i [z_i - tau]_+ = 1`` (sparsemax), ``sum_i [z_i / 2 - tau]_+^2 = 1`` (entmax15)."""
    out = np.zeros_like(z)
    if not valid.any():
        return out
    x = z[valid] if name == "sparsemax" else z[valid] / 2.0
    power = 1 if name == "sparsemax" else 2
    low, high = x.max() - 1.0, x.max()  # total >= 1 at low, 0 at high
    for _ in range(200):
        tau = (low + high) / 2
        low, high = (tau, high) if (np.maximum(x - tau, 0) ** power).sum() > 1 else (low, tau)
    out[valid] = np.maximum(x - (low + high) / 2, 0) ** power
    return out


def reference(name, z, valid):
    if name == "softmax":
        e = np.where(valid, np.exp(z - np.where(valid, z, -np.inf).max(axis=-1, keepdims=True)), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return np.stack([bisection(name, row, v) for row, v in zip(z, valid)])


def rows(seed, n=6, margin=0.05):
    """``[n, K]`` scores and a mask (row 1 fully masked, others partly), with every unmasked score at
    least ``margin`` from both thresholds: the supports do not change within a finite-difference step."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n, K)) < 0.8
    mask[:, 0] = True
    mask[1] = False
    z = np.empty((n, K))
    for i in range(n):
        while True:
            z[i] = rng.normal(scale=1.5, size=K)
            gaps = []
            for name, x in (("sparsemax", z[i]), ("entmax15", z[i] / 2)):
                w = bisection(name, z[i], mask[i])
                support = w > 0
                if not support.any():
                    continue
                tau = (x[support] - w[support] ** (1.0 if name == "sparsemax" else 0.5)).mean()
                gaps.append(np.abs(x[mask[i]] - tau).min())
            gaps.append(np.abs(np.subtract.outer(z[i], z[i]))[~np.eye(K, dtype=bool)].min() * 10)  # no ties
            if min(gaps) > margin:
                break
    return z, mask


def jacobian(fn, z):
    """``d fn(z)[r, i] / d z[r, j]`` as ``[n, K, K]`` by autodiff, for ``fn`` acting row by row: row
    ``i`` of every row's Jacobian is the gradient of ``sum_r fn(z)[r, i]``."""
    z = ops.convert_to_tensor(z)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        def gradient(i):
            with tf.GradientTape() as tape:
                tape.watch(z)
                total = ops.sum(fn(z)[:, i])
            return tape.gradient(total, z)
    else:
        import jax

        def gradient(i):
            return jax.grad(lambda x: ops.sum(fn(x)[:, i]))(z)

    return np.stack([numpy_of(gradient(i)) for i in range(z.shape[-1])], axis=1)


def finite_differences(fn, z, step):
    columns = []
    for j in range(z.shape[-1]):
        e = np.zeros_like(z)
        e[:, j] = step
        columns.append((numpy_of(fn(ops.convert_to_tensor(z + e))) - numpy_of(fn(ops.convert_to_tensor(z - e))))
                       / (2 * step))
    return np.stack(columns, axis=-1)  # [n, K (output i), K (input j)]


# -- the functions ---------------------------------------------------------------------------------
def test_hand_computed_cases():
    assert numpy_of(normalizers.sparsemax(np.array([1.0, 0.5, -1.0]))).tolist() == [0.75, 0.25, 0.0]
    # Far apart: all weight on the best; equal: uniform (sparsemax and entmax as softmax would).
    assert numpy_of(normalizers.sparsemax(np.array([3.0, 1.0, 0.0]))).tolist() == [1.0, 0.0, 0.0]
    np.testing.assert_allclose(numpy_of(normalizers.entmax15(np.array([2.0, 2.0, 2.0, 2.0]))), [0.25] * 4)
    # 1.5-entmax of [1, 0.5, -1]: x = z / 2 = [0.5, 0.25, -0.5], support {1, 2}, tau = M - sqrt((1 - S) / 2)
    # with M = 0.375, S = 0.03125; p_i = (x_i - tau)^2.
    tau = 0.375 - np.sqrt((1 - 0.03125) / 2)
    np.testing.assert_allclose(numpy_of(normalizers.entmax15(np.array([1.0, 0.5, -1.0]))),
                               [(0.5 - tau) ** 2, (0.25 - tau) ** 2, 0.0], rtol=1e-6)
    # A masked position is left out however high it scores.
    w = numpy_of(normalizers.sparsemax(np.array([[1.0, 9.0, 0.5, -1.0]]), np.array([[True, False, True, True]])))
    assert w.tolist() == [[0.75, 0.0, 0.25, 0.0]]


@pytest.mark.parametrize("name", normalizers.NAMES)
def test_values_equal_a_bisection_for_the_threshold(name):
    z, mask = rows(seed=1)
    dtype = float_dtype()
    got = numpy_of(normalizers.get(name)(ops.convert_to_tensor(z.astype(dtype)), mask))
    np.testing.assert_allclose(got, reference(name, z, mask), atol=1e-12 if dtype == "float64" else 1e-6)
    assert np.all(got[~mask] == 0.0) and np.all(got[1] == 0.0)  # masked exactly 0; row 1 fully masked
    np.testing.assert_allclose(got.sum(axis=-1), [1, 0, 1, 1, 1, 1], atol=1e-6)
    if name != "softmax":
        assert np.any(got[mask] == 0.0)  # exact zeros among the attended positions


@pytest.mark.parametrize("name", normalizers.NAMES)
def test_without_a_mask_and_over_another_axis(name):
    z, _ = rows(seed=2)
    fn = normalizers.get(name)
    plain = numpy_of(fn(z))
    np.testing.assert_allclose(plain, reference(name, z, np.ones_like(z, bool)), atol=1e-6)
    np.testing.assert_allclose(numpy_of(fn(z.T, axis=0)), plain.T, atol=1e-12)
    batched = numpy_of(fn(np.stack([z, z + 1.0]), np.ones((2, *z.shape), bool), axis=-1))  # shift-invariant
    np.testing.assert_allclose(batched, np.stack([plain, plain]), atol=1e-6)


@pytest.mark.parametrize("name", normalizers.NAMES)
def test_half_precision_is_normalised_in_float32(name):
    z, mask = rows(seed=3)
    got = normalizers.get(name)(ops.convert_to_tensor(z.astype("float16")), mask)
    assert keras.backend.standardize_dtype(got.dtype) == "float16"
    np.testing.assert_allclose(numpy_of(got), reference(name, z.astype("float16").astype("float64"), mask),
                               atol=2e-3)
    assert np.all(numpy_of(got)[~mask] == 0.0)


@pytest.mark.parametrize("name", normalizers.NAMES)
def test_jacobians_equal_finite_differences(name):
    """Autodiff through the closed forms is the true Jacobian away from ties: checked against
    central differences on random rows (scores at least 0.05 from the threshold), masked positions
    included (their rows and columns 0), and a fully masked row (all 0, no NaN)."""
    dtype = float_dtype()
    step, tolerance = (1e-6, 1e-7) if dtype == "float64" else (1e-3, 2e-3)
    fn = normalizers.get(name)
    for seed in (4, 5, 6):
        z, mask = rows(seed)
        z = z.astype(dtype)

        def apply(scores, mask=mask):
            return fn(scores, mask)

        got = jacobian(apply, z)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, finite_differences(apply, z, step), atol=tolerance)
        assert np.all(got[~mask] == 0.0) and np.all(np.transpose(got, (0, 2, 1))[~mask] == 0.0)
        assert np.all(got[1] == 0.0)
        if name == "sparsemax":  # Martins & Astudillo 2016, eq. 12: J = diag(s) - s s^T / |S|
            support = (numpy_of(apply(ops.convert_to_tensor(z))) > 0).astype("float64")
            closed = np.stack([np.diag(s) - np.outer(s, s) / max(s.sum(), 1) for s in support])
            np.testing.assert_allclose(got, closed, atol=1e-6)


def test_unknown_normaliser_lists_the_choices():
    with pytest.raises(ValueError, match=r"Unknown normalizer 'foo'\. Available: softmax, sparsemax, entmax15"):
        normalizers.get("foo")


# -- the normalizer option of the alignment attentions --------------------------------------------
def _options(name, normalizer):
    # local_p multiplies the weights by a Gaussian by default (rows then sum to less than 1).
    return {"normalizer": normalizer, **({"gaussian": False} if name == "local_p" else {})}


@pytest.mark.parametrize("name", ALIGNMENT_NAMES)
def test_every_alignment_attention_takes_a_normalizer(name):
    """The weights are the normaliser of the layer's scores over the unmasked keys (rows sum to 1,
    masked keys and a query with nothing to attend to exactly 0), for every alignment attention
    but those that take softmax only, which refuse the others naming them."""
    if len(layer_class(name).normalizers) == 1:  # SOFTMAX_ONLY and their subclasses
        assert name in SOFTMAX_ONLY or issubclass(layer_class(name), tuple(layer_class(n) for n in SOFTMAX_ONLY))
        with pytest.raises(ValueError, match=r"argument `normalizer`, expected one of 'softmax'\. "
                                             r"Received: normalizer='sparsemax'"):
            zoo.attention.create(name, normalizer="sparsemax")
        return
    rng = np.random.default_rng(0)
    query = rng.normal(size=(2, 4, 6)).astype("float32")
    value = rng.normal(scale=2.0, size=(2, 5, 6)).astype("float32")
    value_mask = np.array([[True, True, True, True, False], [False] * 5])
    for normalizer in normalizers.NAMES:
        layer = zoo.attention.create(name, **_options(name, normalizer))
        output, weights = layer(query, value, value_mask=value_mask, return_attention_scores=True)
        weights, output = numpy_of(weights), numpy_of(output)
        keys = layer.prepare(ops.convert_to_tensor(value))
        if "previous_weights" in inspect.signature(layer.attend).parameters:  # location_aware: query i's score
            previous = np.concatenate([numpy_of(layer.initial_weights(value_mask))[:, None], weights[:, :-1]], 1)
            keys = layer.locate(keys, previous.astype("float32"))  # sees the weights of query i - 1
        scores = layer.score(ops.convert_to_tensor(query), keys)
        expected = numpy_of(normalizers.get(normalizer)(scores, value_mask[:, None, :]))
        np.testing.assert_allclose(weights, expected, atol=1e-6, err_msg=f"{name} {normalizer}")
        np.testing.assert_allclose(weights[0].sum(axis=-1), 1.0, atol=1e-5)
        assert np.all(weights[0, :, 4] == 0.0) and np.all(weights[1] == 0.0)
        assert np.all(np.isfinite(output))
        assert type(layer).from_config(layer.get_config()).normalizer == normalizer


def test_sparsemax_attention_on_a_hand_made_example():
    """Dot scores [1, 0.5, -1] of one query: sparsemax [0.75, 0.25, 0], so the context is
    0.75 h_1 + 0.25 h_2; with h_1 masked, [0.5, -1] gives [1, 0]; 1.5-entmax [0.674, 0.326, 0]."""
    query = np.array([[[1.0]]], "float32")
    keys = np.array([[[1.0], [0.5], [-1.0]]], "float32")
    values = np.array([[[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]], "float32")
    layer = zoo.attention.create("dot", normalizer="sparsemax")
    output, weights = layer(query, values, keys, return_attention_scores=True)
    np.testing.assert_allclose(numpy_of(weights), [[[0.75, 0.25, 0.0]]], atol=1e-7)
    assert numpy_of(weights)[0, 0, 2] == 0.0
    np.testing.assert_allclose(numpy_of(output), [[[0.75, 0.25]]], atol=1e-7)
    _, weights = layer(query, values, keys, value_mask=np.array([[False, True, True]]), return_attention_scores=True)
    assert numpy_of(weights).tolist() == [[[0.0, 1.0, 0.0]]]
    entmax = zoo.attention.create("dot", normalizer="entmax15")
    _, weights = entmax(query, values, keys, return_attention_scores=True)
    np.testing.assert_allclose(numpy_of(weights), [[[0.67399, 0.32601, 0.0]]], atol=1e-5)
    assert numpy_of(weights)[0, 0, 2] == 0.0


def test_a_bad_normalizer_is_refused_eagerly_naming_the_choices():
    with pytest.raises(ValueError) as info:
        zoo.attention.create("additive", normalizer="foo")
    assert str(info.value) == ("Received an invalid value for argument `normalizer`, expected one of 'softmax', "
                               "'sparsemax', 'entmax15'. Received: normalizer='foo'")


@pytest.mark.slow
@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="train() runs on TensorFlow (tf.data, tf.function)")
@pytest.mark.parametrize("model, normalizer, export", [("luong", "sparsemax", "true"), ("bahdanau", "entmax15", "false")])
def test_a_model_trains_with_a_sparse_normalizer(model, normalizer, export, tmp_path, monkeypatch):
    """``python train.py model=luong model.attention_options.normalizer=sparsemax debug=smoke`` (and
    bahdanau with entmax15) in process: the run finishes, exports (the SavedModel decodes with the
    sparse weights), and logs the normaliser and the attention's share of exact zeros."""
    import mlflow

    from zoo import kernels
    from zoo.training import train

    from conftest import compose, empty_store

    monkeypatch.setitem(kernels._state, "mode", None)  # train() sets the mode for the process: put it back after
    uri = empty_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    result = train(compose([f"model={model}", f"model.attention_options.normalizer={normalizer}", "debug=smoke",
                            f"tracking.export={export}", "tracking.attention_plots=0", "tracking.log_pyfunc=false",
                            "tracking.predictions=0", "trainer.epochs=1",  # one epoch: the run, its export, its logs
                            "data.train_size=16", "data.val_size=8", "data.test_size=8",
                            f"trainer.checkpoint_dir={tmp_path / 'checkpoints'}"]))
    run = mlflow.MlflowClient(uri).get_run(result["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["model.attention_options.normalizer"] == normalizer
    assert 0.0 <= run.data.metrics["test_attention_zero_share"] <= 1.0
    assert np.isfinite(run.data.metrics["test_attention_entropy"])
