"""d2l's sentence BLEU (*Dive into Deep Learning*, r0.17, sec. 9.7), in [0, 1]; as a corpus metric,
its mean over the sentences."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import List

from zoo.metrics.metric import register

D2L_PUNCTUATION = ",.!?;:"  # the word tokenizer's set (zoo.data.tokenizers.PUNCTUATION); d2l's is ,.!?


def d2l_tokens(text: str) -> List[str]:
    """d2l's words: no-break spaces are spaces, lowercased, a space before ``, . ! ? ; :``, split
    on spaces. ``"Va !"``, ``"va!"`` and ``"va !"`` all give ``["va", "!"]``."""
    text = re.sub(r"[\u00a0\u202f]", " ", text).lower()
    return re.sub(f"([{re.escape(D2L_PUNCTUATION)}])", r" \1", text).split()


def d2l_bleu(hypothesis: str, reference: str, k: int = 2) -> float:
    """Sentence BLEU as *Dive into Deep Learning* (r0.17, sec. 9.7) defines it, in [0, 1]:

    ``exp(min(0, 1 - len_label / len_pred)) * prod_{n=1}^{k} p_n^(1 / 2^n)``, where ``p_n`` is the
    number of the hypothesis' n-grams found in the reference (each reference n-gram used at most
    as often as it occurs there) over the hypothesis' n-grams, ``len_pred - n + 1``. Tokens are
    ``d2l_tokens``. n stops at the hypothesis length (a 1-word hypothesis has no bigram; d2l's
    code divides by zero there); an empty hypothesis scores 0. Example: ``"il est riche ."`` vs
    ``"il est calme ."``, k=2: ``(3/4)^(1/2) * (1/3)^(1/4) = 0.658``.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"Received an invalid value for argument `k`, expected a positive integer. Received: k={k!r}")
    pred, label = d2l_tokens(hypothesis), d2l_tokens(reference)
    if not pred:
        return 0.0
    score = math.exp(min(0.0, 1.0 - len(label) / len(pred)))
    for n in range(1, min(k, len(pred)) + 1):
        available = Counter(tuple(label[i:i + n]) for i in range(len(label) - n + 1))
        matches = 0
        for i in range(len(pred) - n + 1):
            gram = tuple(pred[i:i + n])
            if available[gram] > 0:
                available[gram] -= 1
                matches += 1
        score *= (matches / (len(pred) - n + 1)) ** (0.5 ** n)
    return score


@register("d2l_bleu", scale=1, higher_is_better=True, label="d2l sentence BLEU (mean)")
def score(hypotheses, references, **inputs):
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    return sum(d2l_bleu(h, r) for h, r in zip(hypotheses, references)) / max(1, len(references))
