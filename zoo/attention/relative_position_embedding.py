"""Relative position representations (Shaw et al. 2018): clipped distances embedded in keys and values."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention


def relative_distances(tq, tv, start_index=0, key_start_index=0):
    """``[Tq, Tv]`` int: ``j - i`` for query ``i`` at position ``start_index + i`` and key ``j`` at
    ``key_start_index + j`` (positions as ``MultiHeadAttention``'s ``cache_update_index`` counts them)."""
    rows = ops.expand_dims(ops.arange(tq) + start_index, 1)
    cols = ops.expand_dims(ops.arange(tv) + key_start_index, 0)
    return cols - rows


@register_attention("relative")
@keras.saving.register_keras_serializable(package="zoo")
class RelativePositionEmbedding(keras.layers.Layer):
    """Relative position representations of Shaw et al. (2018), a score bias and a value term of
    ``MultiHeadAttention`` (its ``score_bias``).

    Each pair of positions gets two learned vectors by its clipped distance,
    ``a^K_ij = w^K_{clip(j - i, k)}``, ``a^V_ij = w^V_{clip(j - i, k)}``,
    ``clip(x, k) = max(-k, min(k, x))`` (eqs. 5-7), and self-attention becomes
    ``e_ij = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_z)`` (eq. 4) and
    ``z_i = sum_j alpha_ij (x_j W^V + a^V_ij)`` (eq. 3). So the layer adds to the scores the bias
    ``b_ij = q_i . a^K_ij`` (``call``: ``q_i`` the query as it enters the scores, ``x_i W^Q / sqrt(d_z)``)
    and to each head's output ``sum_j alpha_ij a^V_ij`` (``value_term``). The ``2k + 1`` vectors of each
    kind are shared by the heads (sec. 3.3) and learned per layer; distances beyond ``k`` share the
    last one, so the layer runs on sequences of any length.

    Shapes: ``B`` batch, ``H`` heads, ``Tq`` query and ``Tv`` key positions, ``d`` per-head size
    (``d_z``; the values' size is the keys').
    Cost: ``O(Tq Tv d)`` memory for the gathered ``a_ij``, ``O(B H Tq Tv d)`` time; ``2 (2k + 1) d`` weights.

    Args:
        max_distance: positive int ``k``, the clipping distance (16 in the paper's base model; 2 and
            up gave the same BLEU, sec. 4.3).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        queries: ``[B, H, Tq, d]`` (or ``[B, Tq, d]``), the queries as they enter the scores.
        keys: optional ``[B, H, Tv, d]``, read for ``Tv`` only; None: ``Tv = Tq``.
        start_index: int or scalar tensor, the position of the first query. Default 0.
        key_start_index: int or scalar tensor, the position of the first key. Default 0.

    Returns:
        The score bias ``[B, H, Tq, Tv]`` (``[B, Tq, Tv]`` for 3-D queries); ``value_term(weights,
        start_index, key_start_index)`` gives ``[B, H, Tq, d]`` from the weights ``[B, H, Tq, Tv]``.

    Example:
        >>> import numpy as np
        >>> layer = RelativePositionEmbedding(max_distance=1)
        >>> bias = layer(np.ones((1, 2, 3, 4)))  # [B, H, Tq, d]
        >>> tuple(bias.shape), tuple(layer.value_term(np.ones((1, 2, 3, 3))).shape)
        ((1, 2, 3, 3), (1, 2, 3, 4))

    References:
        Shaw, Uszkoreit, Vaswani. Self-Attention with Relative Position Representations. NAACL 2018,
        sec. 3. https://arxiv.org/abs/1803.02155
    """

    def __init__(self, max_distance=16, **kwargs):
        super().__init__(**kwargs)
        self.max_distance = checks.positive_int("max_distance", max_distance)

    def build(self, queries_shape, keys_shape=None):
        size = (2 * self.max_distance + 1, queries_shape[-1])
        self.key_embeddings = self.add_weight(name="key_embeddings", shape=size, initializer="glorot_uniform")
        self.value_embeddings = self.add_weight(name="value_embeddings", shape=size, initializer="glorot_uniform")

    def embeddings(self, table, tq, tv, start_index=0, key_start_index=0):
        """``w_{clip(j - i, k)}`` of ``table``: ``[Tq, Tv, d]``."""
        distance = relative_distances(tq, tv, start_index, key_start_index)
        index = ops.clip(distance, -self.max_distance, self.max_distance) + self.max_distance
        return ops.take(ops.cast(table, self.compute_dtype), index, axis=0)

    def call(self, queries, keys=None, start_index=0, key_start_index=0):
        queries = ops.convert_to_tensor(queries, self.compute_dtype)
        tq = ops.shape(queries)[-2]
        tv = tq if keys is None else ops.shape(keys)[-2]
        a_k = self.embeddings(self.key_embeddings, tq, tv, start_index, key_start_index)  # [Tq, Tv, d]
        return ops.einsum("...id,ijd->...ij", queries, a_k)  # q_i . a^K_ij

    def value_term(self, weights, start_index=0, key_start_index=0):
        """``sum_j alpha_ij a^V_ij`` (eq. 3's second part): ``[B, H, Tq, d]`` from ``weights [B, H, Tq, Tv]``."""
        weights = ops.convert_to_tensor(weights, self.compute_dtype)
        a_v = self.embeddings(self.value_embeddings, ops.shape(weights)[-2], ops.shape(weights)[-1], start_index,
                              key_start_index)
        return ops.einsum("...ij,ijd->...id", weights, a_v)

    def compute_output_shape(self, queries_shape, keys_shape=None):
        tv = queries_shape[-2] if keys_shape is None else keys_shape[-2]
        return (*queries_shape[:-1], tv)

    def get_config(self):
        config = super().get_config()
        config.update({"max_distance": self.max_distance})
        return config
