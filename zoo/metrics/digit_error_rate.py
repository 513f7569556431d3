"""Digit error rate: edit distance over digits divided by the reference length (as a speech
recogniser's character error rate), with ``jiwer``."""

from __future__ import annotations

from typing import Sequence

from zoo.metrics.metric import register


def digit_error_rate(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """``(S + D + I) / N`` over the whole split: the substitutions, deletions and insertions of the
    fewest edits turning each hypothesis into its reference (Levenshtein, ``jiwer.process_characters``),
    over the ``N`` reference digits. Whitespace is dropped first (``"3 9 1"`` is ``"391"``); every
    other character is a symbol, so an emitted non-digit is an error. 0 is perfect; it can pass 1
    when hypotheses are longer than references. With no reference digit at all, the count of
    inserted symbols (``N`` taken as 1). Example: ``"1243"`` for ``"123"`` and ``""`` for ``"45"``:
    1 insertion + 2 deletions over 5 digits = 0.6.
    """
    import jiwer

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        return 0.0
    hyps = ["".join(str(h).split()) for h in hypotheses]
    refs = ["".join(str(r).split()) for r in references]
    out = jiwer.process_characters(refs, hyps)
    edits = out.substitutions + out.deletions + out.insertions
    return edits / max(1, sum(len(r) for r in refs))


@register("digit_error_rate", scale=1, higher_is_better=False, label="digit error rate", in_summary=True)
def score(hypotheses, references, **inputs):
    return digit_error_rate(hypotheses, references)
