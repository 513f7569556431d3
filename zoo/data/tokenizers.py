"""In-graph tokenizers: the same TensorFlow ops at training time and inside the SavedModel."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, List, Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def build_vocabulary(token_lists: Iterable[Sequence[str]], min_freq: int = 1,
                     max_size: Optional[int] = None) -> List[str]:
    """Reserved tokens first, then tokens by descending frequency (ties alphabetical)."""
    counts = Counter(tok for toks in token_lists for tok in toks)
    ranked = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS),
                    key=lambda t: (-counts[t], t))
    if max_size is not None:
        ranked = ranked[: max(0, max_size - len(SPECIALS))]
    return list(SPECIALS) + ranked


class CharTokenizer(tf.Module):
    """Unicode characters as tokens, with normalization, all in TensorFlow ops.

    ``normalize``: invalid UTF-8 replaced by U+FFFD, whitespace runs collapsed to one space,
    control and format characters dropped, NFKC with Unicode case folding (tensorflow-text's
    ``case_fold_utf8``) or plain NFKC, stripped.
    ``tokenize`` gives a ragged ``[B, None]`` of ids; unknown characters map to ``<unk>``.
    ``detokenize`` joins the characters of ids, stopping at ``<eos>`` and dropping specials.
    """

    def __init__(self, vocabulary: Sequence[str], lowercase: bool = True, name: str = None):
        super().__init__(name=name)
        if list(vocabulary[: len(SPECIALS)]) != list(SPECIALS):
            raise ValueError(f"A vocabulary must start with {SPECIALS}; got {list(vocabulary[:4])}")
        self.vocabulary = tuple(vocabulary)
        self.lowercase = bool(lowercase)
        self._vocab_tensor = tf.constant(self.vocabulary)
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(self._vocab_tensor, tf.range(len(self.vocabulary), dtype=tf.int64)),
            default_value=UNK_ID,
        )
        self._special_ids = tf.constant([PAD_ID, UNK_ID, BOS_ID, EOS_ID], dtype=tf.int64)

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def normalize(self, strings):
        strings = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace")
        strings = tf.strings.regex_replace(strings, r"\s+", " ")
        strings = tf.strings.regex_replace(strings, r"[\p{Cc}\p{Cf}]", "")
        if self.lowercase:
            strings = tf_text.case_fold_utf8(strings)  # NFKC + Unicode case folding
        else:
            strings = tf_text.normalize_utf8(strings, "NFKC")
        return tf.strings.strip(strings)

    def split(self, strings):
        """Normalized strings -> ragged ``[B, None]`` string tokens."""
        return tf.strings.unicode_split(self.normalize(strings), "UTF-8", errors="replace")

    def lookup(self, tokens):
        return tf.ragged.map_flat_values(self._table.lookup, tokens)

    def tokenize(self, strings):
        return self.lookup(self.split(strings))

    def id_to_token(self, ids):
        return tf.gather(self._vocab_tensor, tf.cast(ids, tf.int64))

    def detokenize(self, ids):
        """``[B, T]`` ids -> ``[B]`` strings: up to the first ``<eos>``, specials dropped."""
        ids = tf.cast(ids, tf.int64)
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1), 0)
        keep = tf.logical_and(before_eos, ids >= len(SPECIALS))
        tokens = tf.ragged.boolean_mask(self.id_to_token(ids), keep)
        return tf.strings.reduce_join(tokens, axis=-1, separator="")

    def python_split(self, strings: Sequence[str]) -> List[List[str]]:
        """The same tokens as ``split``, as Python lists (for vocabulary building)."""
        ragged = self.split(tf.constant(list(strings)))
        return [[t.decode("utf-8") for t in row] for row in ragged.to_list()]


def make_tokenizer(kind: str, vocabulary: Sequence[str], lowercase: bool = True, name: str = None):
    if kind == "char":
        return CharTokenizer(vocabulary, lowercase=lowercase, name=name)
    raise ValueError(f"Unknown tokenizer '{kind}'. Available: char")


def fit_tokenizer(kind: str, texts: Sequence[str], lowercase: bool = True, min_freq: int = 1,
                  max_size: Optional[int] = None, name: str = None):
    """Learns a vocabulary from ``texts`` and returns the tokenizer."""
    probe = make_tokenizer(kind, list(SPECIALS), lowercase=lowercase)
    vocab = build_vocabulary(probe.python_split(texts), min_freq=min_freq, max_size=max_size)
    return make_tokenizer(kind, vocab, lowercase=lowercase, name=name)
