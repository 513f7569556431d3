"""Adam and AdamW: Keras' own, on the dense gradient; ``create`` makes the optimizer of a run.

Adam (Kingma and Ba 2015, Algorithm 1) keeps for every variable ``w`` the moving averages of its
gradient ``g`` and of its square, and steps by their bias-corrected ratio::

    m_t = beta_1 m_{t-1} + (1 - beta_1) g_t
    v_t = beta_2 v_{t-1} + (1 - beta_2) g_t^2
    w_t = w_{t-1} - alpha_t m_t / (sqrt(v_t) + epsilon),   alpha_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)

(Keras' form, the ``epsilon-hat`` of the paper's sec. 2). AdamW (Loshchilov and Hutter 2019)
also decays each weight, ``w <- w - lr lambda w``, apart from the gradient. Gradient clipping by
norm (``clipnorm = c``) scales each gradient by ``c / max(||g||, c)`` first.

One change to Keras' classes, so that they are Adam on the gradient: an embedding's gradient
arrives as one row per occurrence of a token (``IndexedSlices`` on TensorFlow), and Keras squares
those rows one by one (``v`` gets ``a^2 + b^2`` for a token seen twice, where ``g^2`` is ``(a +
b)^2``), in clipping's norm too; ``apply`` sums them into the dense gradient first.

References:
    Kingma, Ba. Adam: A Method for Stochastic Optimization. ICLR 2015.
    https://arxiv.org/abs/1412.6980
    Loshchilov, Hutter. Decoupled Weight Decay Regularization. ICLR 2019.
    https://arxiv.org/abs/1711.05101
"""

import keras
from keras import ops

from zoo import kernels

NAMES = ("adam", "adamw", "sgd")


class DenseGradients:
    """Mixed into a Keras optimizer: ``apply`` takes each gradient as a dense tensor of its variable's
    shape (an ``IndexedSlices`` gradient's repeated rows summed)."""

    def apply(self, grads, trainable_variables=None):
        if trainable_variables is not None:
            grads = [None if g is None else ops.reshape(g, v.shape)  # reshape: dense, rows summed
                     for g, v in zip(grads, trainable_variables)]
        return super().apply(grads, trainable_variables)


@keras.saving.register_keras_serializable(package="zoo")
class Adam(DenseGradients, keras.optimizers.Adam):
    """``keras.optimizers.Adam`` on the dense gradient (module docstring)."""


@keras.saving.register_keras_serializable(package="zoo")
class AdamW(DenseGradients, keras.optimizers.AdamW):
    """``keras.optimizers.AdamW`` (decoupled weight decay) on the dense gradient (module docstring)."""


@kernels.replaceable
def create(name, learning_rate, clipnorm=None):
    """The optimizer ``name`` (``adam``, ``adamw`` or ``sgd``, Keras' ``SGD``) with ``learning_rate``
    (a float or a schedule) and gradient clipping by norm (``clipnorm``, None: none)."""
    if name not in NAMES:
        raise ValueError(f"Unknown optimizer {name!r}. Available: {', '.join(NAMES)}")
    classes = {"adam": Adam, "adamw": AdamW, "sgd": keras.optimizers.SGD}
    return classes[name](learning_rate=learning_rate, clipnorm=clipnorm)
