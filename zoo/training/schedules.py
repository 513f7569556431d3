"""Learning-rate schedules (``optimizer.warmup_steps``, ``optimizer.decay``)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to ``learning_rate`` over ``warmup_steps``, then constant or ``lr * sqrt(w / step)``."""

    def __init__(self, learning_rate, warmup_steps=0, decay="none"):
        if decay not in ("none", "inverse_sqrt"):
            raise ValueError(f"optimizer.decay={decay!r} is not valid. Available: none, inverse_sqrt")
        self.learning_rate = float(learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.decay = decay

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = float(max(self.warmup_steps, 1))
        lr = self.learning_rate * ops.minimum(1.0, step / warmup)
        if self.decay == "inverse_sqrt":
            lr = lr * ops.minimum(1.0, ops.sqrt(warmup / step))
        return lr

    def get_config(self):
        return {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps, "decay": self.decay}
