"""End-to-end memory network (Sukhbaatar et al. 2015), with the key-value read of Miller et al. (2016)."""

import keras
from keras import ops

import zoo.attention
from zoo import checks
from zoo.models.readers.qa_model import QAModel, masks, position_weights
from zoo.models.registry import register_model

ENCODINGS = ("bag_of_words", "position", "location_1", "location_2", "location_3", "location_4")
CONSTRAINTS = ({"rule": "one_of", "key": "encoding", "values": ENCODINGS},)  # read by the validator (zoo.catalog)


@keras.saving.register_keras_serializable(package="zoo")
class MemoryNetwork(QAModel):
    """End-to-end memory network (MemN2N) over the story's sentences, ``K`` hops.

    Each hop ``k`` reads the memory with the controller state ``u^k`` (``u^1`` the question):
    ``m_i = sum_j l_j . A^k x_ij + T_A^k(i)``, ``c_i = sum_j l_j . C^k x_ij + T_C^k(i)``,
    ``p = softmax(u^T m_i)`` (Sukhbaatar et al. 2015, eq. 1), ``o = sum_i p_i c_i`` (eq. 2),
    ``u^{k+1} = u^k + o^k`` (sec. 2.2), and ``a = softmax(W (o^K + u^K))`` (eq. 3) over the
    vocabulary. Weights are tied between adjacent hops (sec. 2.2): ``A^{k+1} = C^k``,
    ``B = A^1`` (the question's embedding), ``W^T = C^K``, and likewise the temporal tables.
    The addressing ``p`` is ``zoo.attention``'s ``dot`` layer.

    Sentence encodings (``encoding``): ``bag_of_words`` (``l_j = 1``), ``position``
    (``l_kj = (1 - j/J) - (k/d)(1 - 2j/J)``, sec. 4.1), or ``location_1`` .. ``location_4``: Tang
    et al. (2016)'s four location models, ``zoo.attention``'s ``location_memory`` layer (one
    layer shared by every embedding; models 3-4 learn its location vectors). Temporal encoding
    (``temporal``, sec. 4.1): ``T(i)`` indexed by the sentence's age, the last sentence 0. The
    paper's random noise and linear start are not implemented.

    ``key_value=True`` reads as the key-value memory network of Miller et al. (2016, sec. 3):
    one embedding ``A`` for the question, the keys and the values (keys and values told apart by
    their own temporal tables), ``p = softmax(q^T A Phi_K(k_i))``, ``o = sum_i p_i A Phi_V(v_i)``,
    ``q^{k+1} = R_k (q^k + o)`` with a matrix ``R_k`` per hop (``zoo.attention``'s
    ``key_value_memory`` layer), and the answer ``softmax(q^{K+1 T} B Phi_Y(y))`` with an output
    embedding ``B``.

    Args:
        vocab_size: the word vocabulary (from the data); 0 is padding.
        memory_size: the most sentences a story has (from the data), the temporal tables' rows.
        embed_dim: ``d``.
        hops: ``K``.
        encoding: ``bag_of_words`` or ``position``.
        temporal: add temporal encodings.
        key_value: Miller et al.'s key-value read instead of MemN2N's tied hops.

    References:
        Sukhbaatar, Szlam, Weston, Fergus. End-To-End Memory Networks. NeurIPS 2015.
        https://arxiv.org/abs/1503.08895 -- Miller, Fisch, Dodge, Karimi, Bordes, Weston.
        Key-Value Memory Networks for Directly Reading Documents. EMNLP 2016.
        https://arxiv.org/abs/1606.03126
    """

    has_word_attention = False

    def __init__(self, vocab_size, memory_size, embed_dim=32, hops=3, encoding="position", temporal=True,
                 key_value=False, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = checks.positive_int("vocab_size", vocab_size)
        self.memory_size = checks.positive_int("memory_size", memory_size)
        self.embed_dim = checks.positive_int("embed_dim", embed_dim)
        self.hops = checks.positive_int("hops", hops)
        self.encoding = checks.choice("encoding", encoding, ENCODINGS)
        self.temporal = bool(temporal)
        self.key_value = bool(key_value)
        init = keras.initializers.RandomNormal(stddev=0.1)
        tables = 2 if self.key_value else self.hops + 1
        self.embeddings = [self.add_weight(name=f"embedding_{k}", shape=(self.vocab_size, self.embed_dim),
                                           initializer=init) for k in range(tables)]
        self.temporal_tables = [self.add_weight(name=f"temporal_{k}", shape=(self.memory_size, self.embed_dim),
                                                initializer=init)
                                for k in range(2 if self.key_value else self.hops + 1)] if self.temporal else []
        if self.encoding.startswith("location_"):
            self.location = zoo.attention.create("location_memory", location_model=int(self.encoding[-1]),
                                                 max_length=64, name="location")
        if self.key_value:
            self.memory = zoo.attention.create("key_value_memory", hops=self.hops, name="key_value_memory")
        else:
            self.address = zoo.attention.create("dot", name="address")

    def _encode(self, table, ids, word_mask):
        """``sum_j l_j . E x_j`` over the last axis of ``ids`` (``[..., J]`` -> ``[..., d]``)."""
        embedded = ops.take(table, ids, axis=0) * ops.cast(ops.expand_dims(word_mask, -1), table.dtype)
        if self.encoding == "position":
            embedded = embedded * position_weights(word_mask, self.embed_dim, table.dtype)
        elif self.encoding != "bag_of_words":
            embedded = self.location(embedded, mask=word_mask)
        return ops.sum(embedded, axis=-2)

    def _memory(self, k, story, word_mask, age):
        out = self._encode(self.embeddings[k if not self.key_value else 0], story, word_mask)
        if self.temporal:
            out = out + ops.take(self.temporal_tables[k], age, axis=0)
        return out

    def read(self, story, question, training=None):
        word_mask, sentence_mask, question_mask = masks(story, question)
        count = ops.sum(ops.cast(sentence_mask, "int32"), axis=-1, keepdims=True)  # [B, 1]
        age = ops.clip(count - 1 - ops.arange(ops.shape(story)[1])[None, :], 0, self.memory_size - 1)
        u = self._encode(self.embeddings[0], question, question_mask)  # [B, d]
        if self.key_value:
            keys, values = self._memory(0, story, word_mask, age), self._memory(1, story, word_mask, age)
            u, attention = self.memory(u, keys, values, keys_mask=sentence_mask, return_attention_scores=True)
        else:
            hops = []
            for k in range(self.hops):
                keys, values = self._memory(k, story, word_mask, age), self._memory(k + 1, story, word_mask, age)
                o, p = self.address(ops.expand_dims(u, 1), values, keys, value_mask=sentence_mask,
                                    return_attention_scores=True)
                u = u + o[:, 0]
                hops.append(p[:, 0])
            attention = ops.stack(hops, axis=1)
        logits = ops.matmul(u, ops.transpose(self.embeddings[-1]))
        return {"logits": logits, "sentence_attention": attention}

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "memory_size": self.memory_size, "embed_dim": self.embed_dim,
                       "hops": self.hops, "encoding": self.encoding, "temporal": self.temporal,
                       "key_value": self.key_value})
        return config


@register_model("memory_network", task="qa")
def memory_network(vocab_size, memory_size, embed_dim=32, hops=3, encoding="position", temporal=True,
                   key_value=False, **kwargs):
    return MemoryNetwork(vocab_size, memory_size, embed_dim=embed_dim, hops=hops, encoding=encoding,
                         temporal=temporal, key_value=key_value, name="memory_network", **kwargs)
