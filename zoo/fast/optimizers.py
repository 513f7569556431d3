"""The fast path of ``zoo.training.optimizers.create``: Adam and AdamW whose per-variable update is one
TensorFlow kernel (``ResourceApplyAdam``).

Keras' Adam writes the update of every variable as about a dozen element-wise ops (``m += (g - m)
(1 - beta_1)``, ``v += (g^2 - v)(1 - beta_2)``, ``w -= alpha m / (sqrt(v) + eps)``), each a full pass
over the variable with a temporary: for the base-size Transformer's 9.8 M parameters (8,000-word
embeddings and output projection) that was 17% of the training step's op time. ``ResourceApplyAdam``
does the same arithmetic in one pass (``lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)``, ``w -= lr_t
m / (sqrt(v) + eps)``: Keras' formula, the same numbers up to rounding), 2-2.6x faster per variable
from 64 K elements up on the 2-core Zen 4 (360 -> 178 us at 64 K, 8.3 -> 3.1 ms at 2 M). With the
step's scalars made once per ``apply`` (``_step_scalars``) it is the cheaper one at every size: one
``apply`` of the small Transformer's 88 variables 3.63 -> 3.04 ms, and ``clipnorm``'s scales of all
gradients from one vector (``_clip_gradients``) 3.63 -> 3.45 ms (``docs/performance.md``, 2026-11-24
evening and 2026-11-25 afternoon).

The classes are the reference's otherwise (Keras' slots, checkpoints, ``get_config``, weight decay,
loss scaling, the dense gradient); the fused kernel is used where it applies: the TensorFlow
backend, no ``amsgrad``, the variable and its slots of one dtype, and at least ``fused_min_size``
elements. Anything else takes Keras' update.

It reads Keras' private slots (``PRIVATE``: ``_momentums``, ``_velocities``, ``_get_variable_index``)
and overrides its private ``_clip_gradients``. ``build`` checks that the slots are there; where a
Keras release has renamed them, the optimizer says so in one warning line and runs as the reference.
Equal to the reference (weights after several steps, clipping, weight decay, repeated embedding rows):
``tests/fast/test_optimizers.py``.
"""

from __future__ import annotations

import math
import sys

import keras
import tensorflow as tf

from zoo import kernels
from zoo.training import optimizers

PRIVATE = ("_momentums", "_velocities", "_get_variable_index")  # what the fused step reads of Keras' Adam
_warned = []


def _dense(gradient):
    """An ``IndexedSlices`` gradient as the dense tensor it stands for (repeated rows summed)."""
    return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


def _step_scalars(optimizer, dtype, device, learning_rate):
    """``ResourceApplyAdam``'s scalars (``beta_1^t``, ``beta_2^t``, ``lr``, ``beta_1``, ``beta_2``,
    ``epsilon``) in ``dtype`` on ``device``: made once per ``apply`` and shared by every variable,
    where computing them per variable cost seven small ops each (a third of a small model's update)."""
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


def _keras_has_the_slots(optimizer) -> bool:
    """Whether ``optimizer`` (built) has every attribute of ``PRIVATE``; if not, one warning line (once
    a process) and False: the optimizer then runs as the reference."""
    missing = [name for name in PRIVATE if not hasattr(optimizer, name)]
    if missing and not _warned:
        _warned.append(True)
        print(f"warning: kernels=fast: this Keras ({keras.__version__}) has no {', '.join(missing)} on "
              f"{type(optimizer).__bases__[-1].__name__}; Adam runs Keras' own update (as kernels=reference)",
              file=sys.stderr, flush=True)
    return not missing


class _Fused:
    """The fused update, and gradients clipped by the norm of the dense gradient with the scales of all
    gradients from one vector.

    ``fused_min_size``: variables with fewer elements take Keras' update (0: none)."""

    fused_min_size = 0

    _scalars = None  # during ``apply``: {(dtype, device): ResourceApplyAdam's scalars}, made once
    _fused = False  # set by ``build``: Keras has the slots the fused step reads

    def build(self, variables):
        super().build(variables)
        object.__setattr__(self, "_fused", _keras_has_the_slots(self))  # a plain attribute: not tracked

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
        differentiates the update)."""
        if not self._fused or keras.backend.backend() != "tensorflow" or not self.clipnorm or self.clipnorm <= 0:
            return super()._clip_gradients(grads)
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
        if not (self._fused and _fused_adam_step(self, gradient, variable, learning_rate)):
            super().update_step(_dense(gradient), variable, learning_rate)


class FusedAdam(_Fused, optimizers.Adam):
    """``optimizers.Adam`` with the update of each variable in one kernel (module docstring)."""


class FusedAdamW(_Fused, optimizers.AdamW):
    """``optimizers.AdamW`` (weight decay applied by Keras before the update) with the update of each
    variable in one kernel (module docstring)."""


@kernels.replaces("zoo.training.optimizers.create")
def create(name, learning_rate, clipnorm=None):
    """``optimizers.create``: ``FusedAdam`` / ``FusedAdamW`` for adam / adamw on TensorFlow; else the reference."""
    fused = {"adam": FusedAdam, "adamw": FusedAdamW}
    if name not in fused or keras.backend.backend() != "tensorflow":
        return optimizers.create.reference(name, learning_rate, clipnorm)
    return fused[name](learning_rate=learning_rate, clipnorm=clipnorm)
