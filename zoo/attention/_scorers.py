"""The inner score functions that local and hard attention can use (private helper).

Each is an alignment layer used only for its ``prepare_key`` and ``score`` hooks, so the
outer layer keeps the scorer's precomputed keys (``prepare_key``) for step-by-step decoding;
``ScoredByScorer`` is the base of those outer layers.
"""

from zoo.attention.additive_attention import AdditiveAttention
from zoo.attention.base_attention import BaseAttention
from zoo.attention.concat_attention import ConcatAttention
from zoo.attention.dot_attention import DotAttention
from zoo.attention.general_attention import GeneralAttention
from zoo.attention.scaled_dot_attention import ScaledDotAttention

SCORERS = {
    "dot": DotAttention,
    "scaled_dot": ScaledDotAttention,
    "general": GeneralAttention,
    "concat": ConcatAttention,
    "additive": AdditiveAttention,
}


def make_scorer(scoring, dtype):
    """A fresh, unbuilt scorer layer named ``scorer`` for ``scoring`` (a key of ``SCORERS``)."""
    return SCORERS[scoring](name="scorer", dtype=dtype)


class ScoredByScorer(BaseAttention):
    """An attention whose scores ``e_ij`` are its scorer's (``self.scorer``, made by ``make_scorer``):
    the scorer's weights are built with the layer's, its ``prepare_key`` (the keys' projection, once
    per source) and ``score`` are the layer's. The subclass makes ``self.scorer`` in ``__init__`` and
    writes what it does with the scores (its ``attend``)."""

    def build_scoring(self, query_shape, key_shape):
        self.scorer.build(query_shape, key_shape, key_shape)

    def prepare_key(self, key):
        return self.scorer.prepare_key(key)

    def score(self, query, prepared_key):
        return self.scorer.score(query, prepared_key)
