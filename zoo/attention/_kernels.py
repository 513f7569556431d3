"""TensorFlow's own kernels for small attention products, in place of oneDNN's (private to
``zoo.attention``; the reasons and figures are in ``_products``' docstring): ``BatchMatMulV3``, which
oneDNN does not rewrite, forward and backward, and the size rule that chooses it. No import of
``zoo`` here: ``base_attention`` (every alignment attention's context product, ``mix``) and
``_products`` (multi-head attention) both build on it."""

import keras
from keras import ops

SMALL_WORK = 8192  # Tq * Tk * d of one product at or below which TensorFlow's own kernels run
SMALL_SCORES = 512  # Tq * Tk of one softmax at or below which it runs as exp(log_softmax) (base_attention)


def own_kernels(x) -> bool:
    """Whether TensorFlow's own kernels can stand in for oneDNN's for ``x``: float32 on TensorFlow
    (``base_attention.move_axes``, the small attention products here)."""
    return keras.backend.backend() == "tensorflow" and keras.backend.standardize_dtype(x.dtype) == "float32"


def product(a, b, adj_a=False, adj_b=False):
    """``a b`` (either transposed) by ``BatchMatMulV3``: TensorFlow's kernel, not oneDNN's."""
    import tensorflow as tf

    return tf.raw_ops.BatchMatMulV3(x=a, y=b, adj_x=adj_a, adj_y=adj_b, Tout=a.dtype)


def small_scores(queries, keys):
    """``Q K^T`` with TensorFlow's kernel forward and backward."""
    import tensorflow as tf

    @tf.custom_gradient
    def scores(q, k):
        def grad(g):  # dQ = G K, dK = G^T Q
            return product(g, k), product(g, q, adj_a=True)
        return product(q, k, adj_b=True), grad

    return scores(queries, keys)


def small_mix(weights, values):
    """``W V`` with TensorFlow's kernel forward and backward."""
    import tensorflow as tf

    @tf.custom_gradient
    def mix(w, v):
        def grad(g):  # dW = G V^T, dV = W^T G
            return product(g, v, adj_b=True), product(w, g, adj_a=True)
        return product(w, v), grad

    return mix(weights, values)


def small_work(x, static, dynamic):
    """``Tq Tk d <= SMALL_WORK`` (or one query) from the static sizes ``(Tq, Tk, d)`` (any may be
    None: then ``dynamic()`` gives them as tensors and the answer is a scalar bool tensor); False
    wherever TensorFlow's own kernels are not in play (``own_kernels(x)``)."""
    if not own_kernels(x):
        return False
    if static[0] == 1:
        return True
    if None not in static:
        return static[0] * static[1] * static[2] <= SMALL_WORK
    tq, tk, d = [size if size is not None else tensor for size, tensor in zip(static, dynamic())]
    return tq * tk * d <= SMALL_WORK


def mix(weights, values, small=None):
    """``W V`` for ``weights [..., Tq, Tk]`` and ``values [..., Tk, d]`` (batch axes alike): on
    TensorFlow's own kernel, forward and backward, where ``small`` (by default ``small_work``: ``Tq Tk
    d`` small or one query), else ``keras.ops.matmul``. The alignment attentions' context product
    (``BaseAttention.attend``), forward and backward: ``[64, 1, 9] x [64, 9, 64]`` (``bahdanau``'s step
    at d2l's sizes) 90 -> 31 us, ``[64, 1, 20] x [64, 20, 512]`` (base) 326 -> 253 us; four queries at
    base, ``[64, 4, 20] x [64, 20, 512]``, 456 us on oneDNN against 1,110 on TensorFlow's kernel:
    oneDNN's."""
    if small is None:
        small = small_work(weights, (weights.shape[-2], weights.shape[-1], values.shape[-1]),
                           lambda: (ops.shape(weights)[-2], ops.shape(weights)[-1], ops.shape(values)[-1]))
    return either(small, lambda: small_mix(weights, values), lambda: ops.matmul(weights, values))


def either(small, own, default):
    """``own()`` or ``default()`` as ``small`` (from ``small_work``) says: at trace time, or by a ``cond``."""
    if small is True:
        return own()
    if small is False:
        return default()
    import tensorflow as tf

    return tf.cond(small, own, default)
