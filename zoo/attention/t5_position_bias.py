"""T5's relative position bias (Raffel et al. 2020): one learned scalar per head and distance bucket."""

import math

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention
from zoo.attention.relative_position_embedding import relative_distances


def relative_position_bucket(distance, bidirectional=True, num_buckets=32, max_distance=128):
    """The bucket of each ``distance = j - i`` (int tensor), as T5's ``_relative_position_bucket``
    (Mesh TensorFlow): half the buckets exact (distances ``0 .. n/2 - 1``), the rest logarithmic up to
    ``max_distance``, farther ones in the last bucket; ``bidirectional`` gives keys after the query
    (``j > i``) buckets of their own (the upper half), else they share bucket 0 (a causal mask hides them)."""
    n = -distance  # i - j: how far back the key is
    bucket = ops.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + ops.cast(n < 0, n.dtype) * num_buckets
        n = ops.abs(n)
    else:
        n = ops.maximum(n, 0)
    max_exact = num_buckets // 2
    far = ops.cast(n, "float32") / max_exact
    large = max_exact + ops.cast(ops.log(ops.maximum(far, 1.0)) / math.log(max_distance / max_exact)
                                 * (num_buckets - max_exact), n.dtype)
    large = ops.minimum(large, num_buckets - 1)
    return bucket + ops.where(n < max_exact, n, large)


@register_attention("t5")
@keras.saving.register_keras_serializable(package="zoo")
class T5PositionBias(keras.layers.Layer):
    """T5's relative position bias (Raffel et al. 2020), a score bias of ``MultiHeadAttention``.

    "Each 'embedding' is simply a scalar that is added to the corresponding logit used for computing
    the attention weights" (Raffel et al. 2020, sec. 2.1): ``e_ij = q_i k_j^T + b_h(bucket(j - i))``,
    one learned scalar per head ``h`` and bucket, shared by the layers of a stack (the Transformer
    makes one for the encoder and one for the decoder). ``bucket`` (``relative_position_bucket``)
    maps the distance to one of ``num_buckets``: the near distances one bucket each, then buckets
    logarithmically wider up to ``max_distance`` (32 buckets, 128 in the paper), everything beyond
    in the last. Bidirectional (an encoder): keys before and after the query in separate halves;
    causal (a decoder): only keys before.

    Shapes: ``B`` batch, ``H`` heads, ``Tq`` query and ``Tv`` key positions.
    Cost: ``O(H Tq Tv)`` for the bias; ``num_buckets H`` weights.

    Args:
        num_heads: positive int ``H``.
        num_buckets: positive int, the buckets (32 in T5).
        max_distance: positive int, the distance from which everything shares the last bucket (128).
        bidirectional: bool, separate buckets for keys after the query (an encoder).
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
        >>> buckets = relative_position_bucket(np.array([-3, -1, 0, 1, 3]), bidirectional=True, num_buckets=4,
        ...                                    max_distance=4)
        >>> keras.ops.convert_to_numpy(buckets).tolist()
        [1, 1, 0, 3, 3]
        >>> tuple(T5PositionBias(num_heads=2)(np.ones((1, 2, 3, 4))).shape)
        (1, 2, 3, 3)

    References:
        Raffel et al. Exploring the Limits of Transfer Learning with a Unified Text-to-Text
        Transformer. JMLR 2020, sec. 2.1. https://arxiv.org/abs/1910.10683
    """

    def __init__(self, num_heads=2, num_buckets=32, max_distance=128, bidirectional=True, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = checks.positive_int("num_heads", num_heads)
        self.num_buckets = checks.positive_int("num_buckets", num_buckets)
        self.max_distance = checks.positive_int("max_distance", max_distance)
        self.bidirectional = checks.boolean("bidirectional", bidirectional)
        if self.num_buckets < (4 if bidirectional else 2):
            raise checks.invalid("num_buckets", f"an integer >= {4 if bidirectional else 2}", num_buckets)

    def build(self, queries_shape, keys_shape=None):
        self.bias = self.add_weight(name="bias", shape=(self.num_buckets, self.num_heads),
                                    initializer=keras.initializers.RandomNormal(stddev=0.02))

    def call(self, queries, keys=None, start_index=0, key_start_index=0):
        tq = ops.shape(queries)[-2]
        tv = tq if keys is None else ops.shape(keys)[-2]
        buckets = relative_position_bucket(relative_distances(tq, tv, start_index, key_start_index),
                                           self.bidirectional, self.num_buckets, self.max_distance)
        values = ops.take(ops.cast(self.bias, self.compute_dtype), buckets, axis=0)  # [Tq, Tv, H]
        return ops.expand_dims(ops.transpose(values, (2, 0, 1)), 0)

    def compute_output_shape(self, queries_shape, keys_shape=None):
        tv = queries_shape[-2] if keys_shape is None else keys_shape[-2]
        return (1, self.num_heads, queries_shape[-2], tv)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "num_buckets": self.num_buckets,
                       "max_distance": self.max_distance, "bidirectional": self.bidirectional})
        return config
