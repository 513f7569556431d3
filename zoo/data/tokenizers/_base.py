"""``VocabularyTokenizer``, the base of every tokenizer, and the text normalization they share.

Everything here runs as TensorFlow ops, so the same code normalizes text at training time and
inside the SavedModel.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from zoo.tokens import EOS_ID, SPECIALS, UNK_ID

NORMALIZATIONS = ("unicode", "text")
DEFAULT_SUBWORD_VOCAB_SIZE = 8000  # wordpiece and sentencepiece with max_size=null (conf/data/tatoeba.yaml)
PUNCTUATION = ",.!?;:"  # d2l separates , . ! ? ; we also separate ; and :


def build_vocabulary(token_lists: Iterable[Sequence[str]], min_freq: int = 1,
                     max_size: Optional[int] = None) -> List[str]:
    """Reserved tokens first, then tokens by descending frequency (ties alphabetical)."""
    counts = Counter(tok for toks in token_lists for tok in toks)
    ranked = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS),
                    key=lambda t: (-counts[t], t))
    if max_size is not None:
        ranked = ranked[: max(0, max_size - len(SPECIALS))]
    return list(SPECIALS) + ranked


def normalize_unicode(strings, lowercase: bool = True):
    """The dates task's normalization: invalid UTF-8 -> U+FFFD, ASCII whitespace runs -> one
    space, control and format characters dropped, NFKC + case folding (or NFKC), stripped."""
    strings = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace")
    strings = tf.strings.regex_replace(strings, r"\s+", " ")
    strings = tf.strings.regex_replace(strings, r"[\p{Cc}\p{Cf}]", "")
    if lowercase:
        strings = tf_text.case_fold_utf8(strings)  # NFKC + Unicode case folding
    else:
        strings = tf_text.normalize_utf8(strings, "NFKC")
    return tf.strings.strip(strings)


def normalize_text(strings, lowercase: bool = True):
    """Canonical text for natural-language corpora (the text references are scored on).

    ``normalize_unicode`` plus: every Unicode space (no-break U+00A0, narrow no-break U+202F,
    thin, ideographic, ...) is a space; typographic apostrophes (U+2019, U+2018, U+02BC) are
    ``'``; no space before ``, . ! ? ; :`` (French typography puts a no-break space before
    ``! ? ; :``, English none: both become ``va!``); French guillemets get one space inside
    (``« oui »``). The result is idempotent: ``normalize_text(normalize_text(x)) == normalize_text(x)``.
    """
    strings = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace")
    strings = tf.strings.regex_replace(strings, r"[\s\p{Z}]+", " ")
    strings = tf.strings.regex_replace(strings, r"[\p{Cc}\p{Cf}]", "")
    if lowercase:
        strings = tf_text.case_fold_utf8(strings)
    else:
        strings = tf_text.normalize_utf8(strings, "NFKC")
    strings = tf.strings.regex_replace(strings, "[\u2018\u2019\u02bc]", "'")
    strings = tf.strings.regex_replace(strings, r"[\s\p{Z}]+", " ")  # NFKC can make spaces
    strings = tf.strings.regex_replace(strings, " ?« ?", " « ")
    strings = tf.strings.regex_replace(strings, " ?» ?", " » ")
    strings = tf.strings.regex_replace(strings, " +", " ")
    strings = tf.strings.regex_replace(strings, f" ([{PUNCTUATION}])", r"\1")
    return tf.strings.strip(strings)


def normalize(strings, normalization: str = "text", lowercase: bool = True):
    """``normalize_unicode`` (``normalization="unicode"``) or ``normalize_text`` (``"text"``)."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"Unknown normalization '{normalization}'. Available: {', '.join(NORMALIZATIONS)}")
    if normalization == "unicode":
        return normalize_unicode(strings, lowercase)
    return normalize_text(strings, lowercase)


def python_normalize(strings: Sequence[str], normalization: str = "text", lowercase: bool = True) -> List[str]:
    """``normalize`` on Python strings."""
    if not len(strings):
        return []
    out = normalize(tf.constant(list(strings), dtype=tf.string), normalization, lowercase)
    return [s.decode("utf-8") for s in out.numpy()]


def separate_punctuation(strings):
    """d2l's rule on canonical text: a space before every ``, . ! ? ; :``."""
    return tf.strings.regex_replace(strings, f"([{PUNCTUATION}])", r" \1")


def join_punctuation(strings):
    """Inverse of ``separate_punctuation`` on space-joined tokens."""
    return tf.strings.regex_replace(strings, f" ([{PUNCTUATION}])", r"\1")


class VocabularyTokenizer(tf.Module):
    """Base class: a fixed vocabulary (specials at ids 0..3) and in-graph lookup tables.

    Subclasses define ``kind`` (the name they register under), ``split`` (strings -> ragged
    string tokens) and ``_join`` (ragged content tokens -> strings); the ``build``, ``fit`` and
    ``from_artifacts`` class methods are what ``make_tokenizer``, ``fit_tokenizer`` and
    ``load_tokenizer`` call, and a kind with other ingredients than a vocabulary overrides them.
    """

    kind = None
    default_normalization = "text"  # what ``normalization=None`` means for this kind

    def __init__(self, vocabulary: Sequence[str], lowercase: bool = True, normalization: str = "text",
                 name: str = None):
        super().__init__(name=name)
        if list(vocabulary[: len(SPECIALS)]) != list(SPECIALS):
            raise ValueError(f"A vocabulary must start with {SPECIALS}; got {list(vocabulary[:4])}")
        if len(set(vocabulary)) != len(vocabulary):
            duplicates = sorted(t for t, c in Counter(vocabulary).items() if c > 1)
            raise ValueError(f"A vocabulary must not repeat tokens; repeated: {duplicates[:10]}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"Unknown normalization '{normalization}'. Available: {', '.join(NORMALIZATIONS)}")
        self.vocabulary = tuple(vocabulary)
        self.lowercase = bool(lowercase)
        self.normalization = normalization
        self._vocab_tensor = tf.constant(self.vocabulary)
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(self._vocab_tensor, tf.range(len(self.vocabulary), dtype=tf.int64)),
            default_value=UNK_ID,
        )

    @classmethod
    def build(cls, vocabulary: Sequence[str] = None, *, model: Optional[bytes] = None, lowercase: bool,
              normalization: Optional[str], name: Optional[str]):
        """The tokenizer from its vocabulary (``make_tokenizer``); ``model`` is for kinds that have one."""
        return cls(vocabulary, lowercase=lowercase, normalization=normalization or cls.default_normalization,
                   name=name)

    @classmethod
    def fit(cls, texts: Sequence[str], *, lowercase: bool, min_freq: int, max_size: Optional[int],
            normalization: Optional[str], name: Optional[str]):
        """Learns the vocabulary from ``texts`` (``fit_tokenizer``): the tokens ``split`` gives,
        at least ``min_freq`` times, the ``max_size`` most frequent (specials included)."""
        probe = cls.build(list(SPECIALS), lowercase=lowercase, normalization=normalization, name=None)
        vocabulary = build_vocabulary(probe.python_split(texts), min_freq=min_freq, max_size=max_size)
        return cls.build(vocabulary, lowercase=lowercase, normalization=normalization, name=name)

    @classmethod
    def from_artifacts(cls, directory: Path, meta: dict, name: Optional[str] = None):
        """The tokenizer ``save_artifacts`` wrote into ``directory`` (``meta``: its ``tokenizer.json``)."""
        vocabulary = (Path(directory) / "vocab.txt").read_text(encoding="utf-8").split("\n")[: meta["vocab_size"]]
        return cls.build(vocabulary, lowercase=meta["lowercase"], normalization=meta["normalization"], name=name)

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def normalize(self, strings):
        return normalize(strings, self.normalization, self.lowercase)

    def split(self, strings):
        raise NotImplementedError

    def lookup(self, tokens):
        return tf.ragged.map_flat_values(self._table.lookup, tokens)

    def tokenize(self, strings):
        return self.lookup(self.split(strings))

    def id_to_token(self, ids):
        return tf.gather(self._vocab_tensor, tf.cast(ids, tf.int64))

    @staticmethod
    def _content_mask(ids):
        """True for ids before the first ``<eos>`` that are not special tokens."""
        ids = tf.cast(ids, tf.int64)
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1), 0)
        return tf.logical_and(before_eos, ids >= len(SPECIALS))

    def detokenize(self, ids):
        """``[B, T]`` ids -> ``[B]`` strings: up to the first ``<eos>``, specials dropped.

        The result is the tokenizer's canonical text (``normalize``): what the SavedModel
        returns and what BLEU is computed on.
        """
        tokens = tf.ragged.boolean_mask(self.id_to_token(ids), self._content_mask(ids))
        return self._join(tokens)

    def _join(self, tokens):
        raise NotImplementedError

    def python_split(self, strings: Sequence[str]) -> List[List[str]]:
        """The same tokens as ``split``, as Python lists (for vocabulary building)."""
        ragged = self.split(tf.constant(list(strings), dtype=tf.string))
        return [[t.decode("utf-8") for t in row] for row in ragged.to_list()]

    def python_normalize(self, strings: Sequence[str]) -> List[str]:
        """``normalize`` on Python strings."""
        return python_normalize(strings, self.normalization, self.lowercase)

    def config(self) -> dict:
        return {"kind": self.kind, "lowercase": self.lowercase, "normalization": self.normalization,
                "vocab_size": self.vocab_size, "specials": list(SPECIALS)}

    def save_artifacts(self, directory) -> List[str]:
        """Writes ``vocab.txt`` (one token a line, id = line number), ``tokenizer.json`` (kind
        and options) and the kind's own files (``sentencepiece.model``); returns the paths.
        ``load_tokenizer(directory)`` rebuilds the same tokenizer."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocab = directory / "vocab.txt"
        vocab.write_text("\n".join(self.vocabulary) + "\n", encoding="utf-8")
        meta = directory / "tokenizer.json"
        meta.write_text(json.dumps(self.config(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return [str(vocab), str(meta)]
