"""``WordPieceTokenizer`` and its vocabulary learner: subwords of the ``WordTokenizer``'s words."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, List, Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from zoo.data.tokenizers._base import (
    DEFAULT_SUBWORD_VOCAB_SIZE,
    VocabularyTokenizer,
    join_punctuation,
    separate_punctuation,
)
from zoo.data.tokenizers._registry import TOKENIZERS
from zoo.data.tokenizers.word import WordTokenizer
from zoo.tokens import SPECIALS, UNK

WORDPIECE_SUFFIX = "##"


@TOKENIZERS.register("wordpiece")
class WordPieceTokenizer(VocabularyTokenizer):
    """WordPiece subwords of the ``WordTokenizer``'s words (``tensorflow_text.WordpieceTokenizer``).

    Continuation pieces start with ``##`` (``"fatigué" -> ["fatigu", "##é"]``); a word with a
    character outside the vocabulary becomes one ``<unk>``. ``detokenize`` glues ``##`` pieces to
    the piece before them, then undoes the punctuation spacing. The vocabulary is learned by
    tensorflow-text's WordPiece learner (``learn_wordpiece_vocabulary``).
    """

    kind = "wordpiece"

    def __init__(self, vocabulary: Sequence[str], lowercase: bool = True, normalization: str = "text",
                 name: str = None, max_bytes_per_word: int = 100):
        super().__init__(vocabulary, lowercase=lowercase, normalization=normalization, name=name)
        # The WordPiece op asks its table "is this piece in the vocabulary?": missing = -1.
        self._piece_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(self._vocab_tensor, tf.range(len(self.vocabulary), dtype=tf.int64)),
            default_value=-1,
        )
        self.max_bytes_per_word = int(max_bytes_per_word)
        self._wordpiece = tf_text.WordpieceTokenizer(
            self._piece_table, suffix_indicator=WORDPIECE_SUFFIX, max_bytes_per_word=self.max_bytes_per_word,
            token_out_type=tf.string, unknown_token=UNK)

    @classmethod
    def fit(cls, texts: Sequence[str], *, lowercase: bool, min_freq: int, max_size: Optional[int],
            normalization: Optional[str], name: Optional[str]):
        """The learner's vocabulary of ``max_size`` pieces (default ``DEFAULT_SUBWORD_VOCAB_SIZE``)
        from the words of ``texts``; ``min_freq`` is its lowest count threshold."""
        words = WordTokenizer.build(list(SPECIALS), lowercase=lowercase, normalization=normalization, name=None)
        vocabulary = learn_wordpiece_vocabulary(words.python_split(texts),
                                                vocab_size=max_size or DEFAULT_SUBWORD_VOCAB_SIZE, min_freq=min_freq)
        return cls.build(vocabulary, lowercase=lowercase, normalization=normalization, name=name)

    def split(self, strings):
        words = tf.strings.split(separate_punctuation(self.normalize(strings)))
        return self._wordpiece.tokenize(words).merge_dims(-2, -1)

    def _join(self, tokens):
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        text = tf.strings.regex_replace(text, f"(^| ){WORDPIECE_SUFFIX}", "")
        return join_punctuation(text)

    def config(self) -> dict:
        return dict(super().config(), suffix_indicator=WORDPIECE_SUFFIX, max_bytes_per_word=self.max_bytes_per_word)


def learn_wordpiece_vocabulary(word_lists: Iterable[Sequence[str]], vocab_size: int = DEFAULT_SUBWORD_VOCAB_SIZE,
                               min_freq: int = 1) -> List[str]:
    """A WordPiece vocabulary (specials first) from words, with tensorflow-text's learner.

    ``tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset`` is this learner behind
    BERT's own word splitter, which cuts at every punctuation mark (``j'ai -> j ' ai``) and so
    would not match ``WordTokenizer``'s words nor let ``detokenize`` restore the text; here the
    learner (``wordpiece_tokenizer_learner_lib.learn``) counts exactly the words the tokenizer
    will cut at run time.
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    counts = Counter(word for words in word_lists for word in words)
    for special in SPECIALS:
        counts.pop(special, None)
    if not counts:
        return list(SPECIALS)
    learned = learner.learn(sorted(counts.items()), vocab_size, list(SPECIALS), lower_thresh=max(1, int(min_freq)),
                            max_token_length=50, max_unique_chars=1000, include_joiner_token=True,
                            joiner=WORDPIECE_SUFFIX)
    vocab = list(SPECIALS) + [t for t in learned if t not in SPECIALS]
    return vocab[:vocab_size] if len(vocab) > vocab_size else vocab
