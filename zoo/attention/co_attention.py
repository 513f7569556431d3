"""Parallel and alternating co-attention (Lu et al.)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import masked_softmax, register_attention

MODES = ("parallel", "alternating")


@register_attention("co_attention")
@keras.saving.register_keras_serializable(package="zoo")
class CoAttention(keras.layers.Layer):
    """Co-attention of Lu et al. (2016): a question and an image attend to each other.

    Notation of the paper (columns are positions): ``Q [d, T]`` question features,
    ``V [d, N]`` image (or any second sequence's) features.

    ``mode="parallel"`` (sec. 3.3, eq. 3-4): the affinity ``C = tanh(Q^T W_b V)`` ``[T, N]``,
    ``H^v = tanh(W_v V + (W_q Q) C)``, ``H^q = tanh(W_q Q + (W_v V) C^T)``,
    ``a^v = softmax(w_hv^T H^v)``, ``a^q = softmax(w_hq^T H^q)``,
    ``v^ = sum_n a^v_n v_n``, ``q^ = sum_t a^q_t q_t``.

    ``mode="alternating"`` (eq. 5-6): ``x^ = A(X; g)`` with ``H = tanh(W_x X + (W_g g) 1^T)``,
    ``a^x = softmax(w_hx^T H)``, ``x^ = sum_i a^x_i x_i``, applied three times:
    ``s = A(Q; 0)``, ``v^ = A(V; s)``, ``q^ = A(Q; v^)``, each step with its own weights.

    Masked positions get exactly 0 weight and contribute nothing to the affinity; a fully
    masked side gives a 0 summary. No biases, as in the paper.

    Shapes: ``B`` batch, ``T`` question steps, ``N`` image regions, ``Dq``/``Dv`` features,
    ``k`` = ``units``.
    Cost: parallel ``O(B T N (Dv + k) + B (T Dq + N Dv) k)`` time, ``O(B T N)`` memory;
    alternating ``O(B (T Dq + N Dv) k)`` time.

    Args:
        units: positive int or None, the hidden size ``k``; None means the question's
            feature size.
        mode: ``"parallel"`` or ``"alternating"``.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        question: ``[B, T, Dq]``.
        image: ``[B, N, Dv]``.
        question_mask: optional bool ``[B, T]``, True = a real step (Keras masks are used).
        image_mask: optional bool ``[B, N]``.
        return_attention_scores: bool, also return the two attention distributions.

    Returns:
        ``(q_hat [B, Dq], v_hat [B, Dv])``, or ``(q_hat, v_hat, a_q [B, T], a_v [B, N])`` with
        ``return_attention_scores=True``. In alternating mode ``a_v`` is from step 2 and
        ``a_q`` from step 3.

    Example:
        >>> import numpy as np
        >>> layer = CoAttention(units=8, mode="alternating")
        >>> q, v, a_q, a_v = layer(np.random.rand(2, 4, 6), np.random.rand(2, 9, 5),
        ...                        return_attention_scores=True)
        >>> tuple(q.shape), tuple(v.shape), tuple(a_q.shape), tuple(a_v.shape)
        ((2, 6), (2, 5), (2, 4), (2, 9))

    References:
        Lu, Yang, Batra, Parikh. Hierarchical Question-Image Co-Attention for Visual Question
        Answering. NeurIPS 2016, sec. 3.3. https://arxiv.org/abs/1606.00061
    """

    def __init__(self, units=None, mode="parallel", **kwargs):
        super().__init__(**kwargs)
        self.units = checks.positive_int("units", units, allow_none=True)
        self.mode = checks.choice("mode", mode, MODES)
        self.supports_masking = True

    def _dense(self, name, input_shape):
        layer = keras.layers.Dense(self.units or self._question_dim, use_bias=False, name=name,
                                   dtype=self.dtype_policy)
        layer.build(input_shape)
        return layer

    def _vector(self, name):
        return self.add_weight(name=name, shape=(self.units or self._question_dim,), initializer="glorot_uniform")

    def build(self, question_shape, image_shape):
        self._question_dim = question_shape[-1]
        if self.mode == "parallel":
            self.w_b = self.add_weight(name="w_b", shape=(question_shape[-1], image_shape[-1]),
                                       initializer="glorot_uniform")
            self.w_q = self._dense("w_q", question_shape)
            self.w_v = self._dense("w_v", image_shape)
            self.w_hq = self._vector("w_hq")
            self.w_hv = self._vector("w_hv")
        else:
            self.w_x1 = self._dense("w_x1", question_shape)
            self.w_x2 = self._dense("w_x2", image_shape)
            self.w_g2 = self._dense("w_g2", (question_shape[0], question_shape[-1]))
            self.w_x3 = self._dense("w_x3", question_shape)
            self.w_g3 = self._dense("w_g3", (image_shape[0], image_shape[-1]))
            self.w_h1 = self._vector("w_h1")
            self.w_h2 = self._vector("w_h2")
            self.w_h3 = self._vector("w_h3")

    @staticmethod
    def _pool(hidden, w_h, x, mask):
        weights = masked_softmax(ops.einsum("bik,k->bi", hidden, ops.cast(w_h, hidden.dtype)), mask)
        return ops.einsum("bi,bid->bd", weights, ops.cast(x, weights.dtype)), weights

    def call(self, question, image, *, question_mask=None, image_mask=None, return_attention_scores=False):
        question = ops.convert_to_tensor(question, self.compute_dtype)
        image = ops.convert_to_tensor(image, self.compute_dtype)
        if question_mask is not None:
            question_mask = ops.cast(question_mask, "bool")
        if image_mask is not None:
            image_mask = ops.cast(image_mask, "bool")
        if self.mode == "parallel":
            affinity = ops.tanh(ops.einsum("btd,de,bne->btn", question, ops.cast(self.w_b, question.dtype), image))
            if question_mask is not None:
                affinity = affinity * ops.cast(ops.expand_dims(question_mask, -1), affinity.dtype)
            if image_mask is not None:
                affinity = affinity * ops.cast(ops.expand_dims(image_mask, -2), affinity.dtype)
            wq, wv = self.w_q(question), self.w_v(image)  # W_q Q: [B, T, k], W_v V: [B, N, k]
            h_v = ops.tanh(wv + ops.einsum("btn,btk->bnk", affinity, wq))
            h_q = ops.tanh(wq + ops.einsum("btn,bnk->btk", affinity, wv))
            v_hat, a_v = self._pool(h_v, self.w_hv, image, image_mask)
            q_hat, a_q = self._pool(h_q, self.w_hq, question, question_mask)
        else:
            s, _ = self._pool(ops.tanh(self.w_x1(question)), self.w_h1, question, question_mask)
            h_v = ops.tanh(self.w_x2(image) + ops.expand_dims(self.w_g2(s), 1))
            v_hat, a_v = self._pool(h_v, self.w_h2, image, image_mask)
            h_q = ops.tanh(self.w_x3(question) + ops.expand_dims(self.w_g3(v_hat), 1))
            q_hat, a_q = self._pool(h_q, self.w_h3, question, question_mask)
        if return_attention_scores:
            return q_hat, v_hat, a_q, a_v
        return q_hat, v_hat

    def compute_mask(self, question, previous_mask=None):
        return None

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "mode": self.mode})
        return config
