"""Location-aware (hybrid) attention of Chorowski et al. (2015): the additive score plus convolutional
features of the previous step's weights."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import BaseAttention, register_attention

# The options' rules, declared once: the constructor's checks and the config validator's
# (zoo.catalog.attention_constraints, before TensorFlow starts) say the same.
CONSTRAINTS = (
    {"rule": "at_least", "key": "units", "min": 1, "integer": True, "why": "the width of W s, V h_j and U f_ij"},
    {"rule": "at_least", "key": "filters", "min": 1, "integer": True, "why": "k, the convolution's filters"},
    {"rule": "at_least", "key": "kernel_size", "min": 1, "integer": True, "why": "r, the width of each filter"},
)


@register_attention("location_aware")
@keras.saving.register_keras_serializable(package="zoo")
class LocationAwareAttention(BaseAttention):
    """Location-aware attention of Chorowski et al. (2015): where the previous step looked, convolved.

    At decoder step ``i`` the score of source position ``j`` sees the content (``s_{i-1}``, ``h_j``)
    and where step ``i - 1`` attended, through ``k`` features ``f_{i,j}`` that a 1-D convolution
    ``Q`` (``k`` filters of width ``r``) extracts from the previous weights ``alpha_{i-1}``::

        F_i      = Q * alpha_{i-1}                                              (eq. 8)
        e_{i,j}  = w^T tanh(W s_{i-1} + V h_j + U f_{i,j} + b)                  (eq. 9)
        alpha_i  = softmax_j(e_{i,j}),   g_i = sum_j alpha_{i,j} h_j            (eqs. 6, 2)

    With ``U = 0`` it is Bahdanau's additive score (``additive``) with a bias. Not to be confused
    with ``location`` (Luong et al. 2015's location-based score ``a_t = softmax(W_a h_t)``, which
    reads the query alone and never the previous weights).

    The previous weights come from the caller: ``attend(..., previous_weights=alpha_{i-1})``, one
    row per query. An RNN decoder carries its last step's weights ``[B, Ts]`` in its state and
    passes them (``zoo.models.alignment.attend_step``); the first step's ``alpha_0`` is
    ``initial_weights``: uniform over the real (unmasked) source positions (as ESPnet's ``AttLoc``;
    Chorowski et al. do not state one). A call without ``previous_weights`` runs the queries in
    order, query ``i`` seeing the weights the layer gave query ``i - 1`` (query 0 seeing
    ``alpha_0``): a sequence of decoder states attended at once (Luong's teacher forcing) gives the
    numbers of the decoder stepping through them.

    The convolution runs over the source axis with zero padding at its ends ("same": ``f_{i,j}``
    reads ``alpha_{i-1}`` at ``j - (r - 1) // 2 .. j + r // 2``), and masked positions hold weight
    0, so padding a batch changes nothing. Keras' convolution is a cross-correlation: ``Q``
    flipped, the same family of functions. ``V h_j + b`` does not depend on the query:
    ``prepare_key`` computes it once per source; ``U f_{i,j}`` is added per step (``locate``).

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps, ``U`` = ``units``, ``k`` =
    ``filters``, ``r`` = ``kernel_size``. Cost: additive's ``O(B Tq Tv U)`` plus the features,
    ``O(B Tq Tv (r k + k U))``; ``O(B Tq Tv U)`` memory.

    Args:
        units: positive int ``U``, the width of ``W s_{i-1}``, ``V h_j`` and ``U f_{i,j}``.
        filters: positive int ``k``, the number of convolution filters (10 in the paper).
        kernel_size: positive int ``r``, the width of each filter (201 frames in the paper's speech;
            15 characters here by default).
        dropout: float in [0, 1), dropout rate on the attention weights in training (the weights
            passed on to the next step are those before dropout).
        **kwargs: ``BaseAttention``'s ``normalizer`` and standard ``keras.layers.Layer`` arguments.

    Call arguments:
        See ``BaseAttention``: ``(query [B, Tq, Dq], value [B, Tv, Dv], key=None, *,
        query_mask, value_mask, attention_mask, use_causal_mask, return_attention_scores,
        training)``. ``attend`` also takes ``previous_weights [B, Tq, Tv]``.

    Returns:
        ``output [B, Tq, Dv]``, or ``(output, weights [B, Tq, Tv])``.

    Example:
        >>> import numpy as np
        >>> layer = LocationAwareAttention(units=8, filters=2, kernel_size=3)
        >>> out, w = layer(np.ones((2, 3, 4)), np.ones((2, 5, 6)), return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape)
        ((2, 3, 6), (2, 3, 5))
        >>> previous = np.eye(5, dtype="float32")[[0, 4]][:, None, :]  # step i - 1 looked at 0, at 4
        >>> _, w = layer.attend(np.ones((2, 1, 4)), np.ones((2, 5, 6)), layer.prepare(np.ones((2, 5, 6))),
        ...                     previous_weights=previous, return_attention_scores=True)
        >>> bool(np.allclose(w[0], w[1]))  # same content, another previous alignment: other weights
        False

    References:
        Chorowski, Bahdanau, Serdyuk, Cho, Bengio. Attention-Based Models for Speech Recognition.
        NIPS 2015, sec. 2.1-2.2, eqs. 5-9. https://arxiv.org/abs/1506.07503
    """

    def __init__(self, units=128, filters=10, kernel_size=15, dropout=0.0, **kwargs):
        super().__init__(dropout=dropout, **kwargs)
        checks.enforce(CONSTRAINTS, units=units, filters=filters, kernel_size=kernel_size)
        self.units = checks.positive_int("units", units)
        self.filters = checks.positive_int("filters", filters)
        self.kernel_size = checks.positive_int("kernel_size", kernel_size)

    def build_scoring(self, query_shape, key_shape):
        dtype = self.dtype_policy
        self.query_dense = keras.layers.Dense(self.units, use_bias=False, name="query_dense", dtype=dtype)  # W
        self.query_dense.build(query_shape)
        self.key_dense = keras.layers.Dense(self.units, use_bias=False, name="key_dense", dtype=dtype)  # V
        self.key_dense.build(key_shape)
        self.location_conv = keras.layers.Conv1D(self.filters, self.kernel_size, padding="same", use_bias=False,
                                                 name="location_conv", dtype=dtype)  # Q
        self.location_conv.build((None, None, 1))
        self.location_dense = keras.layers.Dense(self.units, use_bias=False, name="location_dense", dtype=dtype)  # U
        self.location_dense.build((None, None, self.filters))
        self.b = self.add_weight(name="b", shape=(self.units,), initializer="zeros")
        self.v = self.add_weight(name="v", shape=(self.units,), initializer="glorot_uniform")  # w

    def prepare_key(self, key):
        """``V h_j + b``: ``[B, Tv, U]``, once per source."""
        prepared = self.key_dense(key)
        return prepared + ops.cast(self.b, prepared.dtype)

    def locate(self, prepared_key, previous_weights):
        """``V h_j + U f_{i,j} + b`` with ``F_i = Q * alpha_{i-1}``: ``[B, Tq, Tv, U]`` from the prepared
        keys ``[B, Tv, U]`` and ``previous_weights [B, Tq, Tv]``."""
        shape = ops.shape(previous_weights)
        rows = ops.reshape(ops.cast(previous_weights, self.compute_dtype), (-1, shape[-1], 1))  # [B Tq, Tv, 1]
        features = self.location_conv(rows)  # f_{i,j}: [B Tq, Tv, k]
        located = ops.reshape(self.location_dense(features), (shape[0], shape[1], shape[2], self.units))
        return ops.expand_dims(prepared_key, -3) + located

    def score(self, query, prepared_key):
        """``e_{i,j} = w^T tanh(W s_{i-1} + keys)``: ``[B, Tq, Tv]``, the keys ``locate``'s ``[B, Tq, Tv, U]``
        (or ``prepare_key``'s ``[B, Tv, U]``: then without the location term, ``U f = 0``)."""
        keys = prepared_key if len(prepared_key.shape) == 4 else ops.expand_dims(prepared_key, -3)
        hidden = ops.tanh(ops.expand_dims(self.query_dense(query), -2) + keys)  # [B, Tq, Tv, U]
        return ops.einsum("bqku,u->bqk", hidden, ops.cast(self.v, hidden.dtype))

    def initial_weights(self, mask):
        """``alpha_0``: ``[B, Tv]``, uniform over the positions where ``mask [B, Tv]`` is True (0 for a
        row with none)."""
        mask = ops.cast(mask, self.compute_dtype)
        return mask / ops.maximum(ops.sum(mask, axis=-1, keepdims=True), ops.cast(1, mask.dtype))

    def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None,
               previous_weights=None):
        """``BaseAttention.attend`` of the scores with the location term of ``previous_weights [B, Tq, Tv]``
        (``alpha_{i-1}`` of each query); without them, the queries in order from ``initial_weights``."""
        if previous_weights is None:
            return self._attend_in_order(query, value, prepared_key, mask, return_attention_scores, training)
        return super().attend(query, value, self.locate(prepared_key, previous_weights), mask=mask,
                              return_attention_scores=return_attention_scores, training=training)

    def _attend_in_order(self, query, value, prepared_key, mask, return_attention_scores, training):
        """Query ``i`` with the weights of query ``i - 1`` (query 0: ``alpha_0`` over the positions any
        query may attend), one query a step (``keras.ops.scan`` over ``Tq``)."""
        batch, tq, tv = ops.shape(query)[0], ops.shape(query)[1], ops.shape(value)[-2]
        if mask is None:
            mask = ops.ones((batch, tq, tv), "bool")
        mask = ops.broadcast_to(ops.cast(mask, "bool"), (batch, tq, tv))
        start = ops.expand_dims(self.initial_weights(ops.any(mask, axis=1)), 1)  # [B, 1, Tv]

        def step(carry, inputs):
            step_query, step_mask = inputs  # [B, 1, Dq], [B, 1, Tv]
            output, weights = self.attend(step_query, value, prepared_key, mask=step_mask,
                                          return_attention_scores=True, training=training, previous_weights=carry[1])
            carry = (ops.cast(output, carry[0].dtype), ops.cast(weights, carry[1].dtype))
            return carry, carry  # TensorFlow's scan stacks outputs shaped like the carry

        init = (ops.zeros((batch, 1, value.shape[-1]), self.compute_dtype), start)
        steps = (ops.expand_dims(ops.swapaxes(query, 0, 1), 2), ops.expand_dims(ops.swapaxes(mask, 0, 1), 2))
        _, (outputs, weights) = ops.scan(step, init, steps)  # [Tq, B, 1, ...]
        output = ops.swapaxes(ops.squeeze(outputs, 2), 0, 1)
        if return_attention_scores:
            return output, ops.swapaxes(ops.squeeze(weights, 2), 0, 1)
        return output

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "filters": self.filters, "kernel_size": self.kernel_size})
        return config
