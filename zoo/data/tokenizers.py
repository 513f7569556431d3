"""In-graph tokenizers: the same TensorFlow ops at training time and inside the SavedModel.

Every tokenizer is a ``tf.Module`` with the interface the exported ``Translator`` uses:
``split(strings [B]) -> ragged [B, None] string tokens``, ``lookup(tokens) -> ids``,
``id_to_token(ids)``, ``detokenize(ids [B, T]) -> [B] strings``; plus ``normalize``,
``tokenize`` (= ``lookup(split(...))``), ``python_split``, ``vocabulary``, ``vocab_size`` and
``save_artifacts(directory)``. Ids ``0..3`` are ``<pad> <unk> <bos> <eos>`` in every vocabulary.

Kinds (``fit_tokenizer(kind, texts, ...)``):
  - ``char``: Unicode characters;
  - ``word``: words after d2l's punctuation separation (a space before ``, . ! ? ; :``);
  - ``wordpiece``: the words above cut into WordPiece subwords (``tensorflow_text.WordpieceTokenizer``),
    vocabulary learned by tensorflow-text's WordPiece learner;
  - ``sentencepiece``: a SentencePiece unigram model trained on the normalized text, run with
    ``tensorflow_text.SentencepieceTokenizer``.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

TOKENIZERS = ("char", "word", "wordpiece", "sentencepiece")
NORMALIZATIONS = ("unicode", "text")
DEFAULT_SUBWORD_VOCAB_SIZE = 8000
PUNCTUATION = ",.!?;:"  # d2l separates , . ! ? ; we also separate ; and :
WORDPIECE_SUFFIX = "##"


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


def separate_punctuation(strings):
    """d2l's rule on canonical text: a space before every ``, . ! ? ; :``."""
    return tf.strings.regex_replace(strings, f"([{PUNCTUATION}])", r" \1")


def join_punctuation(strings):
    """Inverse of ``separate_punctuation`` on space-joined tokens."""
    return tf.strings.regex_replace(strings, f" ([{PUNCTUATION}])", r"\1")


class VocabularyTokenizer(tf.Module):
    """Base class: a fixed vocabulary (specials at ids 0..3) and in-graph lookup tables.

    Subclasses define ``kind``, ``split`` (normalized strings -> ragged string tokens) and
    ``_join`` (ragged content tokens -> strings).
    """

    kind = None

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

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def normalize(self, strings):
        if self.normalization == "unicode":
            return normalize_unicode(strings, self.lowercase)
        return normalize_text(strings, self.lowercase)

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
        if not len(strings):
            return []
        return [s.decode("utf-8") for s in self.normalize(tf.constant(list(strings), dtype=tf.string)).numpy()]

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

    def __init__(self, vocabulary: Sequence[str], lowercase: bool = True, name: str = None,
                 normalization: str = "unicode"):
        super().__init__(vocabulary, lowercase=lowercase, normalization=normalization, name=name)

    def split(self, strings):
        """Normalized strings -> ragged ``[B, None]`` string tokens."""
        return tf.strings.unicode_split(self.normalize(strings), "UTF-8", errors="replace")

    def _join(self, tokens):
        return tf.strings.reduce_join(tokens, axis=-1, separator="")


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


class WordPieceTokenizer(VocabularyTokenizer):
    """WordPiece subwords of the ``WordTokenizer``'s words (``tensorflow_text.WordpieceTokenizer``).

    Continuation pieces start with ``##`` (``"fatigué" -> ["fatigu", "##é"]``); a word with a
    character outside the vocabulary becomes one ``<unk>``. ``detokenize`` glues ``##`` pieces to
    the piece before them, then undoes the punctuation spacing.
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

    def split(self, strings):
        words = tf.strings.split(separate_punctuation(self.normalize(strings)))
        return self._wordpiece.tokenize(words).merge_dims(-2, -1)

    def _join(self, tokens):
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        text = tf.strings.regex_replace(text, f"(^| ){WORDPIECE_SUFFIX}", "")
        return join_punctuation(text)

    def config(self) -> dict:
        return dict(super().config(), suffix_indicator=WORDPIECE_SUFFIX, max_bytes_per_word=self.max_bytes_per_word)


class SentencePieceTokenizer(VocabularyTokenizer):
    """SentencePiece pieces of ``normalize_text`` (``tensorflow_text.SentencepieceTokenizer``).

    ``model`` is the serialized ``ModelProto`` (it is stored inside the SavedModel); the
    vocabulary is its pieces, so ids are the model's own ids (``<pad> <unk> <bos> <eos>`` = 0..3).
    """

    kind = "sentencepiece"

    def __init__(self, model: bytes, lowercase: bool = True, normalization: str = "text", name: str = None):
        model = bytes(model)
        vocabulary = sentencepiece_pieces(model)
        super().__init__(vocabulary, lowercase=lowercase, normalization=normalization, name=name)
        self.model = model
        # The op's model resource is shared by node name once loaded from a SavedModel: two
        # tokenizers with the default name would both run the first model. A name per model fixes it.
        scope = "sentencepiece_" + hashlib.sha256(model).hexdigest()[:16]
        self._sentencepiece = tf_text.SentencepieceTokenizer(model=model, out_type=tf.string, name=scope)

    def split(self, strings):
        return self._sentencepiece.tokenize(self.normalize(strings))

    def detokenize(self, ids):
        ids = tf.cast(ids, tf.int32)
        kept = tf.ragged.boolean_mask(ids, self._content_mask(ids))
        return self._sentencepiece.detokenize(kept)

    def save_artifacts(self, directory) -> List[str]:
        paths = super().save_artifacts(directory)
        model = Path(directory) / "sentencepiece.model"
        model.write_bytes(self.model)
        return paths + [str(model)]


def sentencepiece_pieces(model: bytes) -> List[str]:
    """The pieces of a serialized SentencePiece model, by id."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=model)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def make_tokenizer(kind: str, vocabulary: Sequence[str] = None, lowercase: bool = True, name: str = None,
                   normalization: Optional[str] = None, model: Optional[bytes] = None):
    """A tokenizer of ``kind`` from its vocabulary (or, for ``sentencepiece``, its ``model``)."""
    if kind == "char":
        return CharTokenizer(vocabulary, lowercase=lowercase, name=name, normalization=normalization or "unicode")
    if kind == "word":
        return WordTokenizer(vocabulary, lowercase=lowercase, normalization=normalization or "text", name=name)
    if kind == "wordpiece":
        return WordPieceTokenizer(vocabulary, lowercase=lowercase, normalization=normalization or "text", name=name)
    if kind == "sentencepiece":
        if model is None:
            raise ValueError("A sentencepiece tokenizer needs its serialized model: make_tokenizer(..., model=bytes)")
        return SentencePieceTokenizer(model, lowercase=lowercase, normalization=normalization or "text", name=name)
    raise ValueError(f"Unknown tokenizer '{kind}'. Available: {', '.join(TOKENIZERS)}")


def fit_tokenizer(kind: str, texts: Sequence[str], lowercase: bool = True, min_freq: int = 1,
                  max_size: Optional[int] = None, name: str = None, normalization: Optional[str] = None):
    """Learns a vocabulary (or a SentencePiece model) from ``texts`` and returns the tokenizer.

    ``min_freq``: char/word: the fewest occurrences a token needs; wordpiece: the learner's
    lowest count threshold; sentencepiece: unused. ``max_size``: the vocabulary size limit
    (specials included); for wordpiece and sentencepiece the target size, default
    ``DEFAULT_SUBWORD_VOCAB_SIZE``. The result depends only on the arguments.
    """
    if kind not in TOKENIZERS:
        raise ValueError(f"Unknown tokenizer '{kind}'. Available: {', '.join(TOKENIZERS)}")
    if kind in ("char", "word"):
        probe = make_tokenizer(kind, list(SPECIALS), lowercase=lowercase, normalization=normalization)
        vocab = build_vocabulary(probe.python_split(texts), min_freq=min_freq, max_size=max_size)
        return make_tokenizer(kind, vocab, lowercase=lowercase, name=name, normalization=normalization)
    if kind == "wordpiece":
        probe = make_tokenizer("word", list(SPECIALS), lowercase=lowercase, normalization=normalization)
        vocab = learn_wordpiece_vocabulary(probe.python_split(texts), vocab_size=max_size or DEFAULT_SUBWORD_VOCAB_SIZE,
                                           min_freq=min_freq)
        return make_tokenizer(kind, vocab, lowercase=lowercase, name=name, normalization=normalization)
    probe = make_tokenizer("char", list(SPECIALS), lowercase=lowercase, normalization=normalization or "text")
    model = train_sentencepiece(probe.python_normalize(texts), vocab_size=max_size or DEFAULT_SUBWORD_VOCAB_SIZE)
    return make_tokenizer(kind, lowercase=lowercase, name=name, normalization=normalization, model=model)


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


def train_sentencepiece(texts: Sequence[str], vocab_size: int = DEFAULT_SUBWORD_VOCAB_SIZE,
                        model_type: str = "unigram") -> bytes:
    """Trains a SentencePiece model in memory on already normalized ``texts``; returns its bytes.

    Ids 0..3 are ``<pad> <unk> <bos> <eos>``; SentencePiece's own normalization is NFKC only
    (the text is already canonical), every character of the training text is covered, and
    ``vocab_size`` is a soft limit so that small corpora train too. One thread, so the model is
    the same on every run.
    """
    import sentencepiece as spm

    texts = [t for t in texts if t]
    if not texts:
        raise ValueError("Cannot train a SentencePiece model on no text.")
    required = len(set("".join(texts)) - {" "}) + len(SPECIALS) + 1
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=writer, vocab_size=max(int(vocab_size), required),
        model_type=model_type, character_coverage=1.0, hard_vocab_limit=False,
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
        pad_piece=PAD, unk_piece=UNK, bos_piece=BOS, eos_piece=EOS,
        normalization_rule_name="nfkc", num_threads=1, minloglevel=2,
    )
    return writer.getvalue()


def load_tokenizer(directory, name: str = None):
    """Rebuilds a tokenizer from the files ``save_artifacts`` wrote."""
    directory = Path(directory)
    meta = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    kind = meta["kind"]
    options = dict(lowercase=meta["lowercase"], normalization=meta["normalization"], name=name)
    if kind == "sentencepiece":
        return make_tokenizer(kind, model=(directory / "sentencepiece.model").read_bytes(), **options)
    vocabulary = (directory / "vocab.txt").read_text(encoding="utf-8").split("\n")[: meta["vocab_size"]]
    return make_tokenizer(kind, vocabulary, **options)


__all__ = ["BOS", "BOS_ID", "CharTokenizer", "EOS", "EOS_ID", "PAD", "PAD_ID", "SPECIALS", "SentencePieceTokenizer",
           "TOKENIZERS", "UNK", "UNK_ID", "WordPieceTokenizer", "WordTokenizer", "build_vocabulary", "fit_tokenizer",
           "load_tokenizer", "make_tokenizer", "normalize_text", "normalize_unicode"]
