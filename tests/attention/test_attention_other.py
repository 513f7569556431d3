"""Self-attentive embedding, co-attention, attention-over-attention, Nadaraya-Watson vs numpy."""

import keras
import numpy as np
import pytest
from keras import ops

import zoo.attention

from attention_helpers import fixed_seed, gradients, to_numpy  # noqa: F401 (autouse fixture)


def softmax(x, axis=-1, mask=None):
    """Masked softmax: masked entries 0, fully masked slices all 0."""
    mask = np.ones(np.shape(x), bool) if mask is None else np.broadcast_to(mask, np.shape(x))
    x = np.where(mask, x, -1e30)
    e = np.exp(x - x.max(axis=axis, keepdims=True)) * mask
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def rand(rng, *shape):
    return rng.normal(size=shape).astype("float32")


# -- self-attentive sentence embedding (Lin et al. 2017) --------------------------------------

def test_self_attentive_matches_numpy_and_adds_the_penalty():
    rng = np.random.default_rng(0)
    h = rand(rng, 2, 5, 6)
    mask = np.array([[True] * 5, [True, True, True, False, False]])
    layer = zoo.attention.create("self_attentive", units=4, hops=3, penalty=0.5)
    m, a = layer(h, mask=mask, return_attention_scores=True)
    w_s1, w_s2 = to_numpy(layer.ws1.kernel).T, to_numpy(layer.ws2.kernel).T  # [d_a, D], [r, d_a]
    expected_a = softmax(np.einsum("ru,btu->brt", w_s2, np.tanh(np.einsum("ud,btd->btu", w_s1, h))),
                         mask=mask[:, None, :])
    np.testing.assert_allclose(to_numpy(a), expected_a, atol=1e-6)
    assert np.all(to_numpy(a)[1, :, 3:] == 0)
    np.testing.assert_allclose(to_numpy(m), expected_a @ h, atol=1e-5)  # M = A H
    gram = expected_a @ expected_a.transpose(0, 2, 1)
    penalty = 0.5 * np.mean(np.sum((gram - np.eye(3)) ** 2, axis=(1, 2)))
    assert len(layer.losses) == 1
    np.testing.assert_allclose(to_numpy(layer.losses[0]), penalty, rtol=1e-5)


def test_self_attentive_penalty_reaches_a_model_and_is_optional():
    inputs = keras.Input((5, 6))
    model = keras.Model(inputs, zoo.attention.create("self_attentive", units=4, hops=2)(inputs))
    model(np.ones((2, 5, 6), "float32"))
    assert len(model.losses) == 1
    layer = zoo.attention.create("self_attentive", units=4, hops=2, penalty=0.0)
    layer(np.ones((2, 5, 6), "float32"))
    assert layer.losses == []


def test_self_attentive_uses_a_keras_mask():
    rng = np.random.default_rng(1)
    h = rand(rng, 2, 5, 6)
    h[1, 3:] = 0.0
    layer = zoo.attention.create("self_attentive", units=4, hops=2)
    _, a = layer(keras.layers.Masking()(h), return_attention_scores=True)
    assert np.all(to_numpy(a)[1, :, 3:] == 0) and np.all(to_numpy(a)[0] > 0)


# -- co-attention (Lu et al. 2016) ---------------------------------------------------------------

def test_parallel_co_attention_matches_numpy():
    rng = np.random.default_rng(2)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 7, 5)
    q_mask = np.array([[True] * 4, [True, True, False, False]])
    layer = zoo.attention.create("co_attention", units=3)
    q_hat, v_hat, a_q, a_v = layer(q, v, question_mask=q_mask, return_attention_scores=True)
    w_b, w_q, w_v = to_numpy(layer.w_b), to_numpy(layer.w_q.kernel), to_numpy(layer.w_v.kernel)
    c = np.tanh(np.einsum("btd,de,bne->btn", q, w_b, v)) * q_mask[:, :, None]  # C = tanh(Q^T W_b V)
    h_v = np.tanh(v @ w_v + np.einsum("btn,btk->bnk", c, q @ w_q))
    h_q = np.tanh(q @ w_q + np.einsum("btn,bnk->btk", c, v @ w_v))
    e_av = softmax(h_v @ to_numpy(layer.w_hv))
    e_aq = softmax(h_q @ to_numpy(layer.w_hq), mask=q_mask)
    np.testing.assert_allclose(to_numpy(a_v), e_av, atol=1e-6)
    np.testing.assert_allclose(to_numpy(a_q), e_aq, atol=1e-6)
    np.testing.assert_allclose(to_numpy(v_hat), np.einsum("bn,bnd->bd", e_av, v), atol=1e-5)
    np.testing.assert_allclose(to_numpy(q_hat), np.einsum("bt,btd->bd", e_aq, q), atol=1e-5)
    assert np.all(to_numpy(a_q)[1, 2:] == 0)


def test_alternating_co_attention_matches_numpy():
    rng = np.random.default_rng(3)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 7, 5)
    v_mask = np.array([[True] * 7, [True] * 3 + [False] * 4])
    layer = zoo.attention.create("co_attention", units=3, mode="alternating")
    q_hat, v_hat, a_q, a_v = layer(q, v, image_mask=v_mask, return_attention_scores=True)

    def k(name):
        return to_numpy(getattr(layer, name).kernel)

    a1 = softmax(np.tanh(q @ k("w_x1")) @ to_numpy(layer.w_h1))
    s = np.einsum("bt,btd->bd", a1, q)  # step 1: A(Q; 0)
    a2 = softmax(np.tanh(v @ k("w_x2") + (s @ k("w_g2"))[:, None]) @ to_numpy(layer.w_h2), mask=v_mask)
    v_exp = np.einsum("bn,bnd->bd", a2, v)  # step 2: A(V; s)
    a3 = softmax(np.tanh(q @ k("w_x3") + (v_exp @ k("w_g3"))[:, None]) @ to_numpy(layer.w_h3))
    q_exp = np.einsum("bt,btd->bd", a3, q)  # step 3: A(Q; v^)
    np.testing.assert_allclose(to_numpy(a_v), a2, atol=1e-6)
    np.testing.assert_allclose(to_numpy(a_q), a3, atol=1e-6)
    np.testing.assert_allclose(to_numpy(v_hat), v_exp, atol=1e-5)
    np.testing.assert_allclose(to_numpy(q_hat), q_exp, atol=1e-5)
    assert tuple(q_hat.shape) == (2, 6) and tuple(v_hat.shape) == (2, 5)


@pytest.mark.parametrize("mode", ["parallel", "alternating"])
def test_co_attention_fully_masked_side_gives_zeros_and_gradients(mode):
    rng = np.random.default_rng(4)
    q, v = rand(rng, 2, 4, 6), rand(rng, 2, 7, 6)
    v_mask = np.array([[True] * 7, [False] * 7])
    layer = zoo.attention.create("co_attention", units=3, mode=mode)
    q_hat, v_hat = layer(q, v, image_mask=v_mask)
    np.testing.assert_array_equal(to_numpy(v_hat)[1], 0.0)

    def loss_fn(call, q):
        q_hat, v_hat = call(q, v, image_mask=v_mask)
        return ops.sum(q_hat) + ops.sum(v_hat)

    (grad_q,), grads = gradients(layer, loss_fn, [q])
    for g in [grad_q, *grads]:
        assert g is not None and np.all(np.isfinite(g))


# -- attention over attention (Cui et al. 2017) --------------------------------------------------

def test_attention_over_attention_matches_numpy():
    rng = np.random.default_rng(5)
    doc, query = rand(rng, 2, 6, 4), rand(rng, 2, 3, 4)
    doc_mask = np.array([[True] * 6, [True] * 4 + [False] * 2])
    query_mask = np.array([[True] * 3, [True, True, False]])
    layer = zoo.attention.create("attention_over_attention")
    s, alpha, beta = layer(doc, query, document_mask=doc_mask, query_mask=query_mask,
                           return_attention_scores=True)
    m = doc @ query.transpose(0, 2, 1)  # M(i, j)
    mask = doc_mask[:, :, None] & query_mask[:, None, :]
    e_alpha = softmax(m, axis=1, mask=mask)  # column-wise
    e_beta_t = softmax(m, axis=2, mask=mask)  # row-wise
    e_beta = e_beta_t.sum(1) / doc_mask.sum(1, keepdims=True)  # average over the real doc positions
    e_s = np.einsum("bdq,bq->bd", e_alpha, e_beta)
    np.testing.assert_allclose(to_numpy(alpha), e_alpha, atol=1e-6)
    np.testing.assert_allclose(to_numpy(beta), e_beta, atol=1e-6)
    np.testing.assert_allclose(to_numpy(s), e_s, atol=1e-6)
    np.testing.assert_allclose(to_numpy(s).sum(-1), 1.0, atol=1e-5)
    assert np.all(to_numpy(s)[1, 4:] == 0) and layer.weights == []


def test_attention_over_attention_without_masks_and_with_keras_masks():
    rng = np.random.default_rng(6)
    doc, query = rand(rng, 2, 6, 4), rand(rng, 2, 3, 4)
    layer = zoo.attention.create("attention_over_attention")
    s = to_numpy(layer(doc, query))
    m = doc @ query.transpose(0, 2, 1)
    np.testing.assert_allclose(s, np.einsum("bdq,bq->bd", softmax(m, 1), softmax(m, 2).mean(1)), atol=1e-6)
    doc[1, 4:] = 0.0
    s_masked = to_numpy(layer(keras.layers.Masking()(doc), query))
    assert np.all(s_masked[1, 4:] == 0)
    np.testing.assert_allclose(s_masked.sum(-1), 1.0, atol=1e-5)


# -- Nadaraya-Watson kernel regression -------------------------------------------------------

def nadaraya_watson_numpy(x, x_i, y_i, kernel, h):
    u = (x[:, :, None] - x_i[:, None, :]) / h
    k = {"gaussian": np.exp(-u ** 2 / 2), "boxcar": (np.abs(u) <= 1).astype(float),
         "epanechnikov": 0.75 * np.maximum(1 - u ** 2, 0)}[kernel]
    total = k.sum(-1, keepdims=True)
    weights = np.where(total > 0, k / np.where(total > 0, total, 1), 0)
    return np.einsum("bqk,bk->bq", weights, y_i), weights


@pytest.mark.parametrize("kernel", ["gaussian", "boxcar", "epanechnikov"])
@pytest.mark.parametrize("bandwidth", [0.5, 1.0])
def test_nadaraya_watson_matches_numpy(kernel, bandwidth):
    rng = np.random.default_rng(7)
    x_i = np.sort(rng.uniform(0, 5, (2, 20))).astype("float32")
    y_i = (2 * np.sin(x_i) + x_i ** 0.8 + rng.normal(0, 0.5, x_i.shape)).astype("float32")
    x = np.tile(np.arange(0, 5, 0.5, dtype="float32"), (2, 1))
    layer = zoo.attention.create("nadaraya_watson", kernel=kernel, bandwidth=bandwidth)
    f, w = layer(x, x_i, y_i, return_attention_scores=True)
    e_f, e_w = nadaraya_watson_numpy(x.astype("float64"), x_i.astype("float64"), y_i, kernel, bandwidth)
    np.testing.assert_allclose(to_numpy(w), e_w, atol=1e-5)
    np.testing.assert_allclose(to_numpy(f), e_f, atol=1e-4)
    # [B, Tq, 1] queries and [B, Tk, 1] keys are the same thing.
    np.testing.assert_allclose(to_numpy(layer(x[..., None], x_i[..., None], y_i)), to_numpy(f), atol=1e-6)


def test_nadaraya_watson_gaussian_is_the_d2l_softmax():
    x, x_i, y_i = np.array([[1.0]]), np.array([[0.0, 1.0, 3.0]]), np.array([[1.0, 2.0, 5.0]])
    f, w = zoo.attention.create("nadaraya_watson")(x, x_i, y_i, return_attention_scores=True)
    expected = softmax(-((1.0 - x_i) ** 2) / 2)
    np.testing.assert_allclose(to_numpy(w)[0], expected, atol=1e-6)
    np.testing.assert_allclose(to_numpy(f)[0, 0], (expected @ y_i[0])[0], atol=1e-5)


def test_nadaraya_watson_empty_support_and_masks_give_zeros_not_nan():
    x, x_i, y_i = np.array([[10.0, 0.1]]), np.array([[0.0, 0.5]]), np.array([[1.0, 3.0]])
    f, w = zoo.attention.create("nadaraya_watson", kernel="boxcar")(x, x_i, y_i, return_attention_scores=True)
    assert np.all(np.isfinite(to_numpy(f))) and to_numpy(f)[0, 0] == 0 and np.all(to_numpy(w)[0, 0] == 0)
    np.testing.assert_allclose(to_numpy(f)[0, 1], 2.0, atol=1e-6)
    f, w = zoo.attention.create("nadaraya_watson")(x, x_i, y_i, keys_mask=np.array([[False, True]]),
                                                   return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(f), [[3.0, 3.0]], atol=1e-6)
    values = np.ones((1, 2, 3), "float32")
    assert tuple(zoo.attention.create("nadaraya_watson")(x, x_i, values).shape) == (1, 2, 3)


def test_nadaraya_watson_parametric_learns_w():
    rng = np.random.default_rng(8)
    x_i = rng.uniform(0, 5, (1, 30)).astype("float32")
    y_i = (2 * np.sin(x_i)).astype("float32")
    layer = zoo.attention.create("nadaraya_watson", parametric=True, bandwidth=2.0)
    f, w = layer(x_i, x_i, y_i, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(layer.w), 0.5)  # starts at 1 / bandwidth: equals the non-parametric
    fixed = zoo.attention.create("nadaraya_watson", bandwidth=2.0)(x_i, x_i, y_i)
    np.testing.assert_allclose(to_numpy(f), to_numpy(fixed), atol=1e-6)
    u = (x_i[:, :, None] - x_i[:, None, :]) * 0.5
    np.testing.assert_allclose(to_numpy(w), softmax(-u ** 2 / 2), atol=1e-6)  # softmax(-((x - x_i) w)^2 / 2)
    _, (grad,) = gradients(layer, lambda call: ops.mean(ops.square(call(x_i, x_i, y_i) - y_i)))
    assert np.isfinite(grad) and grad != 0
