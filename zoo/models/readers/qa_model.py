"""The interface every registered story-QA (``task: qa``) model keeps."""

import keras
from keras import ops

from zoo import checks
from zoo.models.exported_model import ExportedModel


class QAModel(ExportedModel):
    """Reads a story in the light of a question and scores every word of the vocabulary as the answer.

    Subclasses implement ``read(story, question, training)`` -> dict:

    - ``logits [B, V]``: the answer scores (log-probabilities are fine: a softmax of them is
      the distribution);
    - ``sentence_attention [B, H, S]``: for each of the model's ``H`` hops (``self.hops``) a
      distribution over the story's sentences (0 on padding sentences); a word-level reader
      gives the attention mass of each sentence's words;
    - ``word_attention [B, S, W]`` (optional): a distribution over all story words.

    Inputs: ``story [B, S, W]`` word ids (sentences of words, 0 = padding), ``question [B, Wq]``.
    ``call((story, question))`` returns ``logits[:, None, :]`` (``[B, 1, V]``), so the training
    loop's per-token loss against ``answer [B, 1]`` is the answer's cross-entropy.
    """

    hops = 1
    has_word_attention = False

    def ensure_built(self):
        """Builds the weights by reading a story of one word (its layers learn their sizes from a call)."""
        if not self.built:
            self((ops.ones((1, 2, 2), "int32"), ops.ones((1, 2), "int32")))
        return self

    def build_from_config(self, config):  # a loaded .keras file: build, then the weights are set
        self.ensure_built()

    def read(self, story, question, training=None):
        raise NotImplementedError

    def call(self, inputs, training=None):
        story, question = inputs
        return ops.expand_dims(self.read(story, question, training=training)["logits"], 1)


def masks(story, question):
    """``(word_mask [B, S, W], sentence_mask [B, S], question_mask [B, Wq])``, True = a real token."""
    word_mask = ops.not_equal(story, 0)
    return word_mask, ops.any(word_mask, axis=-1), ops.not_equal(question, 0)


def position_weights(word_mask, dim, dtype="float32"):
    """Sukhbaatar et al. (2015) position encoding ``l_kj = (1 - j/J) - (k/d)(1 - 2j/J)`` for word
    ``j = 1..J`` of a sentence of ``J`` real words and feature ``k = 1..d``: ``[..., W, d]`` from
    ``word_mask [..., W]`` (0 on padding)."""
    real = ops.cast(word_mask, dtype)
    big_j = ops.maximum(ops.sum(real, axis=-1, keepdims=True), 1.0)[..., None]  # [..., 1, 1]
    j = ops.cast(ops.arange(1, ops.shape(word_mask)[-1] + 1), dtype)[:, None]  # [W, 1]
    k = ops.cast(ops.arange(1, dim + 1), dtype)[None, :] / dim  # [1, d]
    return ((1.0 - j / big_j) - k * (1.0 - 2.0 * j / big_j)) * real[..., None]


def pointer_distribution(weights, ids, vocab_size):
    """``P(w) = sum_{i: ids_i = w} weights_i`` (Kadlec et al. 2016's pointer sum; Cui et al. 2017,
    eq. 8): ``weights [B, N]`` over positions holding ``ids [B, N]`` -> ``[B, V]``."""
    return ops.einsum("bn,bnv->bv", weights, ops.one_hot(ids, vocab_size, dtype=weights.dtype))


def words_to_sentences(word_weights, shape):
    """Word weights ``[B, S*W]`` -> the mass of each sentence ``[B, 1, S]``."""
    return ops.expand_dims(ops.sum(ops.reshape(word_weights, shape), axis=-1), 1)


def make_word_encoder(model, vocab_size, memory_size, embed_dim, hidden_size, cell="gru"):
    """Validates the word encoder's arguments and sets them on ``model`` (``model.vocab_size``,
    ``memory_size``, ``embed_dim``, ``hidden_size``, ``cell``), then sets ``model.embedding``,
    ``model.encoder`` (a bidirectional ``cell`` RNN, ``hidden_size`` per direction, shared by the
    story's sentences and the question as in Cui et al. 2017) and ``model.temporal`` (an embedding of
    each sentence's age, as Sukhbaatar et al. 2015's temporal encoding)."""
    from zoo.models.recurrent.rnn import RNN_CELLS, make_rnn

    model.vocab_size = vocab_size = checks.positive_int("vocab_size", vocab_size)
    model.embed_dim = embed_dim = checks.positive_int("embed_dim", embed_dim)
    model.hidden_size = hidden_size = checks.positive_int("hidden_size", hidden_size)
    model.cell = cell = checks.choice("cell", cell, RNN_CELLS)
    model.memory_size = memory_size = checks.positive_int("memory_size", memory_size)
    model.embedding = keras.layers.Embedding(vocab_size, embed_dim, name="embedding", dtype=model.dtype_policy)
    model.encoder = make_rnn(cell, hidden_size, "encoder", bidirectional=True, dtype=model.dtype_policy)
    model.temporal = keras.layers.Embedding(memory_size, 2 * hidden_size, name="temporal",
                                            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.1),
                                            dtype=model.dtype_policy)


def encode_words(model, ids, mask, training=None):
    """``[B, T]`` ids -> ``[B, T, 2 * hidden_size]`` states of ``model.encoder`` (padding skipped)."""
    return model.encoder(model.embedding(ids), mask=mask, training=training)[0]


def encode_story(model, story, training=None):
    """``story [B, S, W]`` -> ``[B, S * W, 2 * hidden_size]``: each sentence read by ``model.encoder``
    on its own (short sequences: fast on a CPU), plus the temporal encoding of its age (the last
    sentence 0), so a reader can tell the latest of two matching sentences."""
    shape = ops.shape(story)
    batch, sentences, words = shape[0], shape[1], shape[2]
    word_mask, sentence_mask, _ = masks(story, story[:, 0])
    flat = ops.reshape(story, (batch * sentences, words))
    states = encode_words(model, flat, ops.reshape(word_mask, (batch * sentences, words)), training)
    states = ops.reshape(states, (batch, sentences, words, ops.shape(states)[-1]))
    count = ops.sum(ops.cast(sentence_mask, "int32"), axis=-1, keepdims=True)
    age = ops.clip(count - 1 - ops.arange(sentences)[None, :], 0, model.temporal.input_dim - 1)
    states = states + ops.expand_dims(model.temporal(age), 2)
    states = states * ops.cast(ops.expand_dims(word_mask, -1), states.dtype)
    return ops.reshape(states, (batch, sentences * words, ops.shape(states)[-1]))


def read_both(model, story, question, training=None):
    """What every word-level reader does first: ``(words [B, S*W], word_mask, question_mask,
    h_story [B, S*W, 2h], h_question [B, Tq, 2h])`` from the story and the question."""
    words = flat_story(story)
    word_mask, _, question_mask = masks(words, question)
    return (words, word_mask, question_mask, encode_story(model, story, training),
            encode_words(model, question, question_mask, training))


def flat_story(story):
    """``[B, S, W]`` -> ``[B, S * W]``: the story as one word sequence (sentence padding inside)."""
    shape = ops.shape(story)
    return ops.reshape(story, (shape[0], shape[1] * shape[2]))
