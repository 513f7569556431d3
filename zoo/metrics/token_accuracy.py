"""Token accuracy: the share of reference tokens matched at the same position by the hypothesis."""

from __future__ import annotations

from typing import Sequence

from zoo.metrics.metric import register


def token_accuracy(hypothesis_tokens: Sequence[Sequence[str]], reference_tokens: Sequence[Sequence[str]]) -> float:
    """Share of reference tokens matched at the same position by the hypothesis."""
    total = sum(len(r) for r in reference_tokens)
    correct = sum(sum(h == r for h, r in zip(hyp, ref)) for hyp, ref in zip(hypothesis_tokens, reference_tokens))
    return correct / max(1, total)


@register("token_accuracy", scale=1, higher_is_better=True, label="token accuracy", by_length=True)
def score(hypotheses, references, hypothesis_tokens=None, reference_tokens=None, **inputs):
    if hypothesis_tokens is None or reference_tokens is None:
        return None
    return token_accuracy(hypothesis_tokens, reference_tokens)
