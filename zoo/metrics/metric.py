"""The metric registry: each score's name, scale, direction and label, and how to compute it.

A metric module registers a scorer ``scorer(hypotheses, references, *, hypothesis_tokens=None,
reference_tokens=None, sources=None) -> float | None`` (None: the inputs it needs were not given)::

    @register("exact_match", scale=1, higher_is_better=True, label="exact match", by_length=True)
    def score(hypotheses, references, **inputs):
        return exact_match(hypotheses, references)

Whatever reads scores (the by-length tables and plots, ``zoo.compare``, the run summary) asks
``get(name)`` for the rest, so a new metric is one new module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from zoo.checks import invalid
from zoo.registry import Registry

METRICS = Registry("metric")
SCALES = (1, 100)
SPLITS = ("train", "val", "test")

Scorer = Callable[..., Optional[float]]


@dataclass(frozen=True)
class Metric:
    """A registered metric.

    Attributes:
        name: the key of the score: ``<split>_<name>`` in a run's metrics, a column of
            ``by_length/<split>.csv``.
        scorer: the registered scoring function (see ``score``).
        scale: 1 for scores in [0, 1] (and ratios), 100 for sacreBLEU's 0-100 scores.
        higher_is_better: True or False; None where neither is (a length ratio is best at 1).
        label: the name on plot axes and in tables.
        by_length: scored in every source-length bin (``by_length/<split>.csv``, its plot,
            ``python -m zoo.compare --by-length``) and for every split a run scores.
        in_summary: printed in the line a training run ends with.
        zero_is_undefined: an overall 0 means the split cannot be scored this way (BLEU on
            one-word references has no 4-grams), so the by-length plot leaves the panel out.
    """

    name: str
    scorer: Scorer
    scale: int
    higher_is_better: Optional[bool]
    label: str
    by_length: bool = False
    in_summary: bool = False
    zero_is_undefined: bool = False

    def score(self, hypotheses: Sequence[str], references: Sequence[str], *,
              hypothesis_tokens: Optional[Sequence[Sequence[str]]] = None,
              reference_tokens: Optional[Sequence[Sequence[str]]] = None,
              sources: Optional[Sequence[str]] = None, **inputs) -> Optional[float]:
        """The score of ``hypotheses`` against ``references``, or None where the metric needs an
        input that was not given (tokens for token accuracy, repeated sources for ``bleu_multiref``,
        ``sentence_attention`` and ``supporting`` for ``evidence``)."""
        value = self.scorer(hypotheses, references, hypothesis_tokens=hypothesis_tokens,
                            reference_tokens=reference_tokens, sources=sources, **inputs)
        return None if value is None else float(value)

    def format(self, value: Optional[float], precise: bool = False) -> str:
        """``value`` for a table: 0-100 scores with 2 decimals, 0-1 scores with 3 (4 if ``precise``,
        a table's headline column); ``-`` for a missing value or NaN."""
        if value is None or value != value:
            return "-"
        if self.scale == 100:
            return f"{value:.2f}"
        return f"{value:.4f}" if precise else f"{value:.3f}"

    def rank_key(self, value: Optional[float]) -> tuple:
        """Sort key that puts the best value first and missing values last (no order where
        ``higher_is_better`` is None)."""
        if value is None or value != value:
            return (1, 0.0)
        if self.higher_is_better is None:
            return (0, 0.0)
        return (0, -float(value) if self.higher_is_better else float(value))


def register(name: str, *, scale: int, higher_is_better: Optional[bool], label: str, by_length: bool = False,
             in_summary: bool = False, zero_is_undefined: bool = False) -> Callable[[Scorer], Scorer]:
    """Decorator registering a scorer as the metric ``name``; returns the scorer unchanged."""
    if scale not in SCALES:
        raise invalid("scale", "1 (scores in [0, 1]) or 100 (0-100 scores)", scale)
    if higher_is_better not in (True, False, None):
        raise invalid("higher_is_better", "True, False or None", higher_is_better)
    if not isinstance(label, str) or not label:
        raise invalid("label", "a non-empty string", label)
    return METRICS.register(name, scale=scale, higher_is_better=higher_is_better, label=label,
                            by_length=bool(by_length), in_summary=bool(in_summary),
                            zero_is_undefined=bool(zero_is_undefined))


def unregister(name: str) -> None:
    """Removes the metric ``name`` (tests that register a throwaway metric clean up with this)."""
    METRICS.unregister(name)


def names() -> List[str]:
    """Sorted names of all registered metrics."""
    return METRICS.names()


def get(name: str) -> Metric:
    """The metric registered as ``name``; an unknown name raises naming the registered ones."""
    return Metric(name=name, scorer=METRICS.get(name), **METRICS.meta(name))


def lookup(key: str) -> Optional[Metric]:
    """The metric behind a score key, ``bleu`` or ``test_bleu`` (a split prefix is dropped); None
    for keys that are no registered metric (``train_seconds``, ``test_perplexity``)."""
    if key in METRICS:
        return get(key)
    split, _, rest = key.partition("_")
    return get(rest) if split in SPLITS and rest in METRICS else None


def by_length_names() -> List[str]:
    """The metrics scored per source-length bin, 0-1 scores first, then by name (the columns of
    ``by_length/<split>.csv``: exact_match, token_accuracy, bleu, chrf)."""
    specs = [get(name) for name in names()]
    return [m.name for m in sorted(specs, key=lambda m: (m.scale, m.name)) if m.by_length]


def score_all(hypotheses: Sequence[str], references: Sequence[str], names: Optional[Sequence[str]] = None,
              **inputs) -> Dict[str, float]:
    """``{name: score}`` for ``names`` (default: every registered metric), leaving out the metrics
    whose inputs (``hypothesis_tokens``, ``reference_tokens``, ``sources``) were not given."""
    scores = {}
    for name in (METRICS.names() if names is None else names):
        value = get(name).score(hypotheses, references, **inputs)
        if value is not None:
            scores[name] = value
    return scores


def format_value(key: str, value: Optional[float], precise: bool = False) -> str:
    """``value`` formatted by the metric behind ``key`` (see ``Metric.format``); keys that are no
    registered metric get 4 decimals, ``-`` when missing."""
    metric = lookup(key)
    if metric is not None:
        return metric.format(value, precise=precise)
    return "-" if value is None or value != value else f"{value:.4f}"


def format_summary(metrics: Mapping[str, float], task_metric: str, prefix: str = "test_") -> str:
    """The scores a training run ends with: the task metric (4 decimals), then every other metric
    registered ``in_summary`` that ``metrics`` holds, e.g.
    ``test_exact_match = 0.9970   test_bleu = 99.12   test_chrf = 99.50``."""
    parts = [f"{prefix}{task_metric} = {metrics[task_metric]:.4f}"]
    for name in names():
        metric = get(name)
        if name != task_metric and metric.in_summary and name in metrics:
            parts.append(f"{prefix}{name} = {metric.format(metrics[name])}")
    return "   ".join(parts)
