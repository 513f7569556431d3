"""Structured self-attentive sentence embedding (Lin et al.)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import masked_softmax, register_attention


@register_attention("self_attentive")
@keras.saving.register_keras_serializable(package="zoo")
class SelfAttentiveEmbedding(keras.layers.Layer):
    """Structured self-attentive sentence embedding of Lin et al. (2017), with ``r`` hops.

    ``A = softmax(W_s2 tanh(W_s1 H^T))`` (Lin et al. 2017, eq. 6), ``M = A H`` (sec. 2.1), and
    the penalization term ``P = ||A A^T - I||_F^2`` (eq. 8), added to the model's losses as
    ``penalty * mean_over_batch(P)`` with ``self.add_loss`` (read it from ``layer.losses`` or
    ``model.losses``; ``fit`` adds it to the loss).

    ``H`` is the sequence of hidden states (e.g. a BiLSTM's), ``W_s1`` is ``[d_a, D]`` and
    ``W_s2`` ``[r, d_a]``, both without bias as in the paper; the softmax runs over the
    time steps, with masked steps at exactly 0 weight (a fully masked sequence gives
    ``A = 0`` and ``M = 0``).

    Shapes: ``B`` batch, ``T`` steps, ``D`` features of ``H``, ``r`` = ``hops``,
    ``d_a`` = ``units``.
    Cost: ``O(B T D d_a + B T d_a r + B r T D + B r^2 T)`` time, ``O(B T d_a + B r T)`` memory.

    Args:
        units: positive int ``d_a``, the hidden size of the attention MLP.
        hops: positive int ``r``, the number of attention hops (rows of ``M``).
        penalty: non-negative float, the coefficient of ``P``; 0 adds no loss.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: ``H [B, T, D]``.
        mask: optional bool ``[B, T]``, True = a real step; a Keras mask on ``inputs`` is
            used when not given.
        return_attention_scores: bool, also return ``A``.

    Returns:
        ``M [B, r, D]``, or ``(M, A [B, r, T])`` with ``return_attention_scores=True``.
        The output carries no mask.

    Example:
        >>> import numpy as np
        >>> layer = SelfAttentiveEmbedding(units=8, hops=3, penalty=1.0)
        >>> m, a = layer(np.random.rand(2, 5, 6), return_attention_scores=True)
        >>> tuple(m.shape), tuple(a.shape), len(layer.losses)
        ((2, 3, 6), (2, 3, 5), 1)

    References:
        Lin et al. A Structured Self-attentive Sentence Embedding. ICLR 2017.
        https://arxiv.org/abs/1703.03130
    """

    def __init__(self, units=350, hops=30, penalty=1.0, **kwargs):
        super().__init__(**kwargs)
        self.units = checks.positive_int("units", units)
        self.hops = checks.positive_int("hops", hops)
        self.penalty = checks.non_negative_float("penalty", penalty)
        self.supports_masking = True

    def build(self, inputs_shape):
        self.ws1 = keras.layers.Dense(self.units, use_bias=False, name="ws1", dtype=self.dtype_policy)
        self.ws1.build(inputs_shape)
        self.ws2 = keras.layers.Dense(self.hops, use_bias=False, name="ws2", dtype=self.dtype_policy)
        self.ws2.build((*inputs_shape[:-1], self.units))

    def call(self, inputs, mask=None, return_attention_scores=False):
        logits = ops.swapaxes(self.ws2(ops.tanh(self.ws1(inputs))), -1, -2)  # [B, r, T]
        if mask is not None:
            mask = ops.expand_dims(ops.cast(mask, "bool"), -2)  # [B, 1, T]
        attention = masked_softmax(logits, mask)  # A
        embedding = ops.matmul(attention, ops.cast(inputs, attention.dtype))  # M = A H
        if self.penalty > 0:
            gram = ops.matmul(attention, ops.swapaxes(attention, -1, -2))  # A A^T: [B, r, r]
            identity = ops.eye(self.hops, dtype=gram.dtype)
            frobenius = ops.sum(ops.square(gram - identity), axis=(-2, -1))
            self.add_loss(ops.cast(self.penalty, frobenius.dtype) * ops.mean(frobenius))
        if return_attention_scores:
            return embedding, attention
        return embedding

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "hops": self.hops, "penalty": self.penalty})
        return config
