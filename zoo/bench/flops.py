"""Analytic training FLOPs per step: the matrix work on the real (non-padding) tokens of a batch.

Conventions, one for every model:
- a matrix product ``[m, k] x [k, n]`` costs ``2 m k n`` FLOPs; biases, activations, softmax,
  layer norms, embeddings lookups and the optimizer are not counted (they are a few percent);
- only real tokens count: sentence ``i`` has ``s_i`` source and ``t_i`` target tokens (``<eos>``
  included on the source side; ``t_i`` is the number of target positions the loss sees), and
  attention between them costs its ``s_i``/``t_i`` products, not the padded batch's;
- a training step costs 3x the forward pass (the backward pass computes two products for each
  product of the forward pass: the gradient of its input and of its weight).

Per model (``D`` width, ``F`` FFN size, ``N`` layers, ``V`` target vocabulary):

- Transformer (ours and the ``keras.layers.MultiHeadAttention`` reference): per encoder layer
  ``s (8 D^2 + 4 D F) + 4 s^2 D`` (Q, K, V, O projections; FFN; ``Q K^T`` and ``A V``); per
  decoder layer ``t (8 D^2 + 4 D F) + 4 t^2 D`` (causal self-attention computed over the whole
  ``t x t`` square, as the layer does) plus cross-attention ``4 t D^2 + 4 s D^2 + 4 t s D``;
  the output projection ``2 t D V``.
- an RNN layer of ``U`` units on inputs of width ``I``: ``6 U (I + U)`` per step for a GRU (three
  gates), ``8 U (I + U)`` for an LSTM (four), per direction.
- alignment attention of a query of width ``Q`` over ``s`` memory vectors of width ``M``:
  ``additive`` (``U_a`` units) ``2 M U_a`` per memory vector (keys, once per source) plus
  ``2 Q U_a + 2 s U_a + 2 s M`` per query; ``general`` ``2 M Q`` per memory vector plus
  ``2 s Q + 2 s M``; ``dot``/``scaled_dot`` ``2 s Q + 2 s M``; ``multi_head`` (``H`` heads of
  ``d_k``, ``d_v``) ``2 M H (d_k + d_v)`` per memory vector plus ``2 Q H d_k + 2 s H (d_k + d_v)
  + 2 H d_v D_out`` per query.
- ``seq2seq``: encoder RNNs, decoder RNNs whose bottom input is ``[e(y); c]``, output ``2 t H V``.
- ``bahdanau``: encoder RNNs, a ``tanh`` bridge per decoder state (``2 M H`` per sentence),
  attention queried by ``s_{i-1}`` at every target step, decoder cell on ``[e(y); c]``, the
  maxout readout ``2 (H + E + C) 2H`` per step when ``deep_output``, output ``2 t H V``.
- ``luong``: encoder RNNs, decoder RNNs (bottom input ``e(y)``, plus ``h~`` with input
  feeding), attention queried by ``h_t``, ``W_c`` ``2 (C + H) H``, output ``2 t H V``.
- the tutorial reference (GRU + one-head ``MultiHeadAttention``): a bidirectional GRU encoder of
  ``U`` units per direction (outputs summed), a GRU decoder, one-head attention with ``d_k = U``,
  output ``2 t U V``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

TRAINING_FACTOR = 3  # forward + backward (two products per forward product)


def _arrays(source_lengths, target_lengths):
    s = np.asarray(source_lengths, dtype=np.float64)
    t = np.asarray(target_lengths, dtype=np.float64)
    if s.shape != t.shape:
        raise ValueError(f"source_lengths and target_lengths must have one entry per sentence. "
                         f"Received: {s.shape} and {t.shape}")
    return s, t


def rnn_cell(cell: str, units: int, inputs: int) -> float:
    """Forward FLOPs of one step of a GRU or LSTM layer (one direction)."""
    gates = {"gru": 3, "lstm": 4}[cell]
    return 2.0 * gates * units * (inputs + units)


def transformer_forward(source_lengths: Sequence[int], target_lengths: Sequence[int], embed_dim: int,
                        intermediate_dim: int, num_layers: int, target_vocab_size: int) -> float:
    """Forward FLOPs of an encoder-decoder Transformer on a batch (see the module docstring)."""
    s, t = _arrays(source_lengths, target_lengths)
    d, f, n, v = float(embed_dim), float(intermediate_dim), num_layers, float(target_vocab_size)
    encoder = n * np.sum(s * (8 * d * d + 4 * d * f) + 4 * s * s * d)
    self_attention = np.sum(t * (8 * d * d + 4 * d * f) + 4 * t * t * d)
    cross = np.sum(4 * t * d * d + 4 * s * d * d + 4 * t * s * d)
    decoder = n * (self_attention + cross)
    return float(encoder + decoder + np.sum(2 * t * d * v))


def alignment_attention(kind: str, options: dict, query_dim: int, memory_dim: int, source_lengths,
                        query_counts) -> float:
    """Forward FLOPs of an alignment attention: keys once per source, the rest per query."""
    s = np.asarray(source_lengths, dtype=np.float64)
    q = np.asarray(query_counts, dtype=np.float64)
    m, qd = float(memory_dim), float(query_dim)
    if kind == "additive":
        u = float(options.get("units") or memory_dim)
        return float(np.sum(s * 2 * m * u + q * (2 * qd * u + 2 * s * u + 2 * s * m)))
    if kind == "general":
        return float(np.sum(s * 2 * m * qd + q * (2 * s * qd + 2 * s * m)))
    if kind in ("dot", "scaled_dot"):
        return float(np.sum(q * (2 * s * qd + 2 * s * m)))
    if kind == "multi_head":
        h = float(options.get("num_heads") or 2)
        dk = float(options.get("key_dim") or max(1, int(query_dim) // int(h)))
        dv = float(options.get("value_dim") or dk)
        out = float(options.get("output_dim") or query_dim)
        return float(np.sum(s * 2 * m * h * (dk + dv) + q * (2 * qd * h * dk + 2 * s * h * (dk + dv) + 2 * h * dv * out)))
    raise ValueError(f"No FLOP count for attention '{kind}'. Counted: additive, general, dot, scaled_dot, multi_head")


def _encoder(model, s) -> float:
    """Stacked (bidirectional) encoder RNNs of a zoo RNN model, per real source token."""
    directions = 2 if model.bidirectional else 1
    total = 0.0
    for index in range(model.num_layers):
        inputs = model.embed_dim if index == 0 else model.memory_dim
        total += directions * rnn_cell(model.cell, model.encoder_units, inputs)
    return float(np.sum(s) * total)


def _decoder(model, t, bottom_inputs) -> float:
    total = 0.0
    for index in range(model.num_layers):
        inputs = bottom_inputs if index == 0 else model.hidden_size
        total += rnn_cell(model.cell, model.hidden_size, inputs)
    return float(np.sum(t) * total)


def _context_dim(model) -> int:
    attention = model.attention
    if model.attention_name == "multi_head":
        return int(attention.output_dim or model.hidden_size)
    return int(model.memory_dim)


def model_forward(model, source_lengths, target_lengths) -> float:
    """Forward FLOPs of a zoo model (``transformer``, ``seq2seq``, ``bahdanau``, ``luong``) on a batch."""
    from zoo.models.recurrent.bahdanau import BahdanauSeq2Seq
    from zoo.models.recurrent.luong import LuongSeq2Seq
    from zoo.models.recurrent.seq2seq import PlainSeq2Seq
    from zoo.models.self_attention.transformer import TransformerSeq2Seq

    s, t = _arrays(source_lengths, target_lengths)
    if isinstance(model, TransformerSeq2Seq):
        return transformer_forward(s, t, model.embed_dim, model.intermediate_dim, model.num_layers,
                                   model.target_vocab_size)
    output = float(np.sum(2 * t * model.hidden_size * model.target_vocab_size))
    if isinstance(model, PlainSeq2Seq):
        return _encoder(model, s) + _decoder(model, t, model.embed_dim + model.memory_dim) + output
    options = dict(model.attention_options)
    hidden, memory = model.hidden_size, model.memory_dim
    if isinstance(model, BahdanauSeq2Seq):
        context = _context_dim(model)
        bridges = len(s) * model.num_layers * model.per_layer * 2.0 * memory * hidden
        attention = alignment_attention(model.attention_name, options, hidden, memory, s, t)
        readout = np.sum(t) * 2.0 * (hidden + model.embed_dim + context) * 2 * hidden if model.deep_output else 0.0
        return (_encoder(model, s) + bridges + attention + _decoder(model, t, model.embed_dim + context) + readout
                + output)
    if isinstance(model, LuongSeq2Seq):
        context = _context_dim(model)
        bottom = model.embed_dim + (hidden if model.input_feeding else 0)
        attention = alignment_attention(model.attention_name, options, hidden, memory, s, t)
        attentional = np.sum(t) * 2.0 * (context + hidden) * hidden
        return _encoder(model, s) + _decoder(model, t, bottom) + attention + attentional + output
    raise ValueError(f"No FLOP count for model {type(model).__name__}. Counted: transformer, seq2seq, bahdanau, luong")


def tutorial_rnn_forward(source_lengths, target_lengths, embed_dim: int, units: int, rnn_layers: int,
                         target_vocab_size: int) -> float:
    """Forward FLOPs of the tutorial-style GRU + one-head ``MultiHeadAttention`` reference."""
    s, t = _arrays(source_lengths, target_lengths)
    u = float(units)
    encoder = sum(2 * rnn_cell("gru", units, embed_dim if i == 0 else units) for i in range(rnn_layers))
    decoder = sum(rnn_cell("gru", units, embed_dim if i == 0 else units) for i in range(rnn_layers))
    attention = alignment_attention("multi_head", {"num_heads": 1, "key_dim": units}, units, units, s, t)
    return float(np.sum(s) * encoder + np.sum(t) * decoder + attention + np.sum(2 * t * u * target_vocab_size))


def training_flops(forward: float) -> float:
    """FLOPs of a training step whose forward pass costs ``forward``."""
    return TRAINING_FACTOR * forward
