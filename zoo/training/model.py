"""Stage ``model``: the registered model sized from the data, and its optimizer.

Both are created inside the strategy's scope, so their variables are mirrored over replicas.
"""

from __future__ import annotations

from omegaconf import DictConfig

from zoo.checks import InvalidArgument
from zoo.config import model_kwargs
from zoo.errors import ConfigError


def create_model(name: str, **kwargs):
    """``zoo.models.create(name, **kwargs)``; a constructor's refusal of an argument (a Keras-style
    ``ValueError``) becomes one line naming ``model.<argument>``, its value and what is allowed.

    The validator (``zoo.config``) answers most of these before TensorFlow starts; this is the
    same answer for rules only the constructor knows."""
    import zoo.models

    try:
        return zoo.models.create(name, **kwargs)
    except InvalidArgument as error:  # an attention's option is named as the config spells it
        options = kwargs.get("attention_options") or {}
        key = f"attention_options.{error.name}" if error.name not in kwargs and error.name in options else error.name
        raise ConfigError(f"model.{key}={error.value!r} is not valid for model={name}: "
                          f"expected {error.expected}.") from None


def make_optimizer(optimizer_cfg, clipnorm=None, loss_scale=False):
    """``optimizer.name`` (adam | adamw | sgd) with ``optimizer.learning_rate``; gradient clipping
    by norm; wrapped in a ``LossScaleOptimizer`` when ``loss_scale`` (mixed_float16)."""
    import keras

    from zoo.training import optimizers
    from zoo.training.schedules import WarmupSchedule

    learning_rate = float(optimizer_cfg.learning_rate)
    warmup, decay = int(optimizer_cfg.get("warmup_steps") or 0), optimizer_cfg.get("decay") or "none"
    if warmup or decay != "none":
        learning_rate = WarmupSchedule(learning_rate, warmup, decay)
    optimizer = optimizers.create(optimizer_cfg.name, learning_rate, clipnorm=float(clipnorm) if clipnorm else None)
    if loss_scale:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def build_model(cfg: DictConfig, task):
    """``zoo.models.create(cfg.model.name, ...)`` with the vocabulary sizes of ``task``, built."""
    model = create_model(cfg.model.name, source_vocab_size=task.source_tokenizer.vocab_size,
                         target_vocab_size=task.target_tokenizer.vocab_size, **model_kwargs(cfg.model))
    return model.ensure_built()


def build(cfg: DictConfig, task, runtime):
    """``(model, optimizer)`` under ``runtime.strategy``; the optimizer's variables exist, so a
    checkpoint can be restored into them before the first step.

    With several replicas the loop clips the all-reduced gradient itself (Keras would clip each
    replica's part), so the optimizer gets no ``clipnorm`` there.
    """
    with runtime.strategy.scope():
        model = build_model(cfg, task)
        clipnorm = cfg.trainer.clipnorm if runtime.replicas == 1 else None
        optimizer = make_optimizer(cfg.optimizer, clipnorm=clipnorm, loss_scale=runtime.precision == "mixed_float16")
        optimizer.build(model.trainable_variables)
    return model, optimizer


def float32_copy(cfg: DictConfig, task, model):
    """The model rebuilt in float32 with ``model``'s weights (mixed precision keeps float32
    variables), so the exported SavedModel takes and returns the dtypes it always did."""
    import keras

    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        copy = build_model(cfg, task)
    finally:
        keras.mixed_precision.set_global_policy(policy)
    copy.set_weights(model.get_weights())
    return copy


def weights_digest(model) -> str:
    """sha256 of the model's weights: equal on every worker of a synchronous run."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()[:16]
