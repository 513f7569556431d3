"""Stochastic hard attention (Xu et al.), trained with straight-through Gumbel-softmax."""

import keras
from keras import ops

from zoo import checks
from zoo.attention import _scorers
from zoo.attention.base_attention import masked_softmax, register_attention


@register_attention("hard")
@keras.saving.register_keras_serializable(package="zoo")
class HardAttention(_scorers.ScoredByScorer):
    """Stochastic hard attention of Xu et al. (2015): attend to exactly one source position.

    ``alpha_{t,i} = softmax_i(e_{t,i})`` with ``e_{t,i} = f_att(a_i, h_{t-1})`` (Xu et al.
    2015, eq. 4-5); hard attention picks one location ``s_t ~ Multinoulli({alpha_i})`` and
    uses ``z_t = sum_i s_{t,i} a_i`` (eq. 8-9).

    Xu et al. train the sampling with a REINFORCE-style estimator; this layer uses the
    straight-through Gumbel-softmax estimator instead (Jang et al. 2017): in training
    ``y = softmax((e + g) / temperature)`` with Gumbel noise ``g``, the forward pass uses the
    one-hot ``argmax(y)`` (a sample from ``alpha``) and the backward pass the gradient of
    ``y``. At inference (``training`` false or None) the one-hot ``argmax(alpha)`` is used,
    with no noise. The output is the one value vector selected, ``one_hot @ value``.

    The returned scores are the soft weights ``alpha`` (after masking and softmax), the
    distribution the position is drawn from, not the one-hot selection: so
    ``output != scores @ value`` in general. ``f_att`` is chosen by ``scoring`` (default
    ``"additive"``, the MLP of the paper). There is no dropout on the weights.

    Shapes: ``B`` batch, ``Tq`` query steps, ``Tv`` source steps.
    Cost: as the inner score, plus ``O(B Tq Tv)`` for the noise and the selection.

    Args:
        scoring: inner score ``f_att``, one of ``"additive"`` (default), ``"dot"``,
            ``"scaled_dot"``, ``"general"``, ``"concat"``.
        temperature: positive float, the Gumbel-softmax temperature of the backward pass.
        seed: int or None, seed of the Gumbel noise.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        See ``BaseAttention``: ``(query [B, Tq, Dq], value [B, Tv, Dv], key=None, *,
        query_mask, value_mask, attention_mask, use_causal_mask, return_attention_scores,
        training)``; ``training=True`` samples, otherwise the argmax is taken.

    Returns:
        ``output [B, Tq, Dv]`` (one value row per query, 0 if nothing may be attended), or
        ``(output, alpha [B, Tq, Tv])``.

    Example:
        >>> import numpy as np
        >>> layer = HardAttention(scoring="dot")
        >>> value = np.arange(15, dtype="float32").reshape(1, 5, 3)
        >>> out = layer(np.array([[[0.0, 0.0, 1.0]]]), value)
        >>> keras.ops.convert_to_numpy(out).tolist()
        [[[12.0, 13.0, 14.0]]]

    References:
        Xu et al. Show, Attend and Tell: Neural Image Caption Generation with Visual
        Attention. ICML 2015, sec. 4.1. https://arxiv.org/abs/1502.03044
        Jang, Gu, Poole. Categorical Reparameterization with Gumbel-Softmax. ICLR 2017.
        https://arxiv.org/abs/1611.01144
    """

    def __init__(self, scoring="additive", temperature=1.0, seed=None, **kwargs):
        super().__init__(dropout=0.0, **kwargs)
        self.scoring = checks.choice("scoring", scoring, tuple(_scorers.SCORERS))
        self.temperature = checks.positive_float("temperature", temperature)
        self.seed = checks.optional_int("seed", seed)
        self.scorer = _scorers.make_scorer(self.scoring, self.dtype_policy)
        self.seed_generator = keras.random.SeedGenerator(self.seed, name="gumbel_seed")

    def attend(self, query, value, prepared_key, mask=None, return_attention_scores=False, training=None):
        scores = self.score(query, prepared_key)  # e: [B, Tq, Tv]
        weights = masked_softmax(scores, mask)  # alpha
        if training:
            gumbel = gumbel_noise(ops.shape(scores), scores.dtype, self.seed_generator)
            soft = masked_softmax((scores + gumbel) / ops.cast(self.temperature, scores.dtype), mask)
        else:
            soft = weights
        hard = one_hot_argmax(soft, mask)
        if training:
            hard = hard + (soft - ops.stop_gradient(soft))  # straight-through: forward hard, backward soft
        output = ops.matmul(ops.cast(hard, value.dtype), value)
        if return_attention_scores:
            return output, weights
        return output

    def get_config(self):
        config = super().get_config()
        config.pop("dropout")
        config.update({"scoring": self.scoring, "temperature": self.temperature, "seed": self.seed})
        return config


def gumbel_noise(shape, dtype, seed):
    """``g = -log(-log u)``, ``u ~ U(0, 1)``: standard Gumbel noise of ``shape``.

    With it, ``argmax_i(log alpha_i + g_i)`` is a sample of ``Multinoulli(alpha)`` (the Gumbel-max
    trick), as is ``argmax_i(e_i + g_i)`` for ``alpha = softmax(e)``.

    Args:
        shape: the noise's shape (e.g. ``[B, Tq, Tv]``).
        dtype: its float dtype.
        seed: a ``keras.random.SeedGenerator`` (or an int, or None).
    """
    uniform = keras.random.uniform(shape, minval=1e-7, maxval=1.0, dtype=dtype, seed=seed)
    return -ops.log(-ops.log(uniform))


def one_hot_argmax(x, mask=None):
    """The one-hot ``[..., Tv]`` of ``argmax(x, -1)`` in ``x``'s dtype; a row whose ``mask`` is all
    false selects nothing (all zeros)."""
    index = ops.argmax(x, axis=-1)
    positions = ops.arange(ops.shape(x)[-1], dtype=index.dtype)
    hard = ops.cast(ops.equal(ops.expand_dims(index, -1), positions), x.dtype)
    if mask is not None:
        hard = hard * ops.cast(ops.any(ops.cast(mask, "bool"), axis=-1, keepdims=True), hard.dtype)
    return hard


def multinoulli(weights, noise):
    """``s ~ Multinoulli(alpha)`` as a one-hot ``[..., L]`` (Xu et al. 2015, eq. 8): the Gumbel-max
    sample ``one_hot(argmax_i(log alpha_i + g_i))`` of ``weights = alpha`` (rows summing to 1) with
    ``noise = g`` from ``gumbel_noise``. Not differentiable: a sample carries no gradient.

    Example:
        >>> import numpy as np
        >>> alpha = np.array([[0.0, 1.0, 0.0]], "float32")
        >>> keras.ops.convert_to_numpy(multinoulli(alpha, gumbel_noise((1, 3), "float32", 0))).tolist()
        [[0.0, 1.0, 0.0]]
    """
    weights = ops.convert_to_tensor(weights)
    tiny = ops.cast(1e-30, weights.dtype)  # log 0 = -inf: a location of weight 0 is never drawn
    return ops.stop_gradient(one_hot_argmax(ops.log(ops.maximum(weights, tiny)) + ops.cast(noise, weights.dtype)))
