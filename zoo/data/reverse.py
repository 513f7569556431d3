"""Synthetic transduction: random symbol strings -> the same string reversed (or copied).

Sources are strings over ``alphabet`` (lowercase letters by default) with lengths uniform in
``[min_length, max_length]``; targets are the source reversed (``mode="reverse"``) or copied
(``mode="copy"``). Everything is generated here from a seed with numpy: no download, no file.

The task isolates what attention is for: every output symbol is one input symbol, so a model
that can look back at the source solves it at any length, while an encoder-decoder without
attention must squeeze all ``max_length`` symbols into one state vector (Bahdanau et al. 2015,
sec. 1; Graves et al. 2014's copy task).

No source string is drawn twice, so no string is in two splits. A string drawn again is
dropped and another one drawn; the shortest lengths therefore hold fewer examples when their
strings run out (there are only 26 one-letter strings).

**Length generalisation.** ``test_min_length``/``test_max_length`` draw the test split from its
own length range (``None``: the training range), e.g. train on 1-40 and test on 41-160: whether a
model (and its position scheme) still reverses strings longer than any it saw (Press et al. 2022;
Kazemnejad et al. 2023). Test strings are drawn from their own seed stream and never equal a
training or validation string; the task's maximum lengths cover both ranges, so no test input is
cut and decoding may run as long as the longest test target.

``build_task`` is ``data=reverse`` (``conf/data/reverse.yaml``); TensorFlow is imported only when
it fits the tokenizers.
"""

from __future__ import annotations

from typing import Collection, Dict, List, Optional, Tuple

import numpy as np

from zoo.checks import enforce_config
from zoo.data import tokenizers
from zoo.data.constraints import LENGTH_RANGE, SPLIT_SIZES
from zoo.data.task import DATASETS, Task
from zoo.errors import ConfigError

ALPHABET = "abcdefghijklmnopqrstuvwxyz"
# The targets are strings over data.alphabet: what the target vocabulary can hold, known before any
# data is generated (zoo.config.target_vocabulary_bound, before TensorFlow starts).
TARGET_VOCABULARY = {"symbols_from": "alphabet", "tokenizers": ("char",)}
MODES = ("reverse", "copy")
# The rules of data.<key>, declared once: the validator reads them before TensorFlow starts
# (zoo.catalog.data_constraints) and build_task raises the same lines (zoo.checks.problem_lines).
CONSTRAINTS = ({"rule": "one_of", "key": "mode", "values": MODES},) + SPLIT_SIZES + LENGTH_RANGE
# data.test_min_length / data.test_max_length may be null (= the training range), which the declared
# rules cannot say: zoo.config.test_length_problems checks them, before TensorFlow starts and here.


def _check(min_length: int, max_length: int, alphabet: str, mode: str) -> None:
    if mode not in MODES:
        raise ConfigError(f"data.mode={mode!r} is not valid. Available: {', '.join(MODES)}")
    if not isinstance(min_length, int) or not isinstance(max_length, int) or not 1 <= min_length <= max_length:
        raise ConfigError(f"data.min_length and data.max_length must be integers with 1 <= min_length <= max_length. "
                         f"Received: min_length={min_length!r}, max_length={max_length!r}")
    if not alphabet or len(set(alphabet)) != len(alphabet) or any(c.isspace() for c in alphabet):
        raise ConfigError(f"data.alphabet must hold distinct non-space characters. Received: alphabet={alphabet!r}")


def capacity(min_length: int, max_length: int, alphabet: str = ALPHABET) -> int:
    """Number of distinct strings with a length in ``[min_length, max_length]``."""
    return sum(len(alphabet) ** n for n in range(min_length, max_length + 1))


def generate(num_examples: int, seed: int, min_length: int = 1, max_length: int = 50,
             alphabet: str = ALPHABET, exclude: Collection[str] = ()) -> List[str]:
    """``num_examples`` distinct source strings, the same for the same arguments; none of ``exclude``.

    Raises:
        ConfigError: for bad lengths or alphabet, or more strings than half the lengths hold.
    """
    _check(min_length, max_length, alphabet, "reverse")
    room = capacity(min_length, max_length, alphabet)
    exclude = set(exclude)
    room -= sum(min_length <= len(s) <= max_length for s in exclude)
    if num_examples > room // 2:
        raise ConfigError(f"Asked for {num_examples} distinct strings but lengths {min_length}-{max_length} over "
                         f"{len(alphabet)} symbols hold {room}; ask for at most {room // 2} or allow longer strings.")
    rng = np.random.default_rng(seed)
    symbols = np.frombuffer(alphabet.encode("utf-32-le"), dtype=np.uint32)
    out: Dict[str, None] = {}
    while len(out) < num_examples:
        n = max(64, int(1.1 * (num_examples - len(out))))
        lengths = rng.integers(min_length, max_length + 1, size=n)
        codes = symbols[rng.integers(0, len(alphabet), size=(n, max_length))]
        rows = codes.view(f"<U{max_length}").ravel()  # one fixed-width string per row
        for row, length in zip(rows.tolist(), lengths.tolist()):
            if row[:length] in exclude:
                continue
            out.setdefault(row[:length])
            if len(out) == num_examples:
                break
    return list(out)


def transform(sources: List[str], mode: str = "reverse") -> List[str]:
    """The targets of ``sources``: each reversed (``reverse``) or unchanged (``copy``)."""
    _check(1, 1, ALPHABET, mode)
    return [s[::-1] for s in sources] if mode == "reverse" else list(sources)


def test_lengths(min_length: int, max_length: int, test_min_length: Optional[int] = None,
                 test_max_length: Optional[int] = None) -> Tuple[int, int]:
    """The test split's length range: ``test_min_length``/``test_max_length``, ``None`` the training one's."""
    return (min_length if test_min_length is None else test_min_length,
            max_length if test_max_length is None else test_max_length)


def splits(train_size: int, val_size: int, test_size: int, seed: int, min_length: int = 1, max_length: int = 50,
           alphabet: str = ALPHABET, mode: str = "reverse", test_min_length: Optional[int] = None,
           test_max_length: Optional[int] = None) -> Dict[str, Tuple[List[str], List[str]]]:
    """Train/val/test as ``{split: (sources, targets)}``; no source string is in two splits. With
    ``test_min_length``/``test_max_length`` the test strings have lengths in that range instead."""
    _check(min_length, max_length, alphabet, mode)
    sizes = {"train": train_size, "val": val_size, "test": test_size}
    for name, size in sizes.items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ConfigError(f"data.{name}_size must be a positive integer. Received: {name}_size={size!r}")
    test_range = test_lengths(min_length, max_length, test_min_length, test_max_length)
    if test_range == (min_length, max_length):  # one draw for the three splits, as always
        sources = generate(train_size + val_size + test_size, seed, min_length, max_length, alphabet)
    else:
        _check(*test_range, alphabet, mode)
        sources = generate(train_size + val_size, seed, min_length, max_length, alphabet)
        # the test strings from a seed stream of their own, none equal to a training or validation string
        sources += generate(test_size, seed + 1_000_003, *test_range, alphabet, exclude=sources)
    out, start = {}, 0
    for name, size in sizes.items():
        chunk = sources[start:start + size]
        out[name] = (chunk, transform(chunk, mode))
        start += size
    return out


@DATASETS.register("reverse")
def build_task(mode="reverse", train_size=20000, val_size=500, test_size=2000, min_length=1, max_length=50,
               test_min_length=None, test_max_length=None, alphabet=ALPHABET, seed=0, tokenizer="char",
               bucket_boundaries=(9, 17, 25, 33, 41), **_) -> Task:
    """``data=reverse``: random symbol strings -> reversed (or copied): long sources without a download."""
    from zoo.config import test_length_problems

    enforce_config(CONSTRAINTS, "data", mode=mode, train_size=train_size, val_size=val_size, test_size=test_size,
                   min_length=min_length, max_length=max_length)
    lines = test_length_problems(dict(min_length=min_length, max_length=max_length, test_min_length=test_min_length,
                                      test_max_length=test_max_length))
    if lines:
        raise ConfigError("\n".join(lines))
    if tokenizer != "char":
        raise ConfigError(f"data.tokenizer={tokenizer} is not valid for data=reverse: its symbols are characters. "
                          f"Available: char")
    splits_ = splits(train_size, val_size, test_size, seed=seed, min_length=min_length, max_length=max_length,
                     alphabet=str(alphabet), mode=mode, test_min_length=test_min_length,
                     test_max_length=test_max_length)
    longest = max(max_length, test_lengths(min_length, max_length, test_min_length, test_max_length)[1])
    train_src, train_tgt = splits_["train"]
    options = dict(lowercase=False, min_freq=1)  # every symbol of the training split gets an id
    src_tok = tokenizers.fit_tokenizer("char", train_src, name="source_tokenizer", **options)
    tgt_tok = tokenizers.fit_tokenizer("char", train_tgt, name="target_tokenizer", **options)
    return Task("reverse", splits_, src_tok, tgt_tok,
                max_source_length=longest + 1,  # <eos>; longer inputs are cut to the longest the splits hold
                max_target_length=longest + 1,
                bucket_boundaries=list(bucket_boundaries) if bucket_boundaries else None)
