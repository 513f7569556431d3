"""Multi-hop key-value memory read (Miller et al.)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import masked_softmax, register_attention


@register_attention("key_value_memory")
@keras.saving.register_keras_serializable(package="zoo")
class KeyValueMemory(keras.layers.Layer):
    """Key-value memory of Miller et al. (2016): address by keys, read values, update the query, repeat.

    With the memory slots ``(k_{h_1}, v_{h_1}) .. (k_{h_N}, v_{h_N})`` and the query
    ``q_1 = A Φ_X(x)`` already embedded (the caller's embeddings ``A Φ``), each hop
    ``j = 1..H`` (Miller et al. 2016, sec. 3.1):

    - key addressing: ``p_{h_i} = softmax(q_j · A Φ_K(k_{h_i}))``;
    - value reading: ``o = sum_i p_{h_i} A Φ_V(v_{h_i})``;
    - query update: ``q_{j+1} = R_j (q_j + o)``, ``R_j`` a ``d x d`` matrix per hop.

    The output is ``q_{H+1}``; the answer scores of the paper,
    ``softmax(q_{H+1}^T B Φ_Y(y_i))``, are the caller's. Keys and values may be the same
    tensor (an end-to-end memory network's single memory). Masked slots get exactly 0 weight;
    with every slot masked ``o = 0`` and the query passes through ``R_j`` alone.

    This is not ``key_value`` (Daniluk et al. 2017), which splits each vector of one sequence
    into a key part and a value part and scores them with an MLP; here keys and values are
    separate memories, scored by inner product, read for ``H`` hops.

    Shapes: ``B`` batch, ``N`` memory slots, ``d`` features (query, keys and values alike),
    ``H`` = ``hops``.
    Cost: ``O(H B (N d + d^2))`` time, ``O(B N)`` memory per hop; ``H d^2`` weights.

    Args:
        hops: positive int ``H``, the number of addressing-reading steps.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        query: ``q_1 [B, d]``.
        keys: ``A Φ_K(k) [B, N, d]``.
        values: ``A Φ_V(v) [B, N, d]``.
        keys_mask: optional bool ``[B, N]``, True = a real slot (Keras masks on ``keys`` and
            ``values`` are used); ``values_mask`` likewise, the two combined.
        return_attention_scores: bool, also return the addressing weights of every hop.

    Returns:
        ``q_{H+1} [B, d]``, or ``(q_{H+1}, p [B, H, N])`` with ``return_attention_scores=True``.

    Example:
        >>> import numpy as np
        >>> layer = KeyValueMemory(hops=2)
        >>> q, p = layer(np.ones((2, 4)), np.random.rand(2, 5, 4), np.random.rand(2, 5, 4),
        ...              keys_mask=np.array([[True] * 5, [True] * 3 + [False] * 2]),
        ...              return_attention_scores=True)
        >>> tuple(q.shape), tuple(p.shape), np.asarray(p)[1, :, 3:].tolist()
        ((2, 4), (2, 2, 5), [[0.0, 0.0], [0.0, 0.0]])

    References:
        Miller, Fisch, Dodge, Karimi, Bordes, Weston. Key-Value Memory Networks for Directly
        Reading Documents. EMNLP 2016, sec. 3.1. https://arxiv.org/abs/1606.03126
    """

    def __init__(self, hops=1, **kwargs):
        super().__init__(**kwargs)
        self.hops = checks.positive_int("hops", hops)
        self.supports_masking = True

    def build(self, query_shape, keys_shape, values_shape):
        d = query_shape[-1]
        if keys_shape[-1] != d or values_shape[-1] != d:
            raise ValueError(
                "KeyValueMemory adds the read value to the query and scores the query against the keys, so "
                f"query, keys and values need the same feature size. Received: query_shape={tuple(query_shape)}, "
                f"keys_shape={tuple(keys_shape)}, values_shape={tuple(values_shape)}")
        self.query_updates = []
        for j in range(self.hops):
            dense = keras.layers.Dense(d, use_bias=False, name=f"r_{j + 1}", dtype=self.dtype_policy)
            dense.build((query_shape[0], d))
            self.query_updates.append(dense)

    def call(self, query, keys, values, *, keys_mask=None, values_mask=None, return_attention_scores=False):
        q = ops.convert_to_tensor(query, self.compute_dtype)
        keys = ops.convert_to_tensor(keys, self.compute_dtype)
        values = ops.convert_to_tensor(values, self.compute_dtype)
        mask = None
        for m in (keys_mask, values_mask):
            if m is not None:
                m = ops.cast(m, "bool")
                mask = m if mask is None else ops.logical_and(mask, m)
        weights = []
        for update in self.query_updates:
            p = masked_softmax(ops.einsum("bd,bnd->bn", q, keys), mask)  # key addressing
            o = ops.einsum("bn,bnd->bd", p, values)  # value reading
            q = update(q + o)  # q_{j+1} = R_j (q_j + o)
            weights.append(p)
        if return_attention_scores:
            return q, ops.stack(weights, axis=1)
        return q

    def compute_mask(self, query, previous_mask=None):
        return None

    def compute_output_shape(self, query_shape, keys_shape=None, values_shape=None):
        return tuple(query_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"hops": self.hops})
        return config
