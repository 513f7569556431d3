"""Co-attention reader (Lu et al. 2016's parallel or alternating co-attention) for story QA."""

import keras
from keras import ops

import zoo.attention
from zoo import checks
from zoo.attention.co_attention import MODES
from zoo.models.readers.qa_model import (
    QAModel,
    make_word_encoder,
    read_both,
    words_to_sentences,
)
from zoo.models.recurrent.rnn import CELL_RULE
from zoo.models.registry import register_model

# The declared rules, read by the validator without importing (zoo.catalog).
CONSTRAINTS = CELL_RULE + ({"rule": "one_of", "key": "mode", "values": MODES},)


@keras.saving.register_keras_serializable(package="zoo")
class CoAttentionReader(QAModel):
    """The question and the story's words attend to each other; a classifier answers.

    A shared embedding and bidirectional GRU encode the story's words (one sequence) and the
    question; the ``co_attention`` layer (Lu et al. 2016, eq. 3-4 ``parallel`` with the affinity
    ``C = tanh(Q^T W_b V)``, or eq. 5-6 ``alternating``) gives the attended question ``q^`` and
    story ``v^``; the answer is ``softmax(W_p tanh(W_h (q^ + v^)))`` over the vocabulary (the
    paper's eq. 7 with one level). ``word_attention`` is ``a^v`` over the story's words,
    ``sentence_attention`` ``[B, 1, S]`` its mass per sentence.

    References:
        Lu, Yang, Batra, Parikh. Hierarchical Question-Image Co-Attention for Visual Question
        Answering. NeurIPS 2016. https://arxiv.org/abs/1606.00061
    """

    has_word_attention = True

    def __init__(self, vocab_size, memory_size, embed_dim=32, hidden_size=32, cell="gru", mode="parallel", units=32, **kwargs):
        super().__init__(**kwargs)
        make_word_encoder(self, vocab_size, memory_size, embed_dim, hidden_size, cell)
        self.mode = checks.choice("mode", mode, MODES)
        self.units = checks.positive_int("units", units)
        self.co_attention = zoo.attention.create("co_attention", units=self.units, mode=self.mode, name="co_attention")
        self.hidden = keras.layers.Dense(2 * self.hidden_size, activation="tanh", name="hidden")
        self.output_layer = keras.layers.Dense(self.vocab_size, name="output")

    def read(self, story, question, training=None):
        words, word_mask, question_mask, h_story, h_question = read_both(self, story, question, training)
        q_hat, v_hat, _, a_v = self.co_attention(h_question, h_story, question_mask=question_mask, image_mask=word_mask,
                                                 return_attention_scores=True)
        logits = self.output_layer(self.hidden(q_hat + v_hat))
        return {"logits": ops.cast(logits, "float32"), "sentence_attention": words_to_sentences(a_v, ops.shape(story)),
                "word_attention": ops.reshape(a_v, ops.shape(story))}

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "memory_size": self.memory_size, "embed_dim": self.embed_dim, "hidden_size": self.hidden_size,
                       "cell": self.cell, "mode": self.mode, "units": self.units})
        return config


@register_model("coattention_reader", task="qa")
def coattention_reader(vocab_size, memory_size, embed_dim=32, hidden_size=32, cell="gru", mode="parallel", units=32, **kwargs):
    return CoAttentionReader(vocab_size, memory_size, embed_dim=embed_dim, hidden_size=hidden_size, cell=cell, mode=mode,
                             units=units, name="coattention_reader", **kwargs)
