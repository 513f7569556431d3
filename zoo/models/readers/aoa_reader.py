"""Attention-over-attention reader (Cui et al. 2017) for story QA."""

import keras
from keras import ops

import zoo.attention
from zoo.models.readers.qa_model import (
    QAModel,
    make_word_encoder,
    pointer_distribution,
    read_both,
    words_to_sentences,
)
from zoo.models.recurrent.rnn import CELL_RULE
from zoo.models.registry import register_model

CONSTRAINTS = CELL_RULE  # the declared rules, read by the validator (zoo.catalog)


@keras.saving.register_keras_serializable(package="zoo")
class AoAReader(QAModel):
    """Attention-over-attention reader: points at the answer word in the story.

    A shared embedding and bidirectional GRU encode the story's words (all sentences as one
    sequence) and the question (Cui et al. 2017, sec. 3, eq. 1-2); the ``attention_over_attention``
    layer gives the document-level attention ``s = alpha^T beta`` (eq. 3-7), and the answer's
    probability is the pointer sum ``P(w | D, Q) = sum_{i in I(w, D)} s_i`` (eq. 8).

    Answers that are not words of the story (``yes``/``no``, counts ``none``, ``one``, ...)
    cannot be pointed at. With ``generator=True`` a vocabulary classifier
    ``softmax(W_c [q; d])`` on the question summary ``q`` (mean of its states) and the attended
    story ``d = sum_i s_i h_i`` is mixed with the pointer by a learned gate
    ``g = sigmoid(w_g^T [q; d])``: ``P = g P_pointer + (1 - g) P_vocab`` (as See et al. 2017's
    pointer-generator). With ``generator=False`` the reader is the paper's: only story words.

    ``word_attention`` is ``s`` per story word; ``sentence_attention`` ``[B, 1, S]`` its mass
    per sentence.

    References:
        Cui, Chen, Wei, Wang, Liu, Hu. Attention-over-Attention Neural Networks for Reading
        Comprehension. ACL 2017. https://arxiv.org/abs/1607.04423
    """

    has_word_attention = True

    def __init__(self, vocab_size, memory_size, embed_dim=32, hidden_size=32, cell="gru", generator=True, **kwargs):
        super().__init__(**kwargs)
        make_word_encoder(self, vocab_size, memory_size, embed_dim, hidden_size, cell)
        self.generator = bool(generator)
        self.aoa = zoo.attention.create("attention_over_attention", name="aoa")
        if self.generator:
            self.vocabulary_head = keras.layers.Dense(self.vocab_size, name="vocabulary_head")
            self.gate = keras.layers.Dense(1, activation="sigmoid", name="gate")

    def read(self, story, question, training=None):
        words, word_mask, question_mask, h_doc, h_query = read_both(self, story, question, training)
        s = self.aoa(h_doc, h_query, document_mask=word_mask, query_mask=question_mask)  # [B, S*W]
        p = pointer_distribution(ops.cast(s, "float32"), words, self.vocab_size)
        if self.generator:
            count = ops.maximum(ops.sum(ops.cast(question_mask, h_query.dtype), axis=1, keepdims=True), 1.0)
            q = ops.sum(h_query * ops.cast(ops.expand_dims(question_mask, -1), h_query.dtype), axis=1) / count
            d = ops.einsum("bn,bnd->bd", s, h_doc)
            summary = ops.concatenate([q, d], axis=-1)
            g = ops.cast(self.gate(summary), "float32")
            p = g * p + (1.0 - g) * ops.softmax(ops.cast(self.vocabulary_head(summary), "float32"), axis=-1)
        logits = ops.log(p + 1e-9)
        return {"logits": logits, "sentence_attention": words_to_sentences(s, ops.shape(story)),
                "word_attention": ops.reshape(s, ops.shape(story))}

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "memory_size": self.memory_size, "embed_dim": self.embed_dim, "hidden_size": self.hidden_size,
                       "cell": self.cell, "generator": self.generator})
        return config


@register_model("aoa_reader", task="qa")
def aoa_reader(vocab_size, memory_size, embed_dim=32, hidden_size=32, cell="gru", generator=True, **kwargs):
    return AoAReader(vocab_size, memory_size, embed_dim=embed_dim, hidden_size=hidden_size, cell=cell, generator=generator,
                     name="aoa_reader", **kwargs)
