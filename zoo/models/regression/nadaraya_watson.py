"""Nadaraya-Watson kernel regression as a trainable Keras model (attention pooling)."""

import keras

import zoo.attention
from zoo.models.registry import register_model


@keras.saving.register_keras_serializable(package="zoo")
class NadarayaWatsonRegressor(keras.Model):
    """``f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i`` (d2l sec. 10.2.4), one learnable ``w``.

    With ``parametric=False`` it is the classic estimator with bandwidth ``h`` (``w = 1/h``,
    fixed); ``kernel`` may also be ``boxcar`` or ``epanechnikov``.

    Call arguments:
        inputs: ``(queries [B, Tq], keys [B, Tk], values [B, Tk])``.

    Returns:
        ``f [B, Tq]``; ``attention_weights(inputs)`` gives ``[B, Tq, Tk]``.

    References:
        Nadaraya 1964; Watson 1964; Zhang et al., Dive into Deep Learning, sec. 10.2.
    """

    def __init__(self, kernel="gaussian", bandwidth=1.0, parametric=True, **kwargs):
        super().__init__(**kwargs)
        self.kernel = kernel
        self.bandwidth = float(bandwidth)
        self.parametric = bool(parametric)
        self.pooling = zoo.attention.create("nadaraya_watson", kernel=kernel, bandwidth=bandwidth,
                                            parametric=parametric, name="pooling",
                                            dtype=self.dtype_policy)

    def call(self, inputs):
        queries, keys, values = inputs
        return self.pooling(queries, keys, values)

    def attention_weights(self, inputs):
        queries, keys, values = inputs
        return self.pooling(queries, keys, values, return_attention_scores=True)[1]

    def get_config(self):
        config = super().get_config()
        config.update({"kernel": self.kernel, "bandwidth": self.bandwidth, "parametric": self.parametric})
        return config


@register_model("nadaraya_watson", task="regression")
def nadaraya_watson(kernel="gaussian", bandwidth=1.0, parametric=True, **kwargs):
    return NadarayaWatsonRegressor(kernel=kernel, bandwidth=bandwidth, parametric=parametric, name="nadaraya_watson",
                                   **kwargs)
