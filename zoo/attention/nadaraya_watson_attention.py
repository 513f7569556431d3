"""Nadaraya-Watson kernel regression written as attention pooling."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import masked_softmax, register_attention

KERNELS = ("gaussian", "boxcar", "epanechnikov")


@register_attention("nadaraya_watson")
@keras.saving.register_keras_serializable(package="zoo")
class NadarayaWatsonAttention(keras.layers.Layer):
    """Nadaraya-Watson kernel regression as attention pooling (Nadaraya 1964; Watson 1964).

    ``f(x) = sum_i alpha(x, x_i) y_i`` with ``alpha(x, x_i) = K(u_i) / sum_j K(u_j)``
    (d2l.ai, sec. 10.2 "Attention Pooling: Nadaraya-Watson Kernel Regression"), the query
    ``x``, keys ``x_i`` and values ``y_i``, and ``u_i = (x - x_i) / h`` for the bandwidth ``h``.
    Kernels: ``gaussian`` ``K(u) = exp(-u^2 / 2)``, so ``alpha = softmax(-(x - x_i)^2 / (2 h^2))``;
    ``boxcar`` ``K(u) = 1[|u| <= 1]``; ``epanechnikov`` ``K(u) = 3/4 max(0, 1 - u^2)``
    (d2l's code calls its triangular kernel ``1 - |u|`` "Epanechikov"; this is the textbook one).

    ``parametric=True`` learns the weight ``w`` of d2l's parametric attention pooling (sec. 10.2.4),
    ``u_i = (x - x_i) w``, ``alpha = softmax(-((x - x_i) w)^2 / 2)`` for the Gaussian;
    ``w`` starts at ``1 / bandwidth``, so the untrained layer equals the non-parametric one.

    A query with no key inside the kernel's support (boxcar, Epanechnikov) or with every key
    masked gets ``f(x) = 0`` and all-zero weights, not NaN.

    Shapes: ``B`` batch, ``Tq`` queries, ``Tk`` key-value pairs, ``Dy`` value features.
    Cost: ``O(B Tq Tk Dy)`` time, ``O(B Tq Tk)`` memory.

    Args:
        kernel: ``"gaussian"``, ``"boxcar"`` or ``"epanechnikov"``.
        bandwidth: positive float ``h``.
        parametric: bool, learn ``w`` (one scalar weight).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        queries: ``x`` as ``[B, Tq]`` or ``[B, Tq, 1]``.
        keys: ``x_i`` as ``[B, Tk]`` or ``[B, Tk, 1]``.
        values: ``y_i`` as ``[B, Tk]`` or ``[B, Tk, Dy]``.
        keys_mask: optional bool ``[B, Tk]``, True = use this pair (Keras masks are used).
        return_attention_scores: bool, also return the weights.

    Returns:
        ``f [B, Tq]`` for values ``[B, Tk]`` (``[B, Tq, Dy]`` for values ``[B, Tk, Dy]``), or
        ``(f, weights [B, Tq, Tk])`` with ``return_attention_scores=True``.

    Example:
        >>> import numpy as np
        >>> layer = NadarayaWatsonAttention(kernel="gaussian", bandwidth=1.0)
        >>> f, w = layer(np.array([[0.0]]), np.array([[0.0, 1.0]]), np.array([[1.0, 3.0]]),
        ...              return_attention_scores=True)
        >>> np.round(np.asarray(w, "float64"), 3).tolist(), round(float(f[0, 0]), 3)
        ([[[0.622, 0.378]]], 1.755)

    References:
        Zhang, Lipton, Li, Smola. Dive into Deep Learning, sec. 10.2 "Attention Pooling:
        Nadaraya-Watson Kernel Regression" (sec. 11.2 "Attention Pooling by Similarity" in
        later editions). https://d2l.ai
        Nadaraya. On Estimating Regression. Theory Probab. Appl. 1964. Watson. Smooth
        Regression Analysis. Sankhya A 1964.
    """

    def __init__(self, kernel="gaussian", bandwidth=1.0, parametric=False, **kwargs):
        super().__init__(**kwargs)
        self.kernel = checks.choice("kernel", kernel, KERNELS)
        self.bandwidth = checks.positive_float("bandwidth", bandwidth)
        self.parametric = checks.boolean("parametric", parametric)
        self.supports_masking = True

    def build(self, queries_shape, keys_shape, values_shape):
        if self.parametric:
            self.w = self.add_weight(name="w", shape=(), initializer=keras.initializers.Constant(1.0 / self.bandwidth))

    @staticmethod
    def _flatten(x):
        return x[..., 0] if len(x.shape) == 3 else x

    def call(self, queries, keys, values, *, keys_mask=None, return_attention_scores=False):
        queries = self._flatten(ops.convert_to_tensor(queries, self.compute_dtype))
        keys = self._flatten(ops.convert_to_tensor(keys, self.compute_dtype))
        values = ops.convert_to_tensor(values, self.compute_dtype)
        difference = ops.expand_dims(queries, -1) - ops.expand_dims(keys, -2)  # x - x_i: [B, Tq, Tk]
        if self.parametric:
            u = difference * ops.cast(self.w, difference.dtype)
        else:
            u = difference / ops.cast(self.bandwidth, difference.dtype)
        mask = None if keys_mask is None else ops.expand_dims(ops.cast(keys_mask, "bool"), -2)
        if self.kernel == "gaussian":
            weights = masked_softmax(-ops.square(u) / 2.0, mask)
        else:
            if self.kernel == "boxcar":
                k = ops.cast(ops.abs(u) <= 1.0, u.dtype)
            else:
                k = 0.75 * ops.maximum(1.0 - ops.square(u), 0.0)
            if mask is not None:
                k = k * ops.cast(mask, k.dtype)
            total = ops.sum(k, axis=-1, keepdims=True)
            weights = k / ops.where(total > 0, total, ops.ones_like(total))
        if len(values.shape) == 2:
            output = ops.einsum("bqk,bk->bq", weights, values)
        else:
            output = ops.matmul(weights, values)
        if return_attention_scores:
            return output, weights
        return output

    def compute_mask(self, queries, previous_mask=None):
        return None

    def get_config(self):
        config = super().get_config()
        config.update({"kernel": self.kernel, "bandwidth": self.bandwidth, "parametric": self.parametric})
        return config
