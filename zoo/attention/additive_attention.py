"""Additive (Bahdanau) attention."""

import math

import keras
from keras import ops

from zoo import kernels
from zoo.attention.base_attention import BaseAttention, register_attention


@register_attention("additive")
@keras.saving.register_keras_serializable(package="zoo")
class AdditiveAttention(BaseAttention):
    """Additive attention of Bahdanau et al. (2015), optionally weight-normalized.

    ``e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j)`` (Bahdanau et al. 2015, eq. A.1.2 / sec. 3.1),
    ``alpha_ij = softmax_j(e_ij)``, ``c_i = sum_j alpha_ij h_j``. With ``normalize=True``
    (normed Bahdanau, Salimans & Kingma 2016 weight normalization as in TF Addons):
    ``e_ij = g * (v_a / ||v_a||)^T tanh(W_a s_{i-1} + U_a h_j + b)``.

    Here ``s_{i-1}`` is the query, ``h_j`` the keys. ``U_a h_j`` does not depend on the query:
    ``prepare_key`` computes it once per source sequence, so a decoder stepping through time
    pays only for ``W_a s_{i-1}`` and the ``tanh`` at each step.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps.

    Args:
        units: size of the hidden layer of the score (``W_a``, ``U_a`` output size); None
            means the key's feature size.
        normalize: bool, weight-normalize ``v_a`` and add the bias ``b``.
        dropout: dropout rate on the attention weights.

    Call arguments:
        See ``BaseAttention``: ``(query, value, key=None, *, query_mask, value_mask,
        attention_mask, use_causal_mask, return_attention_scores, training)``.

    Returns:
        ``output [B, Tq, Dv]`` or ``(output, weights [B, Tq, Tv])``.

    Example:
        >>> import numpy as np
        >>> layer = AdditiveAttention(units=8)
        >>> out, w = layer(np.ones((2, 3, 4)), np.ones((2, 5, 6)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape)
        ((2, 3, 6), (2, 3, 5))

    References:
        Bahdanau, Cho, Bengio. Neural Machine Translation by Jointly Learning to Align and
        Translate. ICLR 2015. https://arxiv.org/abs/1409.0473
    """

    def __init__(self, units=None, normalize=False, dropout=0.0, **kwargs):
        super().__init__(dropout=dropout, **kwargs)
        if units is not None and (not isinstance(units, int) or isinstance(units, bool) or units <= 0):
            raise ValueError(
                "Received an invalid value for argument `units`, expected a positive integer or None. "
                f"Received: units={units}"
            )
        self.units = units
        self.normalize = bool(normalize)

    def build_scoring(self, query_shape, key_shape):
        units = self.units or key_shape[-1]
        self.query_dense = keras.layers.Dense(units, use_bias=False, name="query_dense", dtype=self.dtype_policy)
        self.query_dense.build(query_shape)
        self.key_dense = keras.layers.Dense(units, use_bias=False, name="key_dense", dtype=self.dtype_policy)
        self.key_dense.build(key_shape)
        self.v = self.add_weight(name="v", shape=(units,), initializer="glorot_uniform")
        if self.normalize:
            self.g = self.add_weight(name="g", shape=(), initializer=keras.initializers.Constant(math.sqrt(1.0 / units)))
            self.b = self.add_weight(name="b", shape=(units,), initializer="zeros")

    def prepare_key(self, key):
        prepared = self.key_dense(key)
        if self.normalize:
            prepared = prepared + ops.cast(self.b, prepared.dtype)
        return prepared

    @kernels.replaceable
    def score(self, query, prepared_key):
        """``e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j)`` for every query ``i`` and key ``j``: ``[B, Tq, Tv]``."""
        q = self.query_dense(query)  # W_a s_{i-1}: [B, Tq, U]
        hidden = ops.tanh(ops.expand_dims(q, -2) + ops.expand_dims(prepared_key, -3))  # [B, Tq, Tv, U]
        return ops.einsum("bqku,u->bqk", hidden, ops.cast(self.scorer(), hidden.dtype))

    def scorer(self):
        """``v_a``, or with ``normalize`` ``g v_a / ||v_a||``."""
        if self.normalize:
            return self.g * self.v / ops.sqrt(ops.sum(ops.square(self.v)))
        return self.v

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "normalize": self.normalize})
        return config
