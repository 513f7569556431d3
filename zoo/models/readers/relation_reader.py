"""Relation reader: Wang et al. (2016)'s input attention to the question's two entities, for story QA."""

import keras
from keras import ops

import zoo.attention
from zoo import checks
from zoo.attention.base_attention import masked_softmax
from zoo.attention.input_attention import COMBINATIONS
from zoo.models.readers.qa_model import QAModel, make_word_encoder, read_both
from zoo.models.recurrent.rnn import CELL_RULE
from zoo.models.registry import register_model

# The declared rules, read by the validator without importing (zoo.catalog).
CONSTRAINTS = CELL_RULE + ({"rule": "one_of", "key": "combination", "values": COMBINATIONS},)


@keras.saving.register_keras_serializable(package="zoo")
class RelationReader(QAModel):
    """Reads the story in the light of the question's two entities ("Are Mary and John in the same place?").

    A shared embedding and bidirectional GRU encode the story's words ``z`` (each sentence on its
    own, plus the temporal encoding of its age) and the question. Two learned pointers over the
    question's states pick the entities, ``pi_j = softmax_t(u_j^T h^q_t)``,
    ``e_j = sum_t pi_{j,t} x_t`` (``x_t`` the question's word embeddings; the encoder's states
    tell the first name from the second). The ``input_attention`` layer (Wang et al. 2016,
    sec. 3.2; survey eq. 14-17) scores every story word against each entity,
    ``alpha^j_i = softmax_i(e_j^T w_i)`` with ``w_i = W z_i`` (the word's state in the embedding
    space), and combines ``r_i`` from ``z_i`` by ``combination`` (``average``,
    ``concatenation`` or ``distance``).

    The entity attentions then read the answer off the story: ``rho^j_s = sum_{i in s} alpha^j_i``
    is entity ``j``'s attention mass on sentence ``s``, ``gamma_{s,k} = softmax_k(z_{s,k}^T W_a q)``
    picks a word within each sentence (``q`` the question's mean state), and
    ``beta^j_{s,k} = rho^j_s gamma_{s,k}`` is a distribution over the story's words whose pointer
    sum ``p_j(w) = sum_{i: word_i = w} beta^j_i`` (Kadlec et al. 2016; as ``aoa_reader``) says
    what entity ``j``'s sentence tells, e.g. where Mary is. Two comparisons answer the yes/no
    questions: ``same = <p_1, p_2>`` (are both entities' answers the same word: "Are Mary and
    John in the same place?") and ``at = <p_1, d_2>`` with ``d_2(w) = sum_{t: question_t = w}
    pi_{2,t}`` (is the second entity the first one's answer: "Is Mary in the kitchen?"). The
    classifier and the gates read ``u = [sum_i r_i; q; same; at]``.

    A second hop follows entity 1 to the person who holds it ("Where is the football?" after
    "Mary took the football"): ``delta_{s,k} = softmax_k(z_{s,k}^T W_h q)`` picks a word within
    each sentence, ``h(w) = sum_{i: word_i = w} rho^1_{s(i)} delta_i`` is the word entity 1's
    sentence names, ``e_3 = sum_w h(w) E_w`` its embedding (``E`` the shared embedding table),
    read by the same input attention, ``alpha^3_i = softmax_i(e_3^T w_i)``, and pointed through
    as above: ``rho^3``, ``p_3(w) = sum_{i: word_i = w} rho^3_{s(i)} gamma_i``.

    The answer is ``P = g (c p_1 + (1 - c) p_3) + (1 - g) softmax(W_o relu(W_m u) + W_s [same; at])``
    (the comparisons also reach the answer scores directly: "yes" when ``same`` or ``at`` is high) with
    ``g = sigmoid(w_g^T u)`` and ``c = sigmoid(w_c^T u)`` (its bias starts at -2, ``c = 0.12``:
    the hop gets the gradient from the start): the pointers for story words, the classifier for ``yes``/``no`` and
    counts. For a one-entity question both pointers may pick the same word.

    ``sentence_attention`` ``[B, 3, S]``: ``rho^1``, ``rho^2``, ``rho^3`` (the rows play the
    role of hops); ``word_attention``: ``(alpha^1 + alpha^2) / 2`` per word.

    References:
        Wang, Cao, de Melo, Liu. Relation Classification via Multi-Level Attention CNNs.
        ACL 2016. https://aclanthology.org/P16-1123/
        Kadlec, Schmid, Bajgar, Kleindienst. Text Understanding with the Attention Sum Reader
        Network. ACL 2016. https://arxiv.org/abs/1603.01547
    """

    hops = 3
    has_word_attention = True

    def __init__(self, vocab_size, memory_size, embed_dim=32, hidden_size=32, cell="gru", combination="concatenation",
                 mlp_units=64, **kwargs):
        super().__init__(**kwargs)
        make_word_encoder(self, vocab_size, memory_size, embed_dim, hidden_size, cell)
        self.combination = checks.choice("combination", combination, COMBINATIONS)
        self.mlp_units = checks.positive_int("mlp_units", mlp_units)
        self.entity_pointers = keras.layers.Dense(2, use_bias=False, name="entity_pointers")
        self.word_projection = keras.layers.Dense(self.embed_dim, use_bias=False, name="word_projection")
        self.input_attention = zoo.attention.create("input_attention", combination=self.combination,
                                                    name="input_attention")
        self.answer_query = keras.layers.Dense(2 * self.hidden_size, use_bias=False, name="answer_query")
        self.mlp = keras.layers.Dense(self.mlp_units, activation="relu", name="mlp")
        self.output_layer = keras.layers.Dense(self.vocab_size, name="output")
        self.compare = keras.layers.Dense(self.vocab_size, use_bias=False, name="compare")
        self.gate = keras.layers.Dense(1, activation="sigmoid", name="gate")
        self.holder_query = keras.layers.Dense(2 * self.hidden_size, use_bias=False, name="holder_query")
        self.hop_gate = keras.layers.Dense(1, activation="sigmoid", bias_initializer=keras.initializers.Constant(-2.0),
                                           name="hop_gate")  # starts on p_3 (c = 0.12)

    def read(self, story, question, training=None):
        words, word_mask, question_mask, z, h_question = read_both(self, story, question, training)
        shape = ops.shape(story)
        batch, sentences, width = shape[0], shape[1], shape[2]
        pointer = masked_softmax(ops.swapaxes(self.entity_pointers(h_question), 1, 2),
                                 ops.expand_dims(question_mask, 1))  # pi_j: [B, 2, Wq]
        entities = ops.einsum("bjt,btd->bjd", pointer, self.embedding(question))  # e_j
        r, alpha = self.input_attention(z, entities[:, 0], entities[:, 1], words=self.word_projection(z),
                                        sentence_mask=word_mask, return_attention_scores=True)
        count = ops.maximum(ops.sum(ops.cast(question_mask, z.dtype), axis=1, keepdims=True), 1.0)
        q = ops.sum(h_question * ops.cast(ops.expand_dims(question_mask, -1), z.dtype), axis=1) / count
        per_word = ops.reshape(alpha, (batch, 2, sentences, width))
        rho = ops.sum(per_word, axis=-1)  # rho^j_s: each entity's attention mass per sentence [B, 2, S]
        story_words = ops.reshape(z, (batch, sentences, width, -1))
        sentence_words = ops.reshape(word_mask, (batch, sentences, width))
        one_hot = ops.one_hot(words, self.vocab_size, dtype="float32")  # [B, S*W, V]
        local = masked_softmax(ops.einsum("bswd,bd->bsw", story_words, self.answer_query(q)),
                               sentence_words)  # gamma_{s,k}: [B, S, W]
        beta = ops.reshape(ops.expand_dims(rho, -1) * ops.expand_dims(local, 1), (batch, 2, -1))  # [B, 2, S*W]
        places = ops.einsum("bjn,bnv->bjv", ops.cast(beta, "float32"), one_hot)  # p_j: [B, 2, V]
        # The second hop: the person of entity 1's sentence (who holds the football) is read like an entity.
        holder_word = masked_softmax(ops.einsum("bswd,bd->bsw", story_words, self.holder_query(q)),
                                     sentence_words)  # delta_{s,k}
        holder = ops.einsum("bn,bnv->bv", ops.cast(ops.reshape(ops.expand_dims(rho[:, 0], -1) * holder_word,
                                                               (batch, -1)), "float32"), one_hot)  # h: [B, V]
        e_3 = ops.matmul(ops.cast(holder, z.dtype), self.embedding.embeddings)  # [B, D]
        _, alpha_3 = self.input_attention(z, e_3, e_3, words=self.word_projection(z), sentence_mask=word_mask,
                                          return_attention_scores=True)
        rho_3 = ops.sum(ops.reshape(alpha_3[:, 0], (batch, sentences, width)), axis=-1)  # [B, S]
        beta_3 = ops.reshape(ops.expand_dims(rho_3, -1) * local, (batch, -1))
        place_3 = ops.einsum("bn,bnv->bv", ops.cast(beta_3, "float32"), one_hot)  # p_3
        identity = ops.einsum("bjt,btv->bjv", ops.cast(pointer, "float32"),
                              ops.one_hot(question, self.vocab_size, dtype="float32"))  # d_j: [B, 2, V]
        same = ops.sum(places[:, 0] * places[:, 1], axis=-1, keepdims=True)  # <p_1, p_2>
        at = ops.sum(places[:, 0] * identity[:, 1], axis=-1, keepdims=True)  # <p_1, d_2>
        summary = ops.concatenate([ops.cast(ops.sum(r, axis=1), "float32"), ops.cast(q, "float32"), same, at],
                                  axis=-1)
        vocabulary = ops.softmax(ops.cast(self.output_layer(self.mlp(summary)), "float32")
                                 + ops.cast(self.compare(ops.concatenate([same, at], axis=-1)), "float32"), axis=-1)
        g = ops.cast(self.gate(summary), "float32")
        c = ops.cast(self.hop_gate(summary), "float32")
        pointed = c * places[:, 0] + (1.0 - c) * place_3
        logits = ops.log(g * pointed + (1.0 - g) * vocabulary + 1e-9)
        return {"logits": logits,
                "sentence_attention": ops.concatenate([rho, ops.expand_dims(rho_3, 1)], axis=1),
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
