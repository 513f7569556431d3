"""What several models share besides RNN stacks: the dropout-rate check and attention plumbing.

Backend-neutral (``keras.ops`` only), like the rest of ``zoo.models``.
"""

import inspect
import numbers

from keras import ops

import zoo.attention
from zoo.checks import invalid


def rate(name, value):
    """Returns ``float(value)`` if it is a number in [0, 1), else raises naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise invalid(name, "a float in [0, 1)", value)
    return float(value)


def create_alignment_attention(model_name, attention, options, dtype=None):
    """The alignment attention layer ``attention``, named ``attention``, or a clear error."""
    if attention not in zoo.attention.alignment_names():
        raise ValueError(f"Unknown alignment attention '{attention}' for model {model_name}. "
                         f"Available: {', '.join(zoo.attention.alignment_names())}")
    if not isinstance(options, dict):
        raise invalid("attention_options", "a dict of keyword arguments for the attention layer", options)
    return zoo.attention.create(attention, name="attention", dtype=dtype, **options)


def takes_positions(attention):
    """True if the layer's ``attend`` takes the query position (``position_offset``), e.g. local-m."""
    return "position_offset" in inspect.signature(attention.attend).parameters


def head_mean(weights):
    """``[B, Tq, Tv]`` attention weights: multi-head ``[B, H, Tq, Tv]`` averaged over heads."""
    return ops.mean(weights, axis=1) if len(weights.shape) == 4 else weights


def attention_row(weights):
    """``[B, Tv]`` from the weights of one query step (``[B, 1, Tv]`` or ``[B, H, 1, Tv]``)."""
    return ops.squeeze(head_mean(weights), 1)
