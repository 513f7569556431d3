"""Performer attention, FAVOR+ (Choromanski et al. 2021): softmax attention by positive random features."""

import math

import keras
from keras import ops

from zoo import checks
from zoo.attention.base_attention import register_attention
from zoo.attention.linear_attention import LinearAttention
from zoo.attention.multi_head_attention import SCORINGS


@register_attention("performer")
@keras.saving.register_keras_serializable(package="zoo")
class PerformerAttention(LinearAttention):
    """Performer attention (FAVOR+): an unbiased estimate of softmax attention in linear time.

    The softmax kernel is written as an expectation over random projections ``w ~ N(0, I_d)``,
    ``exp(x^T y) = E_w[exp(w^T x - |x|^2 / 2) exp(w^T y - |y|^2 / 2)]`` (Choromanski et al. 2021,
    Lemma 1), and estimated with ``m`` positive random features

    ``phi(x) = exp(-|x|^2 / 2) / sqrt(m) (exp(w_1^T x), ..., exp(w_m^T x))``,

    so that ``phi(q)^T phi(k) ~ exp(q^T k)``, with ``q, k`` the projected queries and keys times
    ``d_k^{-1/4}`` (``scoring="scaled_dot"``: ``exp(q^T k / sqrt(d_k))``; ``"dot"``: unscaled). The
    ``w_i`` are orthogonal in blocks of ``d_k`` (the Gram-Schmidt of a Gaussian matrix, each row then
    scaled to the norm of an independent ``N(0, I_d)`` vector: sec. 2.4, "ORF"), which lowers the
    estimate's variance. Attention is then linear attention with this ``phi`` (``LinearAttention``:
    ``phi(Q) (phi(K)^T V)`` normalised by ``phi(Q) phi(K)^T 1``, eq. 5 of Katharopoulos et al.;
    causal by prefix sums; decoding with the constant-size state ``(S, Z)``, ``[B, H, m, d_v]`` and
    ``[B, H, m]``). The error falls as ``m`` grows.

    Numerics: each query's features are divided by ``exp(max_i w_i^T q)``, which cancels between the
    numerator and the denominator; the keys' are not (a constant per key would not cancel across the
    steps of a decoding state), and need none: ``w^T k - |k|^2 / 2 <= |w|^2 / 2``.

    The features' schedule: ``W`` ``[m, d_k]`` is a non-trainable weight drawn when the layer is built,
    from ``seed`` (so it is saved and reloaded with the model, and decoding uses the features the model
    was trained with). With ``redraw_interval=N > 0`` a new ``W`` is drawn every ``N`` calls with
    ``training=True`` (the ``N``-th, ``2N``-th, ... training call draws before it computes; a
    non-trainable step counter, also saved), as the Performer paper and its implementations do
    during training; ``0`` keeps the first draw for ever. Inference never redraws.

    Everything else as ``linear``: implied weights ``phi(Q_i)^T phi(K_j) / sum_j'(...)`` when asked
    (None with a decoding cache), key masks zero ``phi(K_j)``, a per-query mask goes through the
    explicit map, rotary positions rotate queries and keys before the feature map, no dropout, no score
    bias, no sliding window.

    Shapes: ``B`` batch, ``Tq``/``Tv`` query/source steps, ``H`` heads, ``d_k``/``d_v`` per-head sizes,
    ``m`` random features.

    Args:
        num_heads, key_dim, value_dim, output_dim, use_bias, scoring, num_kv_heads: as ``multi_head``.
        dropout: must be 0.0.
        num_features: positive int, ``m``.
        redraw_interval: int >= 0, training calls between two draws of the features; 0: never redraw.
        seed: int or None, the seed of the draws.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        As ``linear``.

    Returns:
        As ``linear``.

    Example:
        >>> import numpy as np
        >>> layer = PerformerAttention(num_heads=2, key_dim=4, num_features=16, seed=1)
        >>> x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
        >>> out, w = layer(x, x, use_causal_mask=True, return_attention_scores=True)
        >>> tuple(out.shape), tuple(w.shape), tuple(layer.initial_cache(2, 5)[0].shape)
        ((2, 5, 8), (2, 2, 5, 5), (2, 2, 16, 4))

    References:
        Choromanski, Likhosherstov, Dohan, Song, Gane, Sarlos, Hawkins, Davis, Mohiuddin, Kaiser,
        Belanger, Colwell, Weller. Rethinking Attention with Performers. ICLR 2021, sec. 2.3-2.4,
        Lemma 1. https://arxiv.org/abs/2009.14794
    """

    def __init__(self, num_heads=2, key_dim=None, value_dim=None, output_dim=None, use_bias=True,
                 scoring="scaled_dot", dropout=0.0, num_kv_heads=None, num_features=64, redraw_interval=0,
                 seed=None, **kwargs):
        super().__init__(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim, output_dim=output_dim,
                         use_bias=use_bias, dropout=dropout, num_kv_heads=num_kv_heads, **kwargs)
        self.scoring = checks.choice("scoring", scoring, SCORINGS)
        self.num_features = checks.positive_int("num_features", num_features)
        redraw_interval = checks.optional_int("redraw_interval", redraw_interval)
        if redraw_interval is None or redraw_interval < 0:
            raise checks.invalid("redraw_interval", "an integer >= 0 (0: never redraw)", redraw_interval)
        self.redraw_interval = redraw_interval
        self.seed = checks.optional_int("seed", seed)
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        self.projection = self.add_weight(name="projection", shape=(self.num_features, self.head_key_dim),
                                          initializer="zeros", trainable=False)
        self.projection.assign(self.draw())
        self.training_calls = self.add_weight(name="training_calls", shape=(), dtype="int32",
                                              initializer="zeros", trainable=False)

    @property
    def feature_dim(self):
        return self.num_features

    def draw(self):
        """``W [m, d_k]``: blocks of ``d_k`` orthonormal rows (the Q of a Gaussian matrix's QR, with the signs
        that make R's diagonal positive, which makes Q uniform on the orthogonal group: without them the
        directions are not uniform and the estimate keeps a bias however large ``m``), each row scaled to
        the norm of an independent Gaussian vector, so that rows are marginally ``N(0, I_d)``."""
        d, m = self.head_key_dim, self.num_features
        count = -(-m // d)
        gaussian = keras.random.normal((count, d, d), seed=self.seed_generator)
        q, r = ops.qr(gaussian)  # [count, d, d], orthonormal columns
        q = q * ops.expand_dims(ops.sign(ops.diagonal(r, axis1=-2, axis2=-1)), -2)  # R's diagonal > 0: Q uniform
        rows = ops.reshape(ops.swapaxes(q, -1, -2), (count * d, d))[:m]
        norms = ops.sqrt(ops.sum(ops.square(keras.random.normal((m, d), seed=self.seed_generator)), axis=-1))
        return ops.expand_dims(norms, -1) * rows

    def feature_map(self, x, is_query):
        """FAVOR+'s ``phi(x) = exp(w^T x - |x|^2 / 2) / sqrt(m)`` of ``x [B, H, T, d_k]`` (times
        ``d_k^{-1/4}`` with ``scaled_dot``): ``[B, H, T, m]``; a query's divided by its largest
        ``exp(w^T x)`` (cancels in the normalisation)."""
        x = x * ops.cast(math.sqrt(self.scale), x.dtype)
        projected = ops.einsum("bhtd,md->bhtm", x, ops.cast(self.projection, x.dtype))  # w_i^T x
        exponent = projected - 0.5 * ops.sum(ops.square(x), axis=-1, keepdims=True)
        if is_query:
            exponent = exponent - ops.stop_gradient(ops.max(projected, axis=-1, keepdims=True))
        return ops.exp(exponent) / ops.cast(math.sqrt(self.num_features), x.dtype)

    def call(self, query, value, key=None, *, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             use_causal_mask=False, cache=None, cache_update_index=None, rotary=None, score_bias=None,
             return_attention_scores=False, training=None):
        if training and self.redraw_interval > 0:  # the N-th, 2N-th, ... training call draws new features
            self.training_calls.assign_add(1)
            redraw = ops.equal(ops.mod(ops.convert_to_tensor(self.training_calls), self.redraw_interval), 0)
            self.projection.assign(ops.where(redraw, self.draw(), ops.convert_to_tensor(self.projection)))
        return super().call(query, value, key, query_mask=query_mask, value_mask=value_mask, key_mask=key_mask,
                            attention_mask=attention_mask, use_causal_mask=use_causal_mask, cache=cache,
                            cache_update_index=cache_update_index, rotary=rotary, score_bias=score_bias,
                            return_attention_scores=return_attention_scores, training=training)

    def get_config(self):
        config = super().get_config()
        config.update({"scoring": self.scoring, "num_features": self.num_features,
                       "redraw_interval": self.redraw_interval, "seed": self.seed})
        return config
