"""Attention-over-attention reader (Cui et al.)."""

import keras
from keras import ops

from zoo.attention.base_attention import masked_softmax, register_attention


@register_attention("attention_over_attention")
@keras.saving.register_keras_serializable(package="zoo")
class AttentionOverAttention(keras.layers.Layer):
    """Attention-over-attention of Cui et al. (2017): attention weighted by attention.

    ``M(i, j) = h_doc(i)^T h_query(j)`` (Cui et al. 2017, eq. 3), the pair-wise matching matrix;
    ``alpha(t) = softmax(M(1, t), ..., M(|D|, t))`` (eq. 4), the column-wise
    (query-to-document) attentions; ``beta(t) = softmax(M(t, 1), ..., M(t, |Q|))`` (eq. 5), the
    row-wise (document-to-query) attentions; ``beta = 1/n sum_t beta(t)`` (eq. 6), the averaged
    query-level attention; ``s = alpha^T beta`` (eq. 7), the final document-level attention.

    The word probability of eq. 8, ``P(w | D, Q) = sum_{i in I(w, D)} s_i``, is a pointer sum
    left to the caller (see the example). Masks: ``alpha`` is normalized over the real
    document positions, ``beta(t)`` over the real query positions, the average runs over the
    ``n`` real document positions, so ``s`` sums to 1 over the real document positions and
    is exactly 0 on padding. The layer has no weights.

    Shapes: ``B`` batch, ``|D|`` document steps, ``|Q|`` query steps, ``d`` features (the
    same for both).
    Cost: ``O(B |D| |Q| d)`` time, ``O(B |D| |Q|)`` memory.

    Args:
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        document: ``h_doc [B, |D|, d]``.
        query: ``h_query [B, |Q|, d]``.
        document_mask: optional bool ``[B, |D|]``, True = a real step (Keras masks are used).
        query_mask: optional bool ``[B, |Q|]``.
        return_attention_scores: bool, also return ``alpha`` and the averaged ``beta``.

    Returns:
        ``s [B, |D|]``, or ``(s, alpha [B, |D|, |Q|], beta [B, |Q|])`` with
        ``return_attention_scores=True``.

    Example:
        >>> import numpy as np
        >>> layer = AttentionOverAttention()
        >>> s = layer(np.random.rand(2, 7, 4), np.random.rand(2, 3, 4))
        >>> word_ids = np.array([[1, 2, 1, 3, 4, 2, 5]] * 2)
        >>> p = keras.ops.einsum("bd,bdv->bv", s, keras.ops.one_hot(word_ids, 6))  # eq. 8
        >>> tuple(s.shape), tuple(p.shape), np.allclose(keras.ops.sum(p, axis=-1), 1.0)
        ((2, 7), (2, 6), True)

    References:
        Cui, Chen, Wei, Wang, Liu, Hu. Attention-over-Attention Neural Networks for Reading
        Comprehension. ACL 2017, sec. 3. https://arxiv.org/abs/1607.04423
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, document, query, *, document_mask=None, query_mask=None, return_attention_scores=False):
        document = ops.convert_to_tensor(document, self.compute_dtype)
        query = ops.convert_to_tensor(query, self.compute_dtype)
        matching = ops.matmul(document, ops.swapaxes(query, -1, -2))  # M: [B, |D|, |Q|]
        mask = None
        doc_mask = None
        if document_mask is not None:
            doc_mask = ops.expand_dims(ops.cast(document_mask, "bool"), -1)  # [B, |D|, 1]
            mask = doc_mask
        if query_mask is not None:
            q_mask = ops.expand_dims(ops.cast(query_mask, "bool"), -2)  # [B, 1, |Q|]
            mask = q_mask if mask is None else ops.logical_and(mask, q_mask)
        if mask is not None:
            mask = ops.broadcast_to(mask, ops.shape(matching))
        alpha = masked_softmax(matching, mask, axis=-2)  # column-wise, over the document
        beta = masked_softmax(matching, mask, axis=-1)  # row-wise, over the query
        if doc_mask is None:
            beta_avg = ops.mean(beta, axis=-2)
        else:
            n = ops.maximum(ops.sum(ops.cast(doc_mask, beta.dtype), axis=-2), 1.0)  # [B, 1]
            beta_avg = ops.sum(beta, axis=-2) / n
        s = ops.einsum("bdq,bq->bd", alpha, beta_avg)
        if return_attention_scores:
            return s, alpha, beta_avg
        return s

    def compute_mask(self, document, previous_mask=None):
        return None
