"""The base class shared by all alignment attention layers, and ``masked_softmax``."""

import inspect

import keras
from keras import ops

from zoo import checks, kernels
from zoo.attention import normalizers
from zoo.attention.normalizers import NAMES as NORMALIZERS
from zoo.attention.normalizers import large_negative  # noqa: F401 (the masking constant, for zoo.fast)
from zoo.registry import Registry

ATTENTIONS = Registry("attention")


def register_attention(name):
    """Registers an attention layer class under ``name``, with its ``kind`` (``attention_kind``)."""
    def decorator(layer_class):
        ATTENTIONS.register(name, kind=attention_kind(layer_class))(layer_class)
        if name in SOFTMAX_ONLY:
            layer_class.normalizers = ("softmax",)
        return layer_class

    return decorator


def attention_kind(layer_class):
    """What the class is, as ``conf/attention/<name>.yaml`` declares it in ``kind``.

    ``"alignment"``: a ``BaseAttention`` subclass, which keeps the alignment-attention contract
    (``layer(query, value, key=None, ...)``) and so plugs into RNN decoders; ``"self"``: a class that
    says so (``kind = "self"``): a Transformer self-attention with ``multi_head``'s call and cache
    (``model.attention``), not an RNN decoder's; ``"positional"``: a position encoding, called as
    ``layer(inputs, start_index=0)``; ``"other"``: anything else.
    """
    if getattr(layer_class, "kind", None) == "self":
        return "self"
    if issubclass(layer_class, BaseAttention):
        return "alignment"
    if "start_index" in inspect.signature(layer_class.call).parameters:
        return "positional"
    return "other"


# The softmax of every layer (masked positions 0, a fully masked row 0), and its masking constant:
# both live with the other normalisers in zoo.attention.normalizers.
masked_softmax = normalizers.softmax

# Alignment attentions whose weights do not come from ``BaseAttention.normalize_scores``, so take
# ``normalizer="softmax"`` only: ``hard`` draws its sample by Gumbel-max, which samples softmax(e);
# ``multi_head`` normalises each head in its own ``attention``. The others' option is declared here
# once (``CONSTRAINTS``, read by zoo.catalog.attention_constraints before TensorFlow starts).
SOFTMAX_ONLY = ("hard", "multi_head")
CONSTRAINTS = ({"rule": "one_of", "key": "normalizer", "values": NORMALIZERS,
                "why": "the scores' normaliser: softmax, or a sparse one"},)


def causal_mask(tq, tv, start=None):
    """``[Tq, Tv]`` bool mask: query ``i``, at position ``start + i``, may see keys ``j <= start + i``.

    ``start`` defaults to ``Tv - Tq`` (aligned bottom-right): for ``Tq == Tv`` the usual
    lower-triangular mask; for ``Tq < Tv`` the queries are the last ``Tq`` positions. A decoder's
    key/value cache of ``Tv`` slots, written up to position ``start``, passes ``start`` (the slots
    after it are not written yet).
    """
    start = tv - tq if start is None else start
    rows = ops.expand_dims(ops.arange(tq), 1)
    cols = ops.expand_dims(ops.arange(tv), 0)
    return cols <= rows + start


@keras.saving.register_keras_serializable(package="zoo")
class BaseAttention(keras.layers.Layer):
    """Base class of alignment attention: masking, normalisation (softmax or sparse), dropout, weighted sum.

    A subclass supplies a scoring function and, optionally, a key preparation that is
    computed once per source sequence (``prepare_key``), which is what makes step-by-step
    decoding cheap: an RNN decoder calls ``prepare_key`` once and ``attend`` per step.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` value (source) steps, ``H`` heads.

    The scores are normalised over the unmasked keys by ``normalizer``: ``"softmax"``, or
    ``"sparsemax"`` (Martins & Astudillo 2016) or ``"entmax15"`` (Peters et al. 2019), which give
    exactly 0 weight to the keys that score far below the best (``zoo.attention.normalizers``). A
    subclass that computes its weights in its own ``attend`` calls ``normalize_scores`` for them; one whose
    weights come another way takes softmax only (``normalizers``, ``SOFTMAX_ONLY``).

    Args:
        dropout: float in [0, 1), dropout rate applied to the attention weights in training.
        normalizer: ``"softmax"`` (default), ``"sparsemax"`` or ``"entmax15"``: what turns the
            scores into weights. Subclasses take it through ``**kwargs``.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        query: ``[B, Tq, Dq]``.
        value: ``[B, Tv, Dv]``.
        key: optional ``[B, Tv, Dk]``; defaults to ``value``.
        query_mask: optional bool ``[B, Tq]``, True = a real query step.
        value_mask: optional bool ``[B, Tv]``, True = attend to this position.
        key_mask: optional bool ``[B, Tv]``, combined with ``value_mask``.
        attention_mask: optional bool ``[B, Tq, Tv]``.
        use_causal_mask: bool, query i attends only to keys j <= i (aligned bottom-right).
        return_attention_scores: bool, also return the attention weights.
        training: bool, dropout on the weights when True.

    Returns:
        ``output [B, Tq, Dv]``, or ``(output, weights [B, Tq, Tv])`` with
        ``return_attention_scores=True``. Weights are after the normaliser and before dropout;
        masked positions have exactly 0 weight; a query with nothing to attend to gets a 0
        output row.
    """

    normalizers = NORMALIZERS  # the normalizer values this layer's weights can go through

    def __init__(self, dropout=0.0, normalizer="softmax", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0.0 <= dropout < 1.0:
            raise ValueError(
                "Received an invalid value for argument `dropout`, expected a float in [0, 1). "
                f"Received: dropout={dropout}"
            )
        self.dropout = float(dropout)
        self.normalizer = checks.choice("normalizer", normalizer, self.normalizers)
        self.supports_masking = True

    # -- hooks for subclasses -------------------------------------------------------------
    def build_scoring(self, query_shape, key_shape):
        """Creates the scoring function's weights. Default: none."""

    def prepare_key(self, key):
        """Work on the keys that does not depend on the query (e.g. ``U_a h_j``). Default: identity."""
        return key

    def prepare(self, value, key=None):
        """All the query-independent work on the memory, done once per source: what ``attend``
        takes as ``prepared_key``. Default: ``prepare_key(key)`` (``key`` defaults to ``value``);
        ``multi_head`` also projects the values here (``V W^V``)."""
        return self.prepare_key(value if key is None else key)

    def score(self, query, prepared_key):
        """Unnormalized scores ``[B, Tq, Tv]`` from ``query [B, Tq, Dq]`` and prepared keys."""
        raise NotImplementedError

    def normalize_scores(self, scores, mask=None):
        """The weights ``alpha`` from ``scores [..., Tv]`` over the keys where ``mask`` is True, by
        ``normalizer`` (``zoo.attention.normalizers``): masked keys exactly 0, a row with nothing to
        attend to all 0."""
        return normalizers.get(self.normalizer)(scores, mask)

    # -- shared machinery -------------------------------------------------------------------
    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        self.build_scoring(query_shape, key_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, name="weights_dropout", dtype=self.dtype_policy)
        self.built = True

    def combine_masks(self, query, value, query_mask=None, value_mask=None, key_mask=None,
                      attention_mask=None, use_causal_mask=False, query_start=None):
        """One bool mask ``[B, Tq, Tv]`` (or None) from all the mask arguments; ``query_start``: the
        position of the first query for the causal mask (``causal_mask``' ``start``)."""
        mask = None

        def _and(a, b):
            return b if a is None else ops.logical_and(a, b)

        for m in (value_mask, key_mask):
            if m is not None:
                mask = _and(mask, ops.expand_dims(ops.cast(m, "bool"), -2))
        if query_mask is not None:
            mask = _and(mask, ops.expand_dims(ops.cast(query_mask, "bool"), -1))
        if attention_mask is not None:
            mask = _and(mask, ops.cast(attention_mask, "bool"))
        if use_causal_mask:
            tq, tv = ops.shape(query)[-2], ops.shape(value)[-2]
            mask = _and(mask, ops.expand_dims(causal_mask(tq, tv, query_start), 0))
        if mask is not None:
            batch = ops.shape(query)[0]
            mask = ops.broadcast_to(mask, (batch, ops.shape(query)[-2], ops.shape(value)[-2]))
        return mask

    @kernels.replaceable
    def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None):
        """Attention with keys already passed through ``prepare`` (or ``prepare_key``); ``mask`` is ``[B, Tq, Tv]``.

        ``e = score(s, h)``, ``alpha = softmax(e)`` over the unmasked keys, ``c = sum_j alpha_j h_j``
        (Bahdanau et al. 2015, eqs. 5-6; Luong et al. 2015, eqs. 5 and 7): the weights, dropout on
        them in training, and their weighted sum of the values, ``alpha V``. With a sparse
        ``normalizer``, ``alpha = sparsemax(e)`` or ``entmax15(e)`` in place of the softmax.
        """
        scores = self.score(query, prepared_key)
        weights = self.normalize_scores(scores, mask)
        dropped = self.dropout_layer(weights, training=training) if self.dropout > 0 else weights
        output = ops.matmul(ops.cast(dropped, value.dtype), value)
        if return_attention_scores:
            return output, weights
        return output

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None,
             attention_mask=None, use_causal_mask=False, return_attention_scores=False, training=None):
        key = value if key is None else key
        mask = self.combine_masks(query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask)
        return self.attend(query, value, self.prepare(value, key), mask=mask,
                           return_attention_scores=return_attention_scores, training=training)

    def compute_mask(self, query, previous_mask=None):
        # The output has one row per query step: it carries the query's mask.
        return previous_mask

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        return (*query_shape[:-1], value_shape[-1])

    def compute_output_spec(self, query, value, key=None, *, return_attention_scores=False, **kwargs):
        # Symbolic (keras.Input) calls: also give the `(output, scores)` pair when asked, not
        # only the output. Scores are [B, Tq, Tv]; multi-head layers override this.
        key_shape = None if key is None else key.shape
        output = keras.KerasTensor(self.compute_output_shape(query.shape, value.shape, key_shape),
                                   dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        scores = keras.KerasTensor((*query.shape[:-1], value.shape[-2]), dtype=self.compute_dtype)
        return output, scores

    def get_config(self):
        config = super().get_config()
        config.update({"dropout": self.dropout, "normalizer": self.normalizer})
        return config
