"""The four location encodings of a memory (Tang et al.)."""

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention

LOCATION_MODELS = (1, 2, 3, 4)


@register_attention("location_memory")
@keras.saving.register_keras_serializable(package="zoo")
class LocationMemory(keras.layers.Layer):
    """Location-encoded memory of Tang et al. (2016): each word's memory slot weighted by where it is.

    A word ``w_i`` with embedding ``e_i`` at location ``l_i`` in a sentence of length ``n``
    becomes the memory vector ``m_i`` by one of four models (Tang et al. 2016, sec. 3.3;
    survey eq. 10-13):

    - model 1 (after Sukhbaatar et al. 2015): ``m_i = e_i ⊙ v_i`` with
      ``v_i^k = (1 - l_i/n) - (k/d)(1 - 2 l_i/n)``, ``k = 1..d`` the dimension;
    - model 2: ``m_i = e_i ⊙ v_i`` with the scalar ``v_i = 1 - l_i/n``;
    - model 3: ``m_i = e_i + v_i``, ``v_i`` a learned vector per location;
    - model 4: ``m_i = e_i ⊙ σ(v_i)``, ``v_i`` a learned vector per location.

    In the paper ``l_i`` is the distance of ``w_i`` from the aspect word and ``n`` the sentence
    length, aspect included; the memory holds the other ``n - 1`` words. Without
    ``locations`` the aspect is a virtual position 0 before the sequence, so ``l_i = i``
    (``1..J`` for ``J`` real steps) and ``n = J + 1``: every weight of models 1 and 2 is then
    positive and the earlier words weigh more. ``n`` is always the number of real steps + 1.
    Models 3 and 4 look ``v_i`` up in a ``[max_length + 1, d]`` table (row ``l``; locations
    above ``max_length`` share the last row) that starts at zeros: model 3 starts as the plain
    embeddings, model 4 as half of them.

    Masked steps give exactly 0 memory and 0 weight. Sum ``m`` over the words
    (``keras.ops.sum(m, axis=-2)``) for a memory network's sentence encoding
    (``m_i = sum_j l_j ⊙ A x_ij``, Sukhbaatar et al. 2015, sec. 4.1). Any leading shape works:
    ``[B, T, d]`` for one sentence, ``[B, S, T, d]`` for ``S`` sentences of a story.

    Shapes: ``...`` leading dims (``B``, ``S``), ``T`` words, ``d`` embedding size, ``L`` =
    ``max_length``.
    Cost: ``O(P T d)`` time and memory (``P`` the product of the leading dims); models 3-4
    have ``(L + 1) d`` weights.

    Args:
        location_model: 1, 2, 3 or 4, the model above.
        max_length: positive int ``L``, the largest location with its own learned vector
            (models 3-4; unused by 1-2).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: ``e [..., T, d]``.
        mask: optional bool ``[..., T]``, True = a real word; a Keras mask on ``inputs`` is used
            when ``locations`` is not given (Keras fills ``mask`` only for a single tensor input).
        locations: optional int ``[..., T]``, ``l_i`` (e.g. distances from an aspect word);
            default ``1..T``.
        return_attention_scores: bool, also return the location weights.

    Returns:
        ``m [..., T, d]``, or ``(m, v [..., T, d])`` with ``return_attention_scores=True``,
        ``v`` the weights ``e`` is multiplied by (models 1, 2, 4; ``σ(v_i)`` for model 4) or the
        vectors added to it (model 3), 0 on masked steps.

    Example:
        >>> import numpy as np
        >>> layer = LocationMemory(location_model=2)
        >>> m, v = layer(np.ones((1, 3, 2)), return_attention_scores=True)  # l = 1, 2, 3; n = 4
        >>> np.asarray(v, "float64")[0, :, 0].tolist(), tuple(m.shape)
        ([0.75, 0.5, 0.25], (1, 3, 2))

    References:
        Tang, Qin, Liu. Aspect Level Sentiment Classification with Deep Memory Network.
        EMNLP 2016, sec. 3.3. https://arxiv.org/abs/1605.08900
        Sukhbaatar, Szlam, Weston, Fergus. End-To-End Memory Networks. NeurIPS 2015, sec. 4.1.
        Zhu et al. Research progress of attention mechanism in deep learning, 2019, eq. 10-13.
    """

    def __init__(self, location_model=2, max_length=64, **kwargs):
        super().__init__(**kwargs)
        if isinstance(location_model, bool) or location_model not in LOCATION_MODELS:
            raise checks.invalid("location_model", "one of 1, 2, 3, 4", location_model)
        self.location_model = int(location_model)
        self.max_length = checks.positive_int("max_length", max_length)
        self.supports_masking = True

    def build(self, inputs_shape, locations_shape=None):
        if self.location_model in (3, 4):
            self.location_embeddings = self.add_weight(
                name="location_embeddings", shape=(self.max_length + 1, inputs_shape[-1]), initializer="zeros")

    def call(self, inputs, mask=None, locations=None, return_attention_scores=False):
        e = ops.convert_to_tensor(inputs, self.compute_dtype)
        steps, dim = ops.shape(e)[-2], e.shape[-1]
        real = ops.ones(ops.shape(e)[:-1], e.dtype) if mask is None else ops.cast(mask, e.dtype)  # [..., T]
        if locations is None:
            l_i = ops.broadcast_to(ops.cast(ops.arange(1, steps + 1), e.dtype), ops.shape(real))
        else:
            l_i = ops.cast(locations, e.dtype)
        n = ops.sum(real, axis=-1, keepdims=True) + 1.0  # the real words and the aspect
        ratio = ops.expand_dims(l_i / n, -1)  # l_i / n: [..., T, 1]
        if self.location_model == 1:
            k_over_d = ops.cast(ops.arange(1, dim + 1), e.dtype) / dim  # [d]
            v = (1.0 - ratio) - k_over_d * (1.0 - 2.0 * ratio)
        elif self.location_model == 2:
            v = ops.broadcast_to(1.0 - ratio, ops.shape(e))
        else:
            rows = ops.clip(ops.cast(l_i, "int32"), 0, self.max_length)
            v = ops.take(ops.cast(self.location_embeddings, e.dtype), rows, axis=0)  # [..., T, d]
            if self.location_model == 4:
                v = ops.sigmoid(v)
        v = v * ops.expand_dims(real, -1)
        m = e + v if self.location_model == 3 else e * v
        m = m * ops.expand_dims(real, -1)
        if return_attention_scores:
            return m, v
        return m

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

    def compute_output_shape(self, inputs_shape, locations_shape=None):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"location_model": self.location_model, "max_length": self.max_length})
        return config
