"""In-graph tokenizers: the same TensorFlow ops at training time and inside the SavedModel.

Every tokenizer is a ``tf.Module`` with the interface the exported ``Translator`` uses:
``split(strings [B]) -> ragged [B, None] string tokens``, ``lookup(tokens) -> ids``,
``id_to_token(ids)``, ``detokenize(ids [B, T]) -> [B] strings``; plus ``normalize``,
``tokenize`` (= ``lookup(split(...))``), ``python_split``, ``vocabulary``, ``vocab_size`` and
``save_artifacts(directory)``. Ids ``0..3`` are ``<pad> <unk> <bos> <eos>`` in every vocabulary
(``zoo.tokens``).

Kinds, one module each, named as the kind (``fit_tokenizer(kind, texts, ...)``):
  - ``char``: Unicode characters;
  - ``word``: words after d2l's punctuation separation (a space before ``, . ! ? ; :``);
  - ``wordpiece``: the words above cut into WordPiece subwords (``tensorflow_text.WordpieceTokenizer``),
    vocabulary learned by tensorflow-text's WordPiece learner;
  - ``sentencepiece``: a SentencePiece unigram model trained on the normalized text, run with
    ``tensorflow_text.SentencepieceTokenizer``.

A new kind is a module here that registers its ``VocabularyTokenizer`` subclass with
``@TOKENIZERS.register("<module name>")``. Importing this package imports no TensorFlow:
``names()`` reads the module files, and the classes and functions below load on first access
(PEP 562 module ``__getattr__``).
"""

import importlib
from typing import List

from zoo.data.registry import module_names
from zoo.tokens import BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, SPECIALS, UNK, UNK_ID

# Public name -> the submodule that defines it; they import TensorFlow (except _registry).
_LAZY = {
    "TOKENIZERS": "_registry", "make_tokenizer": "_registry", "fit_tokenizer": "_registry",
    "load_tokenizer": "_registry",
    "VocabularyTokenizer": "_base", "build_vocabulary": "_base", "normalize": "_base", "normalize_text": "_base",
    "normalize_unicode": "_base", "python_normalize": "_base", "separate_punctuation": "_base",
    "join_punctuation": "_base", "NORMALIZATIONS": "_base", "PUNCTUATION": "_base",
    "DEFAULT_SUBWORD_VOCAB_SIZE": "_base",
    "CharTokenizer": "char",
    "WordTokenizer": "word",
    "WordPieceTokenizer": "wordpiece", "learn_wordpiece_vocabulary": "wordpiece", "WORDPIECE_SUFFIX": "wordpiece",
    "SentencePieceTokenizer": "sentencepiece", "train_sentencepiece": "sentencepiece",
    "sentencepiece_pieces": "sentencepiece",
}


def names() -> List[str]:
    """Sorted tokenizer kinds: the modules of this package, read from its directory without
    importing them (so without TensorFlow). Equal to ``TOKENIZERS.names()``."""
    return module_names(__name__)


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")


def __dir__():
    return sorted([*globals(), *_LAZY])


__all__ = ["BOS", "BOS_ID", "EOS", "EOS_ID", "PAD", "PAD_ID", "SPECIALS", "UNK", "UNK_ID", "names", *sorted(_LAZY)]
