"""Input attention of each word to two entities (Wang et al.)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import masked_softmax, register_attention

COMBINATIONS = ("average", "concatenation", "distance")


@register_attention("input_attention")
@keras.saving.register_keras_serializable(package="zoo")
class InputAttention(keras.layers.Layer):
    """Input attention of Wang et al. (2016): how relevant each word is to each of two entities.

    For a sentence ``w_1 .. w_n`` and two entities ``e_1``, ``e_2`` (vectors in the word
    embedding space), one diagonal attention matrix per entity,
    ``A^j_{i,i} = f(e_j, w_i)`` with ``f`` the inner product (Wang et al. 2016, sec. 3.2;
    survey eq. 14), normalized over the words,
    ``alpha^j_i = exp(A^j_{i,i}) / sum_{i'} exp(A^j_{i',i'})`` (survey eq. 15),
    and the two combined with the word representations ``z_i`` (survey eq. 16-17):

    - ``combination="average"``: ``r_i = z_i (alpha^1_i + alpha^2_i) / 2``;
    - ``combination="concatenation"``: ``r_i = [z_i alpha^1_i; z_i alpha^2_i]``;
    - ``combination="distance"``: ``r_i = z_i (alpha^1_i - alpha^2_i) / 2``, the relation as the
      difference of the two entities' views, after translation-based knowledge-base
      embeddings (the paper calls this "variation").

    ``z_i`` is the representation the next layer reads (in the paper the sliding-window
    concatenation of word and position embeddings); ``words`` are the embeddings scored
    against the entities and default to ``z`` itself. The layer has no weights: what it learns
    comes from the embeddings that feed it. Masked words get exactly 0 weight and a 0 output
    row; a sentence with no real word gives all zeros.

    Shapes: ``B`` batch, ``n`` words, ``D`` word embedding (and entity) size, ``Dz`` the size of
    ``z``.
    Cost: ``O(B n (D + Dz))`` time and memory.

    Args:
        combination: ``"average"``, ``"concatenation"`` or ``"distance"``.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        sentence: ``z [B, n, Dz]``, the representations the output is made of.
        entity_1: ``e_1 [B, D]``.
        entity_2: ``e_2 [B, D]``.
        words: optional ``w [B, n, D]`` scored against the entities; defaults to ``sentence``.
        sentence_mask: optional bool ``[B, n]``, True = a real word (a Keras mask on
            ``sentence`` is used).
        return_attention_scores: bool, also return ``alpha``.

    Returns:
        ``r [B, n, Dz]`` (``[B, n, 2 Dz]`` for ``"concatenation"``), carrying the sentence's mask,
        or ``(r, alpha [B, 2, n])`` with ``return_attention_scores=True`` (row ``j - 1`` is
        ``alpha^j``).

    Example:
        >>> import numpy as np
        >>> words = np.eye(3, 4)[None]  # three one-hot words
        >>> layer = InputAttention(combination="concatenation")
        >>> r, alpha = layer(words, words[:, 0], words[:, 2], return_attention_scores=True)
        >>> tuple(r.shape), np.round(np.asarray(alpha, "float64"), 3).tolist()
        ((1, 3, 8), [[[0.576, 0.212, 0.212], [0.212, 0.212, 0.576]]])

    References:
        Wang, Cao, de Melo, Liu. Relation Classification via Multi-Level Attention CNNs.
        ACL 2016, sec. 3.2. https://aclanthology.org/P16-1123/
        Zhu et al. Research progress of attention mechanism in deep learning, 2019, eq. 14-17.
    """

    def __init__(self, combination="average", **kwargs):
        super().__init__(**kwargs)
        self.combination = checks.choice("combination", combination, COMBINATIONS)
        self.supports_masking = True

    def call(self, sentence, entity_1, entity_2, *, words=None, sentence_mask=None,
             return_attention_scores=False):
        z = ops.convert_to_tensor(sentence, self.compute_dtype)
        w = z if words is None else ops.convert_to_tensor(words, self.compute_dtype)
        entities = ops.stack([ops.convert_to_tensor(entity_1, self.compute_dtype),
                              ops.convert_to_tensor(entity_2, self.compute_dtype)], axis=1)  # [B, 2, D]
        scores = ops.einsum("bjd,bnd->bjn", entities, w)  # A^j_{i,i}: [B, 2, n]
        mask = None
        if sentence_mask is not None:
            mask = ops.expand_dims(ops.cast(sentence_mask, "bool"), 1)  # [B, 1, n]
        alpha = masked_softmax(scores, mask)  # [B, 2, n]
        a1, a2 = ops.expand_dims(alpha[:, 0], -1), ops.expand_dims(alpha[:, 1], -1)  # [B, n, 1]
        if self.combination == "average":
            r = z * (a1 + a2) / 2
        elif self.combination == "concatenation":
            r = ops.concatenate([z * a1, z * a2], axis=-1)
        else:
            r = z * (a1 - a2) / 2
        if return_attention_scores:
            return r, alpha
        return r

    def compute_mask(self, sentence, previous_mask=None):
        return previous_mask

    def compute_output_shape(self, sentence_shape, entity_1_shape=None, entity_2_shape=None):
        width = sentence_shape[-1]
        if self.combination == "concatenation" and width is not None:
            width = 2 * width
        return (*sentence_shape[:-1], width)

    def get_config(self):
        config = super().get_config()
        config.update({"combination": self.combination})
        return config
