"""ALiBi (Press et al. 2022): attention with linear biases, a fixed per-head penalty on the distance."""

import math

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention
from zoo.attention.relative_position_embedding import relative_distances


def alibi_slopes(num_heads):
    """The heads' slopes ``m_h``: for ``H`` a power of 2 the geometric sequence ``2^(-8h/H)``,
    ``h = 1..H`` (Press et al. 2022, sec. 3); otherwise the ``2^floor(log2 H)`` slopes of that power of
    2, then every other slope of the next power of 2 (the paper's code, ``get_slopes``)."""
    def power_of_two(n):
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    if math.log2(num_heads).is_integer():
        return power_of_two(num_heads)
    closest = 2 ** math.floor(math.log2(num_heads))
    return power_of_two(closest) + alibi_slopes(2 * closest)[0::2][:num_heads - closest]


@register_attention("alibi")
@keras.saving.register_keras_serializable(package="zoo")
class AlibiPositionBias(keras.layers.Layer):
    """Attention with linear biases, ALiBi (Press et al. 2022), a score bias of ``MultiHeadAttention``.

    No position is added to the embeddings; each head's scores get a penalty proportional to the
    distance, ``softmax(q_i K^T + m_h [-(i - 1), ..., -2, -1, 0])`` (Press et al. 2022, sec. 3), i.e.
    ``b_ij = -m_h |i - j|``: under a causal mask (a decoder) that is the paper's ``-m_h (i - j)``;
    without one (an encoder) the penalty is symmetric. The slopes ``m_h`` are fixed, not learned
    (``alibi_slopes``: ``2^(-8h/H)``, with the paper's rule for ``H`` not a power of 2). The paper's
    claim: trained on short sequences, it extrapolates to longer ones.

    Shapes: ``H`` heads, ``Tq`` query and ``Tv`` key positions.
    Cost: ``O(H Tq Tv)``; no weights.

    Args:
        num_heads: positive int ``H``.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        queries: ``[B, H, Tq, d]`` (or any ``[..., Tq, d]``), read for ``Tq`` only.
        keys: optional ``[..., Tv, d]``, read for ``Tv`` only; None: ``Tv = Tq``.
        start_index: int or scalar tensor, the position of the first query. Default 0.
        key_start_index: int or scalar tensor, the position of the first key. Default 0.

    Returns:
        The score bias ``[1, H, Tq, Tv]``.

    Example:
        >>> import numpy as np
        >>> alibi_slopes(4), [round(m, 4) for m in alibi_slopes(6)]
        ([0.25, 0.0625, 0.015625, 0.00390625], [0.25, 0.0625, 0.0156, 0.0039, 0.5, 0.125])
        >>> bias = AlibiPositionBias(num_heads=2)(np.ones((1, 2, 3, 4)))
        >>> np.asarray(bias[0, 0]).tolist()
        [[0.0, -0.0625, -0.125], [-0.0625, 0.0, -0.0625], [-0.125, -0.0625, 0.0]]

    References:
        Press, Smith, Lewis. Train Short, Test Long: Attention with Linear Biases Enables Input Length
        Extrapolation. ICLR 2022, sec. 3. https://arxiv.org/abs/2108.12409
    """

    def __init__(self, num_heads=2, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = checks.positive_int("num_heads", num_heads)

    def build(self, queries_shape, keys_shape=None):
        self.built = True

    def call(self, queries, keys=None, start_index=0, key_start_index=0):
        tq = ops.shape(queries)[-2]
        tv = tq if keys is None else ops.shape(keys)[-2]
        penalty = -ops.abs(relative_distances(tq, tv, start_index, key_start_index))  # -|i - j|
        slopes = ops.reshape(ops.convert_to_tensor(alibi_slopes(self.num_heads), self.compute_dtype),
                             (1, self.num_heads, 1, 1))
        return slopes * ops.cast(penalty, self.compute_dtype)  # [1, H, Tq, Tv]

    def compute_output_shape(self, queries_shape, keys_shape=None):
        tv = queries_shape[-2] if keys_shape is None else keys_shape[-2]
        return (1, self.num_heads, queries_shape[-2], tv)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads})
        return config
