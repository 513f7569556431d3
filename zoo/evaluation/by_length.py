"""Scores by source length: where a model breaks down as inputs grow.

``by_length`` splits a scored split into bins of source length (in the source tokenizer's
tokens, ``<eos>`` not counted) and scores each bin with every metric of ``zoo.metrics`` registered
``by_length`` (exact match, token accuracy, BLEU, chrF). It reuses predictions already made (no
decoding here). The rows go to ``by_length/<split>.csv`` of a run and are what
``python -m zoo.compare --by-length`` draws.
"""

from __future__ import annotations

import csv
import math
from typing import Dict, List, Optional, Sequence, Tuple

import zoo.metrics
from zoo.tokens import BOS, EOS, PAD

BIN_COLUMNS = ("bin", "min_length", "max_length", "count")
COUNT_COLUMNS = ("min_length", "max_length", "count")
SPECIAL_TOKENS = ("", EOS, PAD, BOS)  # not <unk>: an unknown word is still a word of the sentence


def columns() -> Tuple[str, ...]:
    """The CSV's columns: the bin's, then one per by-length metric (``zoo.metrics.by_length_names()``)."""
    return BIN_COLUMNS + tuple(zoo.metrics.by_length_names())


def _text(token) -> str:
    return token.decode("utf-8") if isinstance(token, bytes) else str(token)


def token_lengths(token_rows: Sequence[Sequence]) -> List[int]:
    """Tokens per row, padding and ``<eos>``/``<bos>`` not counted (rows as ``translate`` returns them)."""
    return [sum(1 for t in row if _text(t) not in SPECIAL_TOKENS) for row in token_rows]


def content_tokens(token_rows: Sequence[Sequence]) -> List[List[str]]:
    """Rows of tokens without padding and specials, as strings."""
    return [[_text(t) for t in row if _text(t) not in SPECIAL_TOKENS] for row in token_rows]


def length_bins(lengths: Sequence[int], num_bins: int = 10) -> List[Tuple[int, int]]:
    """Integer bins ``(low, high)``, both inclusive, of width ``ceil(max / num_bins)`` starting at 1
    (lengths up to 50 in 10 bins: 1-5, 6-10, ..., 46-50), without the bins below ``min(lengths)``.

    The bins depend only on the shortest and longest length, so runs scored on the same split
    share them.
    """
    if not len(lengths):
        return []
    low, high = int(min(lengths)), int(max(lengths))
    width = max(1, math.ceil(high / num_bins))
    first = max(0, (low - 1) // width)
    bins = [(k * width + 1, (k + 1) * width) for k in range(first, max(first + 1, math.ceil(high / width)))]
    return [(0, 0)] + bins if low == 0 else bins  # empty sources get a bin of their own


def by_length(lengths: Sequence[int], hypotheses: Sequence[str], references: Sequence[str],
              hypothesis_tokens: Optional[Sequence[Sequence[str]]] = None,
              reference_tokens: Optional[Sequence[Sequence[str]]] = None,
              num_bins: int = 10) -> List[Dict[str, object]]:
    """One row per non-empty length bin: ``bin``, ``min_length``, ``max_length``, ``count``, and a
    score per by-length metric (``exact_match``, ``token_accuracy`` (None without tokens), ``bleu``,
    ``chrf`` (sacreBLEU, 0-100), ...).

    Example:
        >>> rows = by_length([2, 2, 9], ["ab", "xx", "abcdefghi"], ["ab", "ba", "abcdefghi"], num_bins=2)
        >>> [(r["bin"], r["count"], r["exact_match"]) for r in rows]
        [('1-5', 2, 0.5), ('6-10', 1, 1.0)]
    """
    n = len(lengths)
    if not n == len(hypotheses) == len(references):
        raise ValueError(f"by_length needs one length, hypothesis and reference per example; received "
                         f"{n} lengths, {len(hypotheses)} hypotheses, {len(references)} references")
    tokens = hypothesis_tokens is not None and reference_tokens is not None
    metrics = [zoo.metrics.get(name) for name in zoo.metrics.by_length_names()]
    rows = []
    for low, high in length_bins(lengths, num_bins):
        idx = [i for i, length in enumerate(lengths) if low <= length <= high]
        if not idx:
            continue
        hyp, ref = [hypotheses[i] for i in idx], [references[i] for i in idx]
        inputs = {"hypothesis_tokens": [hypothesis_tokens[i] for i in idx] if tokens else None,
                  "reference_tokens": [reference_tokens[i] for i in idx] if tokens else None}
        row = {"bin": f"{low}-{high}" if high > low else str(low), "min_length": low, "max_length": high,
               "count": len(idx)}
        row.update({metric.name: metric.score(hyp, ref, **inputs) for metric in metrics})
        rows.append(row)
    return rows


def write_csv(rows: Sequence[Dict[str, object]], path: str) -> str:
    """Writes ``rows`` with the ``columns()`` header (empty cells for None); returns ``path``."""
    names = columns()
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in names})
    return path


def read_csv(path: str) -> List[Dict[str, object]]:
    """The rows ``write_csv`` wrote, with numbers as numbers and empty cells as None. Every column
    of ``columns()`` is there (None where the file has none: a run from before a metric existed),
    and so is every column of the file."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        names = list(columns()) + [k for k in (reader.fieldnames or []) if k not in columns()]
    out = []
    for row in rows:
        parsed: Dict[str, object] = {"bin": row["bin"]}
        for key in names[1:]:
            value = row.get(key, "")
            parsed[key] = None if value in ("", None) else (int(value) if key in COUNT_COLUMNS else float(value))
        out.append(parsed)
    return out
