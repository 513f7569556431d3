"""Key-value(-predict) attention of Daniluk et al."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import BaseAttention, register_attention


@register_attention("key_value")
@keras.saving.register_keras_serializable(package="zoo")
class KeyValueAttention(BaseAttention):
    """Key-value attention of Daniluk et al. (2017): each vector is split into key and value.

    Every vector is split along its features into equal parts, ``h = [k; v]`` (or
    ``h = [k; v; p]`` with ``predict=True``, key-value-predict, sec. 2.3). Only the key parts
    are scored and only the value parts are summed:

    ``M_t = tanh(W^Y [k_{t-L} .. k_{t-1}] + (W^h k_t) 1^T)`` (Daniluk et al. 2017, eq. 5),
    ``alpha_t = softmax(w^T M_t)`` (eq. 6), ``r_t = [v_{t-L} .. v_{t-1}] alpha_t^T`` (eq. 7).

    Here the query's key part is ``k_t``, the keys are the key parts of ``key`` (default
    ``value``) and the values are the value parts of ``value``. The output is ``r_t``, the
    context made of value parts only, ``D_v / n`` wide (``n`` = 2, or 3 with ``predict``). The
    output combination of eq. 8, ``h*_t = tanh(W^r r_t + W^x v_t)`` (``p_t`` in place of
    ``v_t`` for key-value-predict), is left to the caller (e.g. the decoder's attentional
    layer), which can take the query's parts with ``split``. The attention span ``L`` of a
    language model is expressed with ``use_causal_mask`` / ``attention_mask``. ``W^Y k_s`` is
    computed once per source in ``prepare_key``.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` memory steps, ``n`` parts,
    ``U`` = ``units``.
    Cost: ``O(B (Tq + Tv) (D/n) U + B Tq Tv U)`` time, ``O(B Tq Tv U)`` memory.

    Args:
        units: positive int or None, the size of ``W^Y``, ``W^h`` outputs and ``w``; None
            means the size of the memory's key part (``k x k`` matrices as in the paper).
        predict: bool, split into three parts (key, value, predict) instead of two.
        dropout: float in [0, 1), dropout rate on the attention weights in training.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        See ``BaseAttention``: ``(query [B, Tq, Dq], value [B, Tv, Dv], key=None [B, Tv, Dk],
        *, query_mask, value_mask, attention_mask, use_causal_mask, return_attention_scores,
        training)``. ``Dq``, ``Dk`` and ``Dv`` must be divisible by ``n``.

    Returns:
        ``output [B, Tq, Dv / n]`` (the weighted sum of the value parts), or
        ``(output, weights [B, Tq, Tv])``.

    Example:
        >>> import numpy as np
        >>> layer = KeyValueAttention(predict=True)
        >>> out, w = layer(np.ones((2, 4, 6)), np.ones((2, 5, 6)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape), [tuple(p.shape) for p in layer.split(np.ones((2, 4, 6)))]
        ((2, 4, 2), (2, 4, 5), [(2, 4, 2), (2, 4, 2), (2, 4, 2)])

    References:
        Daniluk, Rocktaschel, Welbl, Riedel. Frustratingly Short Attention Spans in Neural
        Language Modeling. ICLR 2017, sec. 2.2-2.3. https://arxiv.org/abs/1702.04521
    """

    def __init__(self, units=None, predict=False, dropout=0.0, **kwargs):
        super().__init__(dropout=dropout, **kwargs)
        self.units = checks.positive_int("units", units, allow_none=True)
        self.predict = checks.boolean("predict", predict)

    @property
    def num_parts(self):
        return 3 if self.predict else 2

    def split(self, x):
        """Splits ``x [..., D]`` into ``[k, v]`` (or ``[k, v, p]`` with ``predict``), each ``D / n``."""
        x = ops.convert_to_tensor(x)
        size = x.shape[-1] // self.num_parts
        return [x[..., i * size:(i + 1) * size] for i in range(self.num_parts)]

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        for name, shape in (("query", query_shape), ("key", key_shape), ("value", value_shape)):
            if shape[-1] is None or shape[-1] % self.num_parts:
                raise ValueError(
                    f"KeyValueAttention(predict={self.predict}) splits features into {self.num_parts} "
                    f"equal parts, so the {name} feature size must be divisible by {self.num_parts}. "
                    f"Received: {name}_shape={tuple(shape)}"
                )
        super().build(query_shape, value_shape, key_shape)

    def build_scoring(self, query_shape, key_shape):
        key_part = key_shape[-1] // self.num_parts
        units = self.units or key_part
        self.query_dense = keras.layers.Dense(units, use_bias=False, name="query_dense", dtype=self.dtype_policy)
        self.query_dense.build((*query_shape[:-1], query_shape[-1] // self.num_parts))  # W^h
        self.key_dense = keras.layers.Dense(units, use_bias=False, name="key_dense", dtype=self.dtype_policy)
        self.key_dense.build((*key_shape[:-1], key_part))  # W^Y
        self.w = self.add_weight(name="w", shape=(units,), initializer="glorot_uniform")

    def prepare_key(self, key):
        return self.key_dense(self.split(key)[0])  # W^Y k_s: [B, Tv, U]

    def score(self, query, prepared_key):
        q = self.query_dense(self.split(query)[0])  # W^h k_t: [B, Tq, U]
        hidden = ops.tanh(ops.expand_dims(q, -2) + ops.expand_dims(prepared_key, -3))  # M_t: [B, Tq, Tv, U]
        return ops.einsum("bqku,u->bqk", hidden, ops.cast(self.w, hidden.dtype))

    def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None):
        return super().attend(query, self.split(value)[1], prepared_key, mask=mask,
                              return_attention_scores=return_attention_scores, training=training)

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        return (*query_shape[:-1], value_shape[-1] // self.num_parts)

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "predict": self.predict})
        return config
