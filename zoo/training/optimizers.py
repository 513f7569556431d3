"""Adam and AdamW whose per-variable update is one TensorFlow kernel (``ResourceApplyAdam``).

Keras' Adam writes the update of every variable as about a dozen element-wise ops (``m += (g - m)
(1 - beta_1)``, ``v += (g^2 - v)(1 - beta_2)``, ``w -= alpha m / (sqrt(v) + eps)``), each a full pass
over the variable with a temporary: for the base-size Transformer's 9.8 M parameters (8,000-word
embeddings and output projection) that was 17% of the training step's op time. TensorFlow's
``ResourceApplyAdam`` does the same arithmetic in one pass (``lr_t = lr sqrt(1 - beta_2^t) / (1 -
beta_1^t)``, ``w -= lr_t m / (sqrt(v) + eps)``: Keras' formula, the same numbers up to rounding),
2-2.6x faster per variable from 64 K elements up on this CPU (``README.md``, Speed).

The classes are Keras' own otherwise (slots, checkpoints, ``get_config``, weight decay, gradient
clipping, loss scaling); the fused kernel is used where it applies: the TensorFlow backend, no
``amsgrad``, the variable and its slots of one dtype, and at least ``fused_min_size`` elements
(below it the per-variable cost is fixed overhead either way). Anything else takes Keras' update.

One difference, on purpose: an embedding's gradient (``IndexedSlices``, one row per occurrence of a
token) is summed into the dense gradient before clipping and the update. Keras squares its rows one
by one in both (``a^2 + b^2`` for a token seen twice, where Adam on the gradient has ``(a + b)^2``),
so its Adam on an embedding is not Adam on the embedding's gradient.
"""

from __future__ import annotations

import math

import keras


def _dense(gradient):
    """An ``IndexedSlices`` gradient as the dense tensor it stands for (repeated rows summed)."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if isinstance(gradient, tf.IndexedSlices):
            return tf.convert_to_tensor(gradient)
    return gradient


def _step_scalars(optimizer, dtype, device, learning_rate):
    """``ResourceApplyAdam``'s scalars (``beta_1^t``, ``beta_2^t``, ``lr``, ``beta_1``, ``beta_2``,
    ``epsilon``) in ``dtype`` on ``device``: made once per ``apply`` and shared by every variable,
    where computing them per variable cost seven small ops each (a third of a small model's update)."""
    import tensorflow as tf

    key = (dtype, device)
    found = optimizer._scalars.get(key) if optimizer._scalars is not None else None
    if found is None:
        with tf.device(device):
            step = tf.cast(optimizer.iterations + 1, dtype)
            beta_1, beta_2 = tf.cast(optimizer.beta_1, dtype), tf.cast(optimizer.beta_2, dtype)
            found = (tf.pow(beta_1, step), tf.pow(beta_2, step), tf.cast(learning_rate, dtype), beta_1, beta_2,
                     tf.cast(optimizer.epsilon, dtype))
        if optimizer._scalars is not None:
            optimizer._scalars[key] = found
    return found


def _fused_adam_step(optimizer, gradient, variable, learning_rate) -> bool:
    """``ResourceApplyAdam`` on ``variable`` and its slots; False (nothing done) where it does not apply."""
    if (keras.backend.backend() != "tensorflow" or optimizer.amsgrad
            or math.prod(variable.shape) < optimizer.fused_min_size):
        return False
    import tensorflow as tf

    index = optimizer._get_variable_index(variable)
    m, v = optimizer._momentums[index], optimizer._velocities[index]
    dtype = variable.dtype
    if m.dtype != dtype or v.dtype != dtype:
        return False
    gradient = _dense(gradient)
    handle = variable.handle if hasattr(variable, "handle") else variable.value.handle
    beta1_power, beta2_power, lr, beta_1, beta_2, epsilon = _step_scalars(optimizer, dtype, handle.device,
                                                                          learning_rate)
    tf.raw_ops.ResourceApplyAdam(
        var=handle, m=m.value.handle, v=v.value.handle, beta1_power=beta1_power, beta2_power=beta2_power,
        lr=lr, beta1=beta_1, beta2=beta_2, epsilon=epsilon, grad=tf.cast(gradient, dtype), use_locking=False)
    return True


class _Fused:
    """The fused update, and gradients clipped by the norm of the gradient itself: an embedding's
    ``IndexedSlices`` (one row per occurrence of a token) is summed first, where Keras' clipping and
    update square its rows one by one (``a^2 + b^2`` for a token seen twice, not ``(a + b)^2``).

    ``fused_min_size``: variables with fewer elements take Keras' update (0: none). With the step's
    scalars shared (``_step_scalars``) the fused kernel is the cheaper one at every size: the small
    Transformer's 88 variables, all under 16 K elements, 3.63 -> 3.04 ms per ``apply`` (2026-11-25,
    afternoon; from 64 K up 2-2.6x faster: 360 -> 178 us at 64 K, 8.3 -> 3.1 ms at 2 M)."""

    fused_min_size = 0

    _scalars = None  # during ``apply``: {(dtype, device): ResourceApplyAdam's scalars}, made once

    def apply(self, grads, trainable_variables=None):
        object.__setattr__(self, "_scalars", {})  # a plain dict: not tracked, never checkpointed
        try:
            return super().apply(grads, trainable_variables)
        finally:
            object.__setattr__(self, "_scalars", None)

    def _clip_gradients(self, grads):
        """Keras' ``clipnorm`` (each gradient ``g`` scaled by ``c / max(||g||, c)``) with the scales
        of all gradients computed together: one ``l2_loss`` and one product per gradient, the rest
        (``c / sqrt(max(||g||^2, c^2))`` for every ``g``) three ops on a vector, where Keras makes
        four per gradient and a ``where`` (its guard for ``sqrt``'s gradient at 0: nothing
        differentiates the update). The small Transformer's 88 gradients: 3.63 -> 3.45 ms per
        ``apply``."""
        if keras.backend.backend() != "tensorflow" or not self.clipnorm or self.clipnorm <= 0:
            return super()._clip_gradients(grads)
        import tensorflow as tf

        grads = [None if g is None else _dense(g) for g in grads]
        present = [g for g in grads if g is not None]
        if not present:
            return grads
        # ||g||^2 = 2 l2_loss(g): c / sqrt(max(2 l, c^2)) = c / sqrt(2) rsqrt(max(l, c^2 / 2))
        clipnorm = float(self.clipnorm)
        halves = tf.stack([tf.cast(tf.nn.l2_loss(g), tf.float32) for g in present])
        scales = clipnorm / math.sqrt(2.0) * tf.math.rsqrt(tf.maximum(halves, clipnorm * clipnorm / 2.0))
        scales = iter(tf.unstack(scales))
        return [None if g is None else g * tf.cast(next(scales), g.dtype) for g in grads]

    def update_step(self, gradient, variable, learning_rate):
        if not _fused_adam_step(self, gradient, variable, learning_rate):
            super().update_step(_dense(gradient), variable, learning_rate)


@keras.saving.register_keras_serializable(package="zoo")
class Adam(_Fused, keras.optimizers.Adam):
    """``keras.optimizers.Adam`` with the update of each variable in one kernel (module docstring)."""


@keras.saving.register_keras_serializable(package="zoo")
class AdamW(_Fused, keras.optimizers.AdamW):
    """``keras.optimizers.AdamW`` (decoupled weight decay, applied by Keras before the update) with
    the update of each variable in one kernel (module docstring)."""
