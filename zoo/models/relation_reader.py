"""Relation reader: Wang et al. (2016)'s input attention to the question's two entities, for story QA."""

import keras
from keras import ops

import zoo.attention
from zoo import checks
from zoo.attention.base_attention import masked_softmax
from zoo.attention.input_attention import COMBINATIONS
from zoo.models.qa_model import QAModel, make_word_encoder, read_both
from zoo.models.rnn import CELL_RULE, RNN_CELLS
from zoo.models.seq2seq_model import register_model

# The declared rules, read by the validator without importing (zoo.catalog).
CONSTRAINTS = CELL_RULE + ({"rule": "one_of", "key": "combination", "values": COMBINATIONS},)


@keras.saving.register_keras_serializable(package="zoo")
class RelationReader(QAModel):
    """Reads the story in the light of the question's two entities ("Are Mary and John in the same place?").

    A shared embedding and bidirectional GRU encode the story's words ``z`` (one sequence) and
    the question. Two learned pointers over the question's states pick the entities,
    ``e_j = sum_t softmax_t(u_j^T h^q_t) x_t`` (``x_t`` the question's word embeddings; the
    encoder's states tell the first name from the second). The ``input_attention`` layer (Wang
    et al. 2016, sec. 3.2; survey eq. 14-17) scores every story word against each entity,
    ``alpha^j_i = softmax_i(e_j^T w_i)`` with ``w_i = W z_i`` (the word's state in the
    embedding space), and combines ``r_i`` from ``z_i`` by ``combination`` (``average``,
    ``concatenation`` or ``distance``). The answer is ``softmax(W_o relu(W_m [sum_i r_i; q]))``,
    ``q`` the question's mean state. For a one-entity question both pointers may pick the same
    word. ``sentence_attention`` ``[B, 2, S]``: each entity's attention mass per sentence (the
    two rows play the role of hops); ``word_attention``: ``(alpha^1 + alpha^2) / 2`` per word.

    References:
        Wang, Cao, de Melo, Liu. Relation Classification via Multi-Level Attention CNNs.
        ACL 2016. https://aclanthology.org/P16-1123/
    """

    hops = 2
    has_word_attention = True

    def __init__(self, vocab_size, memory_size, embed_dim=32, hidden_size=32, cell="gru", combination="concatenation",
                 mlp_units=64, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = checks.positive_int("vocab_size", vocab_size)
        self.embed_dim = checks.positive_int("embed_dim", embed_dim)
        self.hidden_size = checks.positive_int("hidden_size", hidden_size)
        self.cell = checks.choice("cell", cell, RNN_CELLS)
        self.combination = checks.choice("combination", combination, COMBINATIONS)
        self.mlp_units = checks.positive_int("mlp_units", mlp_units)
        self.memory_size = checks.positive_int("memory_size", memory_size)
        make_word_encoder(self, self.vocab_size, self.memory_size, self.embed_dim, self.hidden_size, self.cell)
        self.entity_pointers = keras.layers.Dense(2, use_bias=False, name="entity_pointers")
        self.word_projection = keras.layers.Dense(self.embed_dim, use_bias=False, name="word_projection")
        self.input_attention = zoo.attention.create("input_attention", combination=self.combination,
                                                    name="input_attention")
        self.mlp = keras.layers.Dense(self.mlp_units, activation="relu", name="mlp")
        self.output_layer = keras.layers.Dense(self.vocab_size, name="output")

    def read(self, story, question, training=None):
        words, word_mask, question_mask, z, h_question = read_both(self, story, question, training)
        pointer = masked_softmax(ops.swapaxes(self.entity_pointers(h_question), 1, 2),
                                 ops.expand_dims(question_mask, 1))  # [B, 2, Wq]
        entities = ops.einsum("bjt,btd->bjd", pointer, self.embedding(question))
        r, alpha = self.input_attention(z, entities[:, 0], entities[:, 1], words=self.word_projection(z),
                                        sentence_mask=word_mask, return_attention_scores=True)
        count = ops.maximum(ops.sum(ops.cast(question_mask, z.dtype), axis=1, keepdims=True), 1.0)
        q = ops.sum(h_question * ops.cast(ops.expand_dims(question_mask, -1), z.dtype), axis=1) / count
        logits = self.output_layer(self.mlp(ops.concatenate([ops.sum(r, axis=1), q], axis=-1)))
        shape = ops.shape(story)
        per_word = ops.reshape(alpha, (shape[0], 2, shape[1], shape[2]))
        return {"logits": ops.cast(logits, "float32"), "sentence_attention": ops.sum(per_word, axis=-1),
                "word_attention": ops.mean(per_word, axis=1)}

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "memory_size": self.memory_size, "embed_dim": self.embed_dim, "hidden_size": self.hidden_size,
                       "cell": self.cell, "combination": self.combination, "mlp_units": self.mlp_units})
        return config


@register_model("relation_reader", task="qa")
def relation_reader(vocab_size, memory_size, embed_dim=32, hidden_size=32, cell="gru", combination="concatenation", mlp_units=64,
                    **kwargs):
    return RelationReader(vocab_size, memory_size, embed_dim=embed_dim, hidden_size=hidden_size, cell=cell,
                          combination=combination, mlp_units=mlp_units, name="relation_reader", **kwargs)
