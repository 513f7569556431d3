"""Fixed example translations (``examples`` in conf/train.yaml), scored with d2l's sentence BLEU.

After training, ``train`` translates each ``{source, reference}`` pair of ``cfg.examples`` with the
run's translator, prints ``source => hypothesis, bleu 1.000`` lines as d2l does, and logs
``examples.csv`` and the metrics ``example_bleu_<i>`` and ``example_bleu_mean``.
"""

from __future__ import annotations

import csv
from typing import Callable, Dict, List, Sequence, Tuple

from zoo.errors import ConfigError
from zoo.metrics.d2l_bleu import d2l_bleu

COLUMNS = ("source", "reference", "hypothesis", "bleu")


def parse_examples(examples, k) -> List[Tuple[str, str]]:
    """``[(source, reference), ...]`` from ``cfg.examples``; ``ConfigError`` names a bad entry."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"examples_bleu_k={k!r} is not valid: expected a positive integer (d2l uses 2).")
    pairs = []
    for i, entry in enumerate(examples or []):
        keys = set(entry.keys()) if hasattr(entry, "keys") else None
        if keys != {"source", "reference"} or not all(isinstance(entry[key], str) for key in keys):
            raise ConfigError(f"examples[{i}]={entry!r} is not valid: expected a mapping "
                              f"{{source: <text>, reference: <text>}}.")
        pairs.append((entry["source"], entry["reference"]))
    return pairs


def score_examples(translate_fn: Callable, pairs: Sequence[Tuple[str, str]], k: int = 2,
                   ) -> Tuple[List[Dict[str, object]], Dict[str, float]]:
    """Translates the sources; returns the rows (``COLUMNS``) and ``example_bleu_<i>``, ``example_bleu_mean``."""
    from zoo.export.translator import translate_batched

    if not pairs:
        return [], {}
    hypotheses = translate_batched(translate_fn, [source for source, _ in pairs])["text"]
    rows = [{"source": source, "reference": reference, "hypothesis": hypothesis,
             "bleu": d2l_bleu(hypothesis, reference, k)}
            for (source, reference), hypothesis in zip(pairs, hypotheses)]
    metrics = {f"example_bleu_{i}": row["bleu"] for i, row in enumerate(rows)}
    metrics["example_bleu_mean"] = sum(row["bleu"] for row in rows) / len(rows)
    return rows, metrics


def write_examples(path, rows: Sequence[Dict[str, object]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({**row, "bleu": f"{row['bleu']:.4f}"} for row in rows)


def format_examples(rows: Sequence[Dict[str, object]]) -> str:
    """d2l's printout, one line per example: ``go . => va!, bleu 1.000``."""
    return "\n".join(f"{row['source']} => {row['hypothesis']}, bleu {row['bleu']:.3f}" for row in rows)
