"""The inner score functions that local and hard attention can use (private helper).

Each is an alignment layer used only for its ``prepare_key`` and ``score`` hooks, so the
outer layer keeps the scorer's precomputed keys (``prepare_key``) for step-by-step decoding.
"""

from zoo.attention.additive_attention import AdditiveAttention
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
