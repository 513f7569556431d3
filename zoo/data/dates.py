"""The embedded default task: normalizing human-written dates to ISO 8601.

Sources are dates written the many ways people write them ("saturday, 9 may 2018",
"9/5/18", "may 9th, 2018", "09.05.2018"); targets are ISO dates ("2018-05-09").
Everything is generated here, deterministically from a seed: no download, no file.

Every source determines its target uniquely, or no model could reach 100%:
- all dates lie in one 100-year window, so a two-digit year is never ambiguous;
- numeric formats are always day-first (never both "9/5" orders);
- weekday names are always the true weekday of the date.

``build_task`` is ``data=dates`` (``conf/data/dates.yaml``). This module is pure Python: it imports
TensorFlow only when ``build_task`` fits the tokenizers.
"""

from __future__ import annotations

import datetime as _dt
import random
from typing import Dict, List, Sequence, Tuple

from zoo.checks import enforce_config
from zoo.data import tokenizers
from zoo.data.task import DATASETS, Task
from zoo.errors import ConfigError

# What the target vocabulary can hold, known before any data is generated: the config validator
# refuses a beam wider than it before TensorFlow starts (zoo.config.target_vocabulary_bound).
TARGET_VOCABULARY = {"symbols": "0123456789-", "tokenizers": ("char",),
                     "why": "an ISO date is written with 11 symbols, 0-9 and '-'"}
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
MONTHS_ABBR = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
WEEKDAYS_ABBR = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _fields(d: _dt.date) -> Dict[str, str]:
    return {
        "d": str(d.day), "dd": f"{d.day:02d}", "dth": _ordinal(d.day),
        "m": str(d.month), "mm": f"{d.month:02d}",
        "month": MONTHS[d.month - 1], "mon": MONTHS_ABBR[d.month - 1],
        "yyyy": str(d.year), "yy": f"{d.year % 100:02d}",
        "weekday": WEEKDAYS[d.weekday()], "wd": WEEKDAYS_ABBR[d.weekday()],
    }


# Every format is unambiguous inside a 100-year window: numeric ones are day-first only.
FORMATS: Tuple[str, ...] = (
    "{weekday}, {d} {month} {yyyy}",
    "{wd} {d} {mon} {yyyy}",
    "{wd}, {mon} {d}, {yyyy}",
    "{weekday} {dth} of {month} {yyyy}",
    "{d} {month} {yyyy}",
    "{d} {mon} {yyyy}",
    "{d} {month} {yy}",
    "{d} {mon} {yy}",
    "{dd} {mon} {yyyy}",
    "{month} {d}, {yyyy}",
    "{mon} {d} {yyyy}",
    "{month} {dth}, {yyyy}",
    "{mon} {dth} {yy}",
    "{dth} {month} {yyyy}",
    "{dth} of {month}, {yyyy}",
    "the {dth} of {month} {yyyy}",
    "{d}/{m}/{yy}",
    "{dd}/{mm}/{yyyy}",
    "{d}/{m}/{yyyy}",
    "{dd}.{mm}.{yyyy}",
    "{d}.{m}.{yy}",
    "{dd}-{mm}-{yyyy}",
    "{d}-{m}-{yy}",
    "{yyyy}-{mm}-{dd}",
    "{yyyy}/{mm}/{dd}",
    "{dd}{mm}{yyyy}",
)


def render(date: _dt.date, fmt: str) -> str:
    """Writes ``date`` in the human format ``fmt`` (one of ``FORMATS``)."""
    return fmt.format(**_fields(date))


def iso(date: _dt.date) -> str:
    return date.isoformat()


def generate(num_examples: int, seed: int, min_year: int = 1950, max_year: int = 2049,
             formats: Sequence[str] = FORMATS) -> List[Tuple[str, str]]:
    """``num_examples`` distinct (source, target) pairs, the same for the same arguments.

    Raises:
        ConfigError: if the year window is not inside 100 years (two-digit years would be
            ambiguous) or asks for more distinct sources than the window holds.
    """
    if not 0 <= max_year - min_year <= 99:
        raise ConfigError(
            f"The dates task needs a year window of at most 100 years so that two-digit years "
            f"are unambiguous. Received: min_year={min_year}, max_year={max_year}")
    first, last = _dt.date(min_year, 1, 1).toordinal(), _dt.date(max_year, 12, 31).toordinal()
    capacity = (last - first + 1) * len(formats)
    if num_examples > capacity // 2:
        raise ConfigError(
            f"Asked for {num_examples} distinct dates but the window {min_year}-{max_year} with "
            f"{len(formats)} formats holds about {capacity}; ask for at most {capacity // 2}.")
    rng = random.Random(seed)
    seen: Dict[str, str] = {}
    pairs: List[Tuple[str, str]] = []
    while len(pairs) < num_examples:
        date = _dt.date.fromordinal(rng.randint(first, last))
        source = render(date, rng.choice(formats))
        if source in seen:
            continue
        seen[source] = iso(date)
        pairs.append((source, iso(date)))
    return pairs


def splits(train_size: int, val_size: int, test_size: int, seed: int, min_year: int = 1950,
           max_year: int = 2049) -> Dict[str, Tuple[List[str], List[str]]]:
    """Train/val/test as ``{split: (sources, targets)}``; no source string is in two splits."""
    sizes = {"train": train_size, "val": val_size, "test": test_size}
    for name, size in sizes.items():
        if not isinstance(size, int) or size < 1:
            raise ConfigError(f"data.{name}_size must be a positive integer. Received: {name}_size={size}")
    pairs = generate(train_size + val_size + test_size, seed, min_year, max_year)
    out, start = {}, 0
    for name, size in sizes.items():
        chunk = pairs[start:start + size]
        out[name] = ([s for s, _ in chunk], [t for _, t in chunk])
        start += size
    return out


# The rules of data.<key>, declared once: the validator reads them before TensorFlow starts
# (zoo.catalog.data_constraints) and build_task raises the same lines (zoo.checks.problem_lines).
CONSTRAINTS = (
    {"rule": "at_least", "key": "train_size", "min": 1, "integer": True},
    {"rule": "at_least", "key": "val_size", "min": 1, "integer": True},
    {"rule": "at_least", "key": "test_size", "min": 1, "integer": True},
    {"rule": "not_above", "key": "min_year", "of": "max_year"},
    {"rule": "at_most", "key": "max_year", "max": 9999, "integer": True},
    {"rule": "at_least", "key": "min_year", "min": 1, "integer": True},
)


@DATASETS.register("dates")
def build_task(train_size=20000, val_size=1000, test_size=1000, min_year=1950, max_year=2049, seed=0,
               tokenizer="char", lowercase=True, bucket_boundaries=(10, 14, 18, 22, 28), **_) -> Task:
    """``data=dates``: the splits above and tokenizers fitted on the training split (every
    character of it gets an id: ``min_freq=1``)."""
    enforce_config(CONSTRAINTS, "data", train_size=train_size, val_size=val_size, test_size=test_size,
                   min_year=min_year, max_year=max_year)
    splits_ = splits(train_size, val_size, test_size, seed=seed, min_year=min_year, max_year=max_year)
    train_src, train_tgt = splits_["train"]
    src_tok = tokenizers.fit_tokenizer(tokenizer, train_src, lowercase=lowercase, min_freq=1, name="source_tokenizer")
    tgt_tok = tokenizers.fit_tokenizer(tokenizer, train_tgt, lowercase=lowercase, min_freq=1, name="target_tokenizer")
    longest_src = max(len(s) for sources, _ in splits_.values() for s in sources)
    return Task("dates", splits_, src_tok, tgt_tok,
                max_source_length=longest_src + 1 + 8,  # <eos> and some slack for unseen inputs
                max_target_length=len("yyyy-mm-dd") + 1,
                bucket_boundaries=list(bucket_boundaries) if bucket_boundaries else None)
