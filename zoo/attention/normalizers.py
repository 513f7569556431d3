"""The normalisers that turn an alignment attention's scores into weights: ``softmax``, ``sparsemax``
and ``entmax15``, each over the unmasked positions of a row.

All three map a score vector ``z`` to a point of the probability simplex ``Delta``; softmax gives
every position some weight, sparsemax and 1.5-entmax give exactly 0 to positions whose score is far
enough below the best ones, so an attention row can ignore most of the source (the attention
entropy logged with every run shows it).

- ``softmax(z)_i = exp(z_i) / sum_j exp(z_j)``.
- ``sparsemax(z) = argmin_{p in Delta} ||p - z||^2`` (Martins & Astudillo 2016, eq. 2), in closed
  form ``sparsemax_i(z) = [z_i - tau(z)]_+`` with, for ``z_(1) >= ... >= z_(K)`` sorted,
  ``k(z) = max{k : 1 + k z_(k) > sum_{j <= k} z_(j)}`` and ``tau(z) = (sum_{j <= k(z)} z_(j) - 1) / k(z)``
  (Algorithm 1, eq. 3 and 4).
- ``entmax15(z) = argmax_{p in Delta} p^T z + H^T_1.5(p)`` with Tsallis' entropy ``H^T_alpha``
  (Peters, Niculae & Martins 2019, eq. 9 with ``alpha = 1.5``), in closed form
  ``entmax15_i(z) = [z_i / 2 - tau]_+^2``. With ``x = z / 2`` sorted, for each ``k`` the threshold
  that makes the ``k`` largest sum to 1 is ``tau_k = M_k - sqrt((1 - S_k) / k)``, ``M_k`` the mean
  of ``x_(1..k)`` and ``S_k = sum_{j <= k} (x_(j) - M_k)^2``; the support is the ``k`` with
  ``tau_k <= x_(k)`` (Peters et al. 2019, Algorithm 2: the exact sort-based algorithm).

Gradients are autodiff's through these closed forms: away from ties between a score and the
threshold the support is locally constant, so ``tau`` is a smooth function of the scores in the
support and the chain rule gives the true Jacobian (sparsemax: ``diag(s) - s s^T / |S|``, Martins &
Astudillo 2016, eq. 12; entmax: Peters et al. 2019, Proposition 2); ``tests/attention/
test_normalizers.py`` checks them against finite differences. The support size is found without a
gradient (it is a count), the threshold is gathered from cumulative sums over the sorted scores.

Masks: ``mask`` bool, True = attend, broadcastable to the scores. Masked positions get exactly 0,
whatever their score; a row with nothing to attend to gets all zeros, not NaN. Half-precision
scores (float16, bfloat16) are normalised in float32 and cast back.

References:
    Martins, Astudillo. From Softmax to Sparsemax: A Sparse Model of Attention and Multi-Label
    Classification. ICML 2016. https://arxiv.org/abs/1602.02068
    Peters, Niculae, Martins. Sparse Sequence-to-Sequence Models. ACL 2019.
    https://arxiv.org/abs/1905.05702
"""

import keras
from keras import ops

NAMES = ("softmax", "sparsemax", "entmax15")  # the ``normalizer`` choices of every alignment attention


def large_negative(dtype):
    """The masking constant for ``dtype``: -65504 for float16, -1e9 otherwise."""
    # standardize_dtype: a backend dtype object (tf.float16) does not print as "float16".
    return -65504.0 if keras.backend.standardize_dtype(dtype) == "float16" else -1e9


def softmax(scores, mask=None, axis=-1):
    """Softmax of ``scores`` over ``axis`` where ``mask`` (bool, True = attend) is True.

    Masked positions get exactly 0 weight, and a row with nothing to attend to gets all
    zeros (not NaN, not a uniform distribution).

    Args:
        scores: float tensor, e.g. ``[B, Tq, Tv]`` or ``[B, H, Tq, Tv]``.
        mask: optional bool tensor broadcastable to ``scores``.
        axis: the axis to normalize over.

    Returns:
        Weights of the shape of ``scores``.

    Example:
        >>> import numpy as np
        >>> w = softmax(np.array([[1.0, 2.0, 3.0]]), np.array([[True, True, False]]))
        >>> np.round(np.asarray(keras.ops.convert_to_numpy(w), "float64"), 3).tolist()
        [[0.269, 0.731, 0.0]]
    """
    scores = ops.convert_to_tensor(scores)
    if mask is None:
        return ops.softmax(scores, axis=axis)
    mask = ops.cast(mask, "bool")
    scores = ops.where(mask, scores, ops.cast(large_negative(scores.dtype), scores.dtype))
    weights = ops.softmax(scores, axis=axis)
    return weights * ops.cast(mask, weights.dtype)


def sparsemax(scores, mask=None, axis=-1):
    """Sparsemax of ``scores`` over ``axis``: the Euclidean projection onto the simplex,
    ``[z_i - tau(z)]_+`` (Martins & Astudillo 2016, eq. 2-4), over the unmasked positions.

    Args:
        scores: float tensor, e.g. ``[B, Tq, Tv]``.
        mask: optional bool tensor broadcastable to ``scores``, True = attend.
        axis: the axis to normalize over.

    Returns:
        Weights of the shape of ``scores``: each row sums to 1 (or is all 0 when fully masked);
        masked positions, and positions scoring at or below ``tau``, are exactly 0.

    Example:
        >>> import numpy as np
        >>> np.asarray(keras.ops.convert_to_numpy(sparsemax(np.array([1.0, 0.5, -1.0]))), "float64").tolist()
        [0.75, 0.25, 0.0]
        >>> w = sparsemax(np.array([[0.5, 2.0, 1.0]]), np.array([[True, False, True]]))
        >>> np.asarray(keras.ops.convert_to_numpy(w), "float64").tolist()
        [[0.25, 0.0, 0.75]]
    """
    return _normalize(_sparsemax, scores, mask, axis)


def entmax15(scores, mask=None, axis=-1):
    """1.5-entmax of ``scores`` over ``axis``: ``[z_i / 2 - tau]_+^2`` with ``tau`` such that the
    row sums to 1 (Peters et al. 2019, eq. 9 with ``alpha = 1.5``, Algorithm 2), over the unmasked
    positions. Sparse like sparsemax, smoother: between softmax (``alpha = 1``) and sparsemax
    (``alpha = 2``).

    Args:
        scores: float tensor, e.g. ``[B, Tq, Tv]``.
        mask: optional bool tensor broadcastable to ``scores``, True = attend.
        axis: the axis to normalize over.

    Returns:
        Weights of the shape of ``scores``: each row sums to 1 (or is all 0 when fully masked);
        masked positions, and positions with ``z_i / 2 <= tau``, are exactly 0.

    Example:
        >>> import numpy as np
        >>> w = entmax15(np.array([1.0, 0.5, -1.0]))
        >>> np.round(np.asarray(keras.ops.convert_to_numpy(w), "float64"), 4).tolist()
        [0.674, 0.326, 0.0]
        >>> w = entmax15(np.array([[0.0, 0.0, 0.0, 9.0]]), np.array([[True, True, True, False]]))
        >>> np.round(np.asarray(keras.ops.convert_to_numpy(w), "float64"), 4).tolist()
        [[0.3333, 0.3333, 0.3333, 0.0]]
    """
    return _normalize(_entmax15, scores, mask, axis)


def get(name):
    """The normaliser called ``name`` (one of ``NAMES``): ``fn(scores, mask=None, axis=-1)``."""
    functions = {"softmax": softmax, "sparsemax": sparsemax, "entmax15": entmax15}
    if name not in functions:
        raise ValueError(f"Unknown normalizer '{name}'. Available: {', '.join(NAMES)}")
    return functions[name]


# -- the sort-based algorithms, over the last axis --------------------------------------------------
def _normalize(algorithm, scores, mask, axis):
    """``algorithm(z, valid)`` over the last axis of ``scores`` moved there from ``axis``, in float32
    for half-precision scores, with masked positions exactly 0."""
    scores = ops.convert_to_tensor(scores)
    dtype = keras.backend.standardize_dtype(scores.dtype)
    z = ops.cast(scores, "float32") if dtype in ("float16", "bfloat16") else scores
    if mask is None:
        valid = ops.ones(ops.shape(z), dtype="bool")
    else:
        valid = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(z))
    last = axis in (-1, len(z.shape) - 1)
    if not last:
        z, valid = ops.moveaxis(z, axis, -1), ops.moveaxis(valid, axis, -1)
    weights = algorithm(z, valid)
    if not last:
        weights = ops.moveaxis(weights, -1, axis)
    return ops.cast(weights, dtype)


def _sorted_valid(z, valid):
    """``z`` sorted in decreasing order along the last axis, masked positions last, with the masked
    ones set to 0 (``sorted_z``), and the ranks ``k = 1..K`` with ``k <= n`` (the unmasked count) as
    ``sorted_valid``. Returns ``(z_filled, sorted_z, ranks, sorted_valid)``."""
    z_filled = ops.where(valid, z, ops.cast(large_negative(z.dtype), z.dtype))  # masked: sorted last
    sorted_z = ops.flip(ops.sort(z_filled, axis=-1), axis=-1)  # z_(1) >= z_(2) >= ...
    ranks = ops.cast(ops.arange(1, ops.shape(z)[-1] + 1), z.dtype)  # k = 1..K
    count = ops.sum(ops.cast(valid, z.dtype), axis=-1, keepdims=True)  # n: unmasked positions
    sorted_valid = ranks <= count
    return z_filled, ops.where(sorted_valid, sorted_z, ops.zeros_like(sorted_z)), ranks, sorted_valid


def _at_support_size(values, support):
    """``values[..., k - 1]`` for the support size ``k [..., 1]`` (at least 1: a fully masked row)."""
    index = ops.cast(ops.maximum(support, 1), "int32") - 1
    return ops.take_along_axis(values, index, axis=-1)


def _sparsemax(z, valid):
    z_filled, sorted_z, ranks, sorted_valid = _sorted_valid(z, valid)
    cumulative = ops.cumsum(sorted_z, axis=-1)  # sum_{j <= k} z_(j)
    in_support = ops.logical_and(1.0 + ranks * sorted_z > cumulative, sorted_valid)  # Algorithm 1
    support = ops.stop_gradient(ops.sum(ops.cast(in_support, z.dtype), axis=-1, keepdims=True))  # k(z)
    tau = (_at_support_size(cumulative, support) - 1.0) / ops.maximum(support, 1.0)  # eq. 4
    return ops.relu(ops.where(valid, z_filled - tau, ops.zeros_like(z)))  # [z_i - tau]_+, eq. 3


def _entmax15(z, valid):
    # x = (alpha - 1) z = z / 2, shifted by its maximum (entmax is shift-invariant; the shift keeps
    # the squares below small); masked positions are filled, sorted last and left out of the sums.
    x = ops.where(valid, z, ops.cast(large_negative(z.dtype), z.dtype)) / 2.0
    x = x - ops.stop_gradient(ops.max(x, axis=-1, keepdims=True))
    _, sorted_x, ranks, sorted_valid = _sorted_valid(x, valid)
    sum_x = ops.cumsum(sorted_x, axis=-1)
    sum_squares = ops.cumsum(ops.square(sorted_x), axis=-1)

    def threshold(total, total_squares, k):  # tau_k: sum_{j <= k} (x_(j) - tau_k)^2 = 1
        mean = total / k
        spread = total_squares - k * ops.square(mean)  # S_k = sum_{j <= k} (x_(j) - M_k)^2
        return mean - ops.sqrt(ops.maximum((1.0 - spread) / k, 0.0))

    taus = ops.stop_gradient(threshold(sum_x, sum_squares, ranks))
    in_support = ops.logical_and(taus <= ops.stop_gradient(sorted_x), sorted_valid)  # Algorithm 2
    support = ops.stop_gradient(ops.sum(ops.cast(in_support, z.dtype), axis=-1, keepdims=True))
    k = ops.maximum(support, 1.0)
    tau = threshold(_at_support_size(sum_x, support), _at_support_size(sum_squares, support), k)
    return ops.square(ops.relu(ops.where(valid, x - tau, ops.zeros_like(x))))  # [x_i - tau]_+^2
