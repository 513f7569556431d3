"""Self-attentive reader (Lin et al. 2017's structured self-attentive embedding) for story QA."""

import keras
from keras import ops

import zoo.attention
from zoo import checks
from zoo.models.readers.qa_model import QAModel, make_word_encoder, read_both
from zoo.models.recurrent.rnn import CELL_RULE
from zoo.models.registry import register_model

CONSTRAINTS = CELL_RULE  # the declared rules, read by the validator (zoo.catalog)


@keras.saving.register_keras_serializable(package="zoo")
class SelfAttentiveReader(QAModel):
    """A multi-hop self-attentive embedding of the story, conditioned on the question, then a classifier.

    A shared embedding and bidirectional GRU encode the story's words ``H`` and the question
    (its summary ``q``: the mean of its states). Each story word's state is joined with the
    question, ``H' = [H; q 1^T]``, and the ``self_attentive`` layer gives ``r`` hops
    ``A = softmax(W_s2 tanh(W_s1 H'^T))`` (Lin et al. 2017, eq. 6) and ``M = A H'``; its
    penalization ``penalty * ||A A^T - I||_F^2`` (eq. 8) is a model loss, added to the answer's
    cross-entropy by the training loop. The answer is ``softmax(W_o relu(W_m flatten(M)))``
    (sec. 2.1's MLP). ``sentence_attention`` ``[B, r, S]`` is each hop's mass per sentence;
    ``word_attention`` the hops' mean over words.

    References:
        Lin, Feng, dos Santos, Yu, Xiang, Zhou, Bengio. A Structured Self-attentive Sentence
        Embedding. ICLR 2017. https://arxiv.org/abs/1703.03130
    """

    has_word_attention = True

    def __init__(self, vocab_size, memory_size, embed_dim=32, hidden_size=32, cell="gru", units=32, hops=4, penalty=0.1,
                 mlp_units=64, **kwargs):
        super().__init__(**kwargs)
        make_word_encoder(self, vocab_size, memory_size, embed_dim, hidden_size, cell)
        self.units = checks.positive_int("units", units)
        self.hops = checks.positive_int("hops", hops)
        self.penalty = checks.non_negative_float("penalty", penalty)
        self.mlp_units = checks.positive_int("mlp_units", mlp_units)
        self.self_attentive = zoo.attention.create("self_attentive", units=self.units, hops=self.hops,
                                                   penalty=self.penalty, name="self_attentive")
        self.mlp = keras.layers.Dense(self.mlp_units, activation="relu", name="mlp")
        self.output_layer = keras.layers.Dense(self.vocab_size, name="output")

    def read(self, story, question, training=None):
        words, word_mask, question_mask, h_story, h_question = read_both(self, story, question, training)
        count = ops.maximum(ops.sum(ops.cast(question_mask, h_question.dtype), axis=1, keepdims=True), 1.0)
        q = ops.sum(h_question * ops.cast(ops.expand_dims(question_mask, -1), h_question.dtype), axis=1) / count
        joined = ops.concatenate([h_story, ops.broadcast_to(ops.expand_dims(q, 1), ops.shape(h_story))], axis=-1)
        m, a = self.self_attentive(joined, mask=word_mask, return_attention_scores=True)  # [B, r, D'], [B, r, S*W]
        logits = self.output_layer(self.mlp(ops.reshape(m, (ops.shape(m)[0], -1))))
        shape = ops.shape(story)
        per_word = ops.reshape(a, (shape[0], self.hops, shape[1], shape[2]))
        return {"logits": ops.cast(logits, "float32"), "sentence_attention": ops.sum(per_word, axis=-1),
                "word_attention": ops.mean(per_word, axis=1)}

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "memory_size": self.memory_size, "embed_dim": self.embed_dim, "hidden_size": self.hidden_size,
                       "cell": self.cell, "units": self.units, "hops": self.hops, "penalty": self.penalty,
                       "mlp_units": self.mlp_units})
        return config


@register_model("self_attentive_reader", task="qa")
def self_attentive_reader(vocab_size, memory_size, embed_dim=32, hidden_size=32, cell="gru", units=32, hops=4, penalty=0.1,
                          mlp_units=64, **kwargs):
    return SelfAttentiveReader(vocab_size, memory_size, embed_dim=embed_dim, hidden_size=hidden_size, cell=cell, units=units,
                               hops=hops, penalty=penalty, mlp_units=mlp_units, name="self_attentive_reader", **kwargs)
