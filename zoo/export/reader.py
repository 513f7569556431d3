"""``Reader``: the exported story-QA ``tf.Module``: a raw story and question in, the answer and attention out.

Sentence splitting, tokenization (tensorflow-text) and vocabulary lookup run inside the graph
(``zoo.data.story_qa.encode_text``), so the SavedModel needs only ``tensorflow`` and
``tensorflow_text`` to load and run.
"""


import tensorflow as tf

from zoo.data.story_qa import encode_text
from zoo.export import saving

STORIES = tf.TensorSpec([None], tf.string, name="story")
QUESTIONS = tf.TensorSpec([None], tf.string, name="question")


class Reader(tf.Module):
    """Wraps a trained ``QAModel`` and the task's word tokenizer.

    ``answer(story [B], question [B])`` -> dict (dense tensors only, for TF Serving):
      - ``answer [B]`` string: the highest-scoring word;
      - ``sentence_attention [B, H, S]`` float32: per hop, the attention over the story's
        sentences (0 on padding);
      - ``word_attention [B, S, W]`` float32: the attention over the story's words (all 0 for a
        model without word-level attention, see ``has_word_attention``);
      - ``sentences [B, S]`` string: the sentences the model read (the last ``memory_size``),
        padded with ""; ``story_tokens [B, S, W]`` string: their tokens, padded with "";
      - ``num_sentences [B]`` int32.
    The story string is the statements one per line, or ended by ``. ! ?`` and a space
    (``zoo.data.story_qa``). ``serving_default`` is ``answer``.
    """

    def __init__(self, model, tokenizer, memory_size, max_words, max_question_words):
        super().__init__(name="reader")
        self.model = model.ensure_built()
        self.tokenizer = tokenizer
        self.memory_size = int(memory_size)
        self.max_words = int(max_words)
        self.max_question_words = int(max_question_words)
        self.answer = tf.function(self._answer, input_signature=[STORIES, QUESTIONS], autograph=False)
        self.serving_default = self.answer

    def _answer(self, story, question):
        ids, question_ids, sentences, tokens = encode_text(self.tokenizer, story, question, self.memory_size,
                                                           self.max_words, self.max_question_words)
        out = self.model.read(ids, question_ids, training=False)
        best = tf.argmax(out["logits"], axis=-1)
        word = out.get("word_attention")
        if word is None:
            word = tf.zeros(tf.shape(ids), tf.float32)
        return {
            "answer": self.tokenizer.id_to_token(best),
            "sentence_attention": tf.cast(out["sentence_attention"], tf.float32),
            "word_attention": tf.cast(word, tf.float32),
            "sentences": sentences.to_tensor(default_value=""),
            "story_tokens": tokens,
            "num_sentences": tf.cast(sentences.row_lengths(), tf.int32),
        }

    def serving_signatures(self):
        return {"serving_default": self.serving_default, "answer": self.answer}

    def save(self, directory, config_yaml=None):
        """Writes the SavedModel; ``config_yaml`` (the run's resolved config) goes to ``assets.extra``.
        A new reader of the same model is traced for it (``zoo.export.saving``)."""
        def build():
            exported = Reader(self.model, self.tokenizer, self.memory_size, self.max_words, self.max_question_words)
            return exported, exported.serving_signatures()

        return saving.save(build, directory, config_yaml)


def answer_batched(answer_fn, stories, questions, batch_size=256):
    """Runs ``answer_fn`` over the pairs in batches: ``{"answer": [str], "sentence_attention":
    [array [H, S_i]], "word_attention": [array [S_i, W]], "story_tokens": [array]}`` (each story's
    attention cut to its own sentences)."""
    out = {"answer": [], "sentence_attention": [], "word_attention": [], "story_tokens": []}
    for start in range(0, len(stories), batch_size):
        result = answer_fn(tf.constant(list(stories[start:start + batch_size])),
                           tf.constant(list(questions[start:start + batch_size])))
        counts = result["num_sentences"].numpy()
        out["answer"].extend(a.decode("utf-8") for a in result["answer"].numpy())
        for i, n in enumerate(counts):
            n = max(int(n), 1)
            out["sentence_attention"].append(result["sentence_attention"][i].numpy()[:, :n])
            out["word_attention"].append(result["word_attention"][i].numpy()[:n])
            out["story_tokens"].append(result["story_tokens"][i].numpy()[:n])
    return out
