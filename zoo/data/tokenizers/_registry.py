"""The tokenizer registry and the three functions that look a kind up in it (no TensorFlow here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

from zoo.data.registry import PackageRegistry

# Every module of zoo.data.tokenizers registers its class under the module's name.
TOKENIZERS = PackageRegistry("tokenizer", "zoo.data.tokenizers")


def make_tokenizer(kind: str, vocabulary: Sequence[str] = None, lowercase: bool = True, name: str = None,
                   normalization: Optional[str] = None, model: Optional[bytes] = None):
    """A tokenizer of ``kind`` from its vocabulary (or, for ``sentencepiece``, its ``model``);
    ``normalization=None`` is the kind's own (``char``: ``unicode``, the others: ``text``)."""
    return TOKENIZERS.get(kind).build(vocabulary, model=model, lowercase=lowercase, normalization=normalization,
                                      name=name)


def fit_tokenizer(kind: str, texts: Sequence[str], lowercase: bool = True, min_freq: int = 2,
                  max_size: Optional[int] = None, name: str = None, normalization: Optional[str] = None):
    """Learns a vocabulary (or a SentencePiece model) from ``texts`` and returns the tokenizer.

    ``min_freq``: char/word: the fewest occurrences a token needs; wordpiece: the learner's
    lowest count threshold; sentencepiece: unused. ``max_size``: the vocabulary size limit
    (specials included); for wordpiece and sentencepiece the target size, default
    ``DEFAULT_SUBWORD_VOCAB_SIZE``. The defaults are ``conf/data/tatoeba.yaml``'s. The result
    depends only on the arguments.
    """
    return TOKENIZERS.get(kind).fit(texts, lowercase=lowercase, min_freq=min_freq, max_size=max_size,
                                    normalization=normalization, name=name)


def load_tokenizer(directory, name: str = None):
    """Rebuilds a tokenizer from the files ``save_artifacts`` wrote."""
    directory = Path(directory)
    meta = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    return TOKENIZERS.get(meta["kind"]).from_artifacts(directory, meta, name=name)
