"""``data=tatoeba``: translation between English and another language, from a manythings.org pair.

The pipeline, deterministic for a config and a corpus file:

1. find the file (``zoo.data.manythings.resolve_path``) and read every line, skipping and
   counting bad ones; the file's sha256 becomes ``task.fingerprint``;
2. orient the pairs (English -> other; ``reverse=true`` swaps) and keep the first
   ``max_examples`` usable pairs (the files are sorted by length, shortest first, as d2l uses them);
3. normalize both sides (``tokenizers.normalize_text``) and drop pairs with an empty side or more
   than ``max_len`` words;
4. split by the normalized source sentence (all translations of a sentence stay in one split):
   source sentences are shuffled with ``seed``; test, then val take sentences until they hold
   ``test_size``/``val_size`` pairs; train takes the rest (at most ``train_size`` pairs).
   ``val_size=0`` / ``test_size=0`` hold nothing out: that split is the training pairs (d2l
   trains on all its pairs and translates training sentences; stats ``val_is_train``/``test_is_train``);
5. fit the tokenizers on the training split, then drop pairs longer than ``max_len`` tokens of
   those tokenizers (the same as step 3 for ``word``).

Splits hold ``(raw source, canonical target)``: sources are tokenized in the graph like any input
of the SavedModel; targets are the references metrics compare ``detokenize``'s output with.
BLEU (sacreBLEU, 13a) is therefore computed on the canonical text ``normalize_text`` produces:
the raw reference lowercased (``lowercase=true``), NFKC, with one kind of space and apostrophe
and no space before ``, . ! ? ; :``. sacreBLEU's 13a tokenizer splits that punctuation anyway,
so the score equals BLEU against the raw lowercased reference with its own punctuation spacing.

``build_task`` is ``data=tatoeba`` (``conf/data/tatoeba.yaml``, which holds its defaults). Importing
this module imports no TensorFlow; building the task does.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Dict, List, Optional, Sequence

import numpy as np

from zoo.data import manythings, tokenizers
from zoo.data.task import DATASETS, Task, length_boundaries
from zoo.errors import ConfigError, CorpusError

# data.max_size caps a word or character vocabulary (the subword learners take it as a target):
# the bound the config validator checks decoding.beam_size against (zoo.config.target_vocabulary_bound).
TARGET_VOCABULARY = {"size_from": "max_size", "tokenizers": ("word", "char")}
PERCENTILES = (50, 90, 99)


def _positive_int_or_none(key: str, value) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"data.{key}={value!r} is not valid: expected a positive integer or null.")
    return value


def _split_size(key: str, value, total: int) -> int:
    """A fraction in (0, 1) of ``total`` pairs, or a number of pairs; 0 = none held out."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(f"data.{key}={value!r} is not valid: expected a fraction in (0, 1) of the pairs "
                          f"or a positive number of pairs (0: use the training pairs).")
    if value == 0:
        return 0
    if isinstance(value, float) and value < 1:
        return max(1, int(round(value * total)))
    return int(value)


def _word_counts(normalized) -> np.ndarray:
    import tensorflow as tf

    return tf.strings.split(tokenizers.separate_punctuation(normalized)).row_lengths().numpy()


def _normalize(texts: Sequence[str], lowercase: bool):
    import tensorflow as tf

    return tokenizers.normalize_text(tf.constant(list(texts), dtype=tf.string), lowercase)


def _token_lengths(tokenizer, texts: Sequence[str]) -> np.ndarray:
    import tensorflow as tf

    if not texts:
        return np.zeros([0], np.int64)
    return tokenizer.split(tf.constant(list(texts), dtype=tf.string)).row_lengths().numpy()


@DATASETS.register("tatoeba")
def build_task(pair: str = "fra-eng", path: Optional[str] = None, download: bool = False,
               cache_dir: Optional[str] = None, url: Optional[str] = None, sha256: Optional[str] = None,
               reverse: bool = False, tokenizer: str = "word", lowercase: bool = True, min_freq: int = 2,
               max_size: Optional[int] = None, max_examples: Optional[int] = None, max_len: Optional[int] = 30,
               train_size: Optional[int] = None, val_size=0.05, test_size=0.05, seed: int = 0, **unknown) -> Task:
    """The ``tatoeba`` task; see the module docstring. Raises ``ConfigError`` on bad values."""
    if unknown:
        raise ConfigError(f"Unknown key(s) for data=tatoeba: {', '.join(sorted(unknown))}. Keys: pair, path, "
                          f"download, cache_dir, url, sha256, reverse, tokenizer, lowercase, min_freq, max_size, "
                          f"max_examples, max_len, train_size, val_size, test_size, seed")
    if tokenizer not in tokenizers.names():
        raise ConfigError(f"Unknown tokenizer '{tokenizer}' (data.tokenizer). "
                          f"Available: {', '.join(tokenizers.names())}")
    max_examples = _positive_int_or_none("max_examples", max_examples)
    max_len = _positive_int_or_none("max_len", max_len)
    train_size = _positive_int_or_none("train_size", train_size)
    max_size = _positive_int_or_none("max_size", max_size)
    if isinstance(min_freq, bool) or not isinstance(min_freq, int) or min_freq < 1:
        raise ConfigError(f"data.min_freq={min_freq!r} is not valid: expected a positive integer.")
    if max_size is not None and max_size <= 4:
        raise ConfigError(f"data.max_size={max_size} is not valid: the vocabulary needs more than "
                          f"the 4 reserved tokens.")
    language = manythings.pair_language(pair) if pair else None

    corpus_path = manythings.resolve_path(path, pair, download=download, cache_dir=cache_dir, url=url, sha256=sha256)
    corpus = manythings.read_pair_file(corpus_path, language)
    if sha256 and corpus.sha256 != str(sha256).lower():
        raise CorpusError(f"{corpus_path} has sha256 {corpus.sha256}, expected data.sha256={sha256}.")
    dropped = Counter(corpus.dropped)
    pairs = [(other, english) if reverse else (english, other) for english, other in corpus.pairs]
    if max_examples is not None and len(pairs) > max_examples:
        dropped["max_examples"] += len(pairs) - max_examples
        pairs = pairs[:max_examples]
    sources = [s for s, _ in pairs]
    targets = [t for _, t in pairs]

    # Vocabulary-independent filter: empty after normalization, more than max_len words.
    source_norm = _normalize(sources, lowercase)
    target_norm = _normalize(targets, lowercase)
    source_words, target_words = _word_counts(source_norm), _word_counts(target_norm)
    empty = (source_words == 0) | (target_words == 0)
    too_long = np.zeros_like(empty) if max_len is None else (source_words > max_len) | (target_words > max_len)
    too_long &= ~empty
    dropped["empty_side"] += int(empty.sum())
    dropped["too_long"] += int(too_long.sum())
    keep = np.flatnonzero(~(empty | too_long))
    if keep.size == 0:
        raise CorpusError(
            f"{corpus_path}: none of the {len(pairs)} pairs is usable: {int(empty.sum())} have an empty side after "
            f"normalization and {int(too_long.sum())} are longer than data.max_len={max_len} words.")
    source_keys = [s.decode("utf-8") for s in source_norm.numpy()[keep]]
    target_refs = [t.decode("utf-8") for t in target_norm.numpy()[keep]]
    sources = [sources[i] for i in keep]

    total = len(sources)
    sizes = {"test": _split_size("test_size", test_size, total), "val": _split_size("val_size", val_size, total),
             "train": train_size}
    indices = manythings.group_split(source_keys, sizes, seed)
    assigned = sum(len(v) for v in indices.values())
    dropped["train_size"] += total - assigned
    from_train = [name for name in ("val", "test") if sizes[name] == 0]  # size 0: the training pairs
    for name in from_train:
        indices[name] = list(indices["train"])
    for name in ("train", "val", "test"):
        if not indices[name]:
            raise CorpusError(
                f"{corpus_path}: {total} usable pairs ({len(set(source_keys))} distinct source sentences) leave the "
                f"{name} split empty with test_size={test_size}, val_size={val_size}, train_size={train_size}, "
                f"max_examples={max_examples}. Use more pairs or smaller val/test sizes.")

    train_sources = [sources[i] for i in indices["train"]]
    train_targets = [target_refs[i] for i in indices["train"]]
    options = dict(lowercase=lowercase, min_freq=min_freq, max_size=max_size, normalization="text")
    source_tokenizer = tokenizers.fit_tokenizer(tokenizer, train_sources, name="source_tokenizer", **options)
    target_tokenizer = tokenizers.fit_tokenizer(tokenizer, train_targets, name="target_tokenizer", **options)

    # Vocabulary-dependent filter: max_len in the tokenizers' own tokens (subwords, characters).
    splits: Dict[str, tuple] = {}
    lengths = {"source": [], "target": []}
    train_source_lengths: List[int] = []
    for name in ("train", "val", "test"):
        if name in from_train:  # the training pairs, filtered and counted once
            splits[name] = tuple(list(side) for side in splits["train"])
            continue
        src = [sources[i] for i in indices[name]]
        tgt = [target_refs[i] for i in indices[name]]
        src_len, tgt_len = _token_lengths(source_tokenizer, src), _token_lengths(target_tokenizer, tgt)
        ok = (src_len > 0) & (tgt_len > 0)
        dropped["empty_side"] += int((~ok).sum())
        if max_len is not None:
            long = ok & ((src_len > max_len) | (tgt_len > max_len))
            dropped["too_long"] += int(long.sum())
            ok &= ~long
        rows = np.flatnonzero(ok)
        if rows.size == 0:
            raise CorpusError(f"{corpus_path}: the {name} split is empty after the data.max_len={max_len} "
                                         f"filter in {tokenizer} tokens. Raise data.max_len.")
        splits[name] = ([src[i] for i in rows], [tgt[i] for i in rows])
        lengths["source"].extend(src_len[rows].tolist())
        lengths["target"].extend(tgt_len[rows].tolist())
        if name == "train":
            train_source_lengths = (src_len[rows] + 1).tolist()  # + <eos>, as the model sees them

    kept = sum(len(splits[name][0]) for name in ("train", "val", "test") if name not in from_train)
    info: Dict[str, object] = {
        "corpus_file": os.path.basename(corpus.path) + (f":{corpus.member}" if corpus.member else ""),
        "corpus_sha256": corpus.sha256,
        "direction": f"{language or 'other'}->eng" if reverse else f"eng->{language or 'other'}",
        "tokenizer": tokenizer,
        "lines_read": corpus.lines,
        "pairs_read": len(corpus.pairs),
        "pairs_kept": kept,
        "three_column_lines": corpus.three_columns,
        "val_is_train": "val" in from_train,
        "test_is_train": "test" in from_train,
    }
    for reason in (*manythings.DROP_REASONS, "max_examples", "too_long", "train_size"):
        info[f"dropped_{reason}"] = int(dropped.get(reason, 0))
    for repair in manythings.REPAIRS:
        info[f"repaired_{repair}"] = int(corpus.repaired.get(repair, 0))
    for side, values in lengths.items():
        values = np.asarray(values)
        for p in PERCENTILES:
            info[f"{side}_len_p{p}"] = float(np.percentile(values, p))
        info[f"{side}_len_max"] = int(values.max())
    return Task("tatoeba", splits, source_tokenizer, target_tokenizer,
                max_source_length=int(info["source_len_max"]) + 1,
                max_target_length=int(info["target_len_max"]) + 1,
                metric="bleu", fingerprint=corpus.sha256, info=info,
                bucket_boundaries=length_boundaries(train_source_lengths),
                attribution=manythings.ATTRIBUTION)
