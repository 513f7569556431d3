"""``CharTokenizer``: Unicode characters as tokens."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from zoo.data.tokenizers._base import VocabularyTokenizer
from zoo.data.tokenizers._registry import TOKENIZERS


@TOKENIZERS.register("char")
class CharTokenizer(VocabularyTokenizer):
    """Unicode characters as tokens, with normalization, all in TensorFlow ops.

    ``normalize`` (``normalization="unicode"``, the default, used by the dates task): invalid
    UTF-8 replaced by U+FFFD, whitespace runs collapsed to one space, control and format
    characters dropped, NFKC with Unicode case folding (tensorflow-text's ``case_fold_utf8``)
    or plain NFKC, stripped. ``normalization="text"`` uses ``normalize_text``.
    ``tokenize`` gives a ragged ``[B, None]`` of ids; unknown characters map to ``<unk>``.
    ``detokenize`` joins the characters of ids, stopping at ``<eos>`` and dropping specials.
    """

    kind = "char"
    default_normalization = "unicode"

    def __init__(self, vocabulary: Sequence[str], lowercase: bool = True, name: str = None,
                 normalization: str = "unicode"):
        super().__init__(vocabulary, lowercase=lowercase, normalization=normalization, name=name)

    def split(self, strings):
        """Normalized strings -> ragged ``[B, None]`` string tokens."""
        return tf.strings.unicode_split(self.normalize(strings), "UTF-8", errors="replace")

    def _join(self, tokens):
        return tf.strings.reduce_join(tokens, axis=-1, separator="")
