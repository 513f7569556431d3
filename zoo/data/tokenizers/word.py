"""``WordTokenizer``: words after d2l's punctuation separation."""

from __future__ import annotations

import tensorflow as tf

from zoo.data.tokenizers._base import VocabularyTokenizer, join_punctuation, separate_punctuation
from zoo.data.tokenizers._registry import TOKENIZERS


@TOKENIZERS.register("word")
class WordTokenizer(VocabularyTokenizer):
    """Words: ``normalize_text``, a space before ``, . ! ? ; :`` (d2l), whitespace split.

    Unknown words map to ``<unk>``. ``detokenize`` joins tokens with spaces and removes the
    space before punctuation again, giving back the canonical text ``normalize`` produces.
    """

    kind = "word"

    def split(self, strings):
        return tf.strings.split(separate_punctuation(self.normalize(strings)))

    def _join(self, tokens):
        return join_punctuation(tf.strings.reduce_join(tokens, axis=-1, separator=" "))
