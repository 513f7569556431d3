"""An alignment attention inside a decoder: creating it from the config, one decoding step's attend
(beam rows grouped per sentence), the decoder state the attention adds, and the weights as one row
per query.

Shared by the RNN decoders (``zoo.models.recurrent``) and the Transformer's cross-attention weights
(``zoo.models.self_attention``). Backend-neutral (``keras.ops`` only), like the rest of ``zoo.models``.
"""

import inspect

from keras import ops

import zoo.attention
from zoo.checks import invalid
from zoo.models.encoder_decoder import HYPOTHESES


def create_alignment_attention(model_name, attention, options, dtype=None):
    """The alignment attention layer ``attention``, named ``attention``, or a clear error."""
    if attention not in zoo.attention.alignment_names():
        raise ValueError(f"Unknown alignment attention '{attention}' for model {model_name}. "
                         f"Available: {', '.join(zoo.attention.alignment_names())}")
    if not isinstance(options, dict):
        raise invalid("attention_options", "a dict of keyword arguments for the attention layer", options)
    return zoo.attention.create(attention, name="attention", dtype=dtype, **options)


def step_shapes(hidden_size, memory_dim):
    """What an RNN decoder builds its alignment attention for: one step's query ``[B, 1, H]`` (the
    decoder state, ``H = hidden_size``) and the memory ``[B, Ts, memory_dim]``."""
    return (None, 1, hidden_size), (None, None, memory_dim)


def context_width(attention, hidden_size, memory_dim):
    """The width of the context ``attention`` gives such a decoder, known without building."""
    return attention.compute_output_shape(*step_shapes(hidden_size, memory_dim))[-1]


def takes_positions(attention):
    """True if the layer's ``attend`` takes the query position (``position_offset``), e.g. local-m."""
    return "position_offset" in inspect.signature(attention.attend).parameters


def takes_previous_weights(attention):
    """True if the layer's ``attend`` takes the previous step's weights (``previous_weights``), e.g.
    ``location_aware``: a decoder then carries its last weights ``[B, Ts]`` in its state, starting from
    the layer's ``initial_weights(memory_mask)``."""
    return "previous_weights" in inspect.signature(attention.attend).parameters


def groups_hypotheses(attention):
    """Whether beam search may keep the memory one row per sentence and let a sentence's hypotheses
    attend as its queries (``attend_step``): not for an attention that places each query at its own
    target step (``takes_positions``, local-m), whose rows stay rows of their own."""
    return not takes_positions(attention)


def initial_extras(attention, memory):
    """The state an alignment attention adds to an RNN decoder's own, appended after it: the target
    step ``i = 0`` per row ``[B]`` (int32) for an attention that places its queries
    (``takes_positions``, e.g. local-m), then ``alpha_0 [B, Ts]``, the layer's
    ``initial_weights(memory_mask)``, for one that reads the previous step's weights
    (``takes_previous_weights``, e.g. location_aware). Empty for the others. Every tensor has the
    batch first, so beam search reorders it with the hypotheses."""
    extras = ()
    if takes_positions(attention):
        extras += (ops.zeros((ops.shape(memory["memory"])[0],), "int32"),)
    if takes_previous_weights(attention):
        extras += (attention.initial_weights(memory["memory_mask"]),)
    return extras


def extras_arguments(attention, extras):
    """``attend_step``'s keyword arguments from those extras: ``position_offset`` (the step ``i``) and
    ``previous_weights`` (``alpha_{i-1}``), each only for an attention that takes it."""
    arguments = {}
    if takes_positions(attention):
        arguments["position_offset"] = extras[0]
    if takes_previous_weights(attention):
        arguments["previous_weights"] = extras[-1]
    return arguments


def next_extras(attention, extras, weights):
    """The extras after a step whose attention weights were ``weights [B, Ts]``: ``i + 1`` and
    ``alpha_i``."""
    advanced = ()
    if takes_positions(attention):
        advanced += (extras[0] + 1,)
    if takes_previous_weights(attention):
        advanced += (ops.cast(weights, extras[-1].dtype),)
    return advanced


def head_mean(weights):
    """``[B, Tq, Tv]`` attention weights: multi-head ``[B, H, Tq, Tv]`` averaged over heads."""
    return ops.mean(weights, axis=1) if len(weights.shape) == 4 else weights


def attention_row(weights):
    """``[B, Tv]`` from the weights of one query step (``[B, 1, Tv]`` or ``[B, H, 1, Tv]``)."""
    return ops.squeeze(head_mean(weights), 1)


def attend_step(attention, query, memory, training=None, previous_weights=None, **position):
    """One decoding step's attention of ``query [R, D]`` over ``memory`` (``encode``'s ``memory``,
    ``keys``, ``memory_mask`` ``[B, Ts]``): ``(context [R, C], weights [R, Ts])``.

    ``R = B G`` rows, ``G = memory.get(HYPOTHESES, 1)``: where beam search keeps the memory one row
    per sentence (``Seq2SeqModel.hypotheses_memory``), a sentence's ``G`` rows attend as its ``G``
    queries, ``[B, G, D]``, so its keys and values are read once, not ``G`` times (base ``luong``,
    beam 4, 64 sentences: the scores and context products at ``[256, 1, 256] x [256, 256, 20]`` a
    step as ``[64, 4, 256] x [64, 256, 20]``). ``position`` (``position_offset``) places each
    query; a positional attention's queries are rows of their own, so its models do not group.
    ``previous_weights [R, Ts]`` (``takes_previous_weights``): each row's weights of the step before,
    grouped as its query.
    """
    group = memory.get(HYPOTHESES, 1)
    queries = ops.reshape(query, (-1, group, query.shape[-1]))  # [B, G, D]
    mask = ops.expand_dims(memory["memory_mask"], 1)  # [B, 1, Ts]: every query of a sentence alike
    extra = dict(position)
    if previous_weights is not None:  # alpha_{i-1} of each query: [B, G, Ts]
        extra["previous_weights"] = ops.reshape(previous_weights, (-1, group, ops.shape(previous_weights)[-1]))
    context, weights = attention.attend(queries, memory["memory"], memory["keys"], mask=mask,
                                        return_attention_scores=True, training=training, **extra)
    weights = head_mean(weights)  # [B, G, Ts]
    return (ops.reshape(context, (-1, context.shape[-1])),
            ops.reshape(weights, (-1, ops.shape(weights)[-1])))
