"""The classification task kind (``task: classify`` models on ``data=listops``) of the one run lifecycle.

What differs from translation lives here (``ClassifyKind``): the data (``zoo.data.classification``
batches ``(ids [B, T], class + 1 [B, 1])``), the model's sizes (``vocab_size``, ``num_classes``), the
scoring (``zoo.evaluation.classify``: ``val_accuracy`` per epoch, ``test_accuracy`` at the end,
beside ``test_majority_accuracy``, the accuracy of always answering the training split's most frequent
class) and the export (``zoo.export.classifier.Classifier``: a batch of strings in, class ids and
probabilities out). The loop is ``zoo.training.fit.fit`` unchanged: a classifier's ``call`` returns
``[B, 1, C + 1]`` logits, so the per-token loss against ``class + 1`` is the class cross-entropy.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from typing import Dict, Optional

import numpy as np
from omegaconf import OmegaConf

from zoo.config import model_kwargs
from zoo.errors import ConfigError
from zoo.training.data import epoch_seed
from zoo.training.lifecycle import TaskKind
from zoo.training.model import create_model, make_optimizer

DATA_SIZES = ("vocab_size", "num_classes")  # from the data, never from a config


@dataclasses.dataclass
class ClassifyData:
    """What ``fit`` asks of its data: epoch batches, validation batches, steps and examples per epoch."""

    task: object
    batch_size: int
    seed: int
    steps_per_epoch: Optional[int]
    bucket_boundaries: object
    train_arrays: tuple
    val_arrays: tuple

    @property
    def tokens_per_epoch(self) -> float:  # one label per example
        rows = len(self.train_arrays[1])
        return float(min(rows, self.steps_per_epoch * self.batch_size) if self.steps_per_epoch else rows)

    def train_batches(self, epoch: int, skip_steps: int = 0):
        from zoo.data.classification import make_dataset

        boundaries = self.bucket_boundaries if isinstance(self.bucket_boundaries, (list, tuple)) or \
            OmegaConf.is_list(self.bucket_boundaries) else None
        ds = make_dataset(self.task, "train", self.batch_size, shuffle=True, seed=epoch_seed(self.seed, epoch),
                          bucket_boundaries=boundaries, encoded=self.train_arrays)
        if self.steps_per_epoch:
            ds = ds.repeat().take(self.steps_per_epoch)
        if skip_steps:
            ds = ds.skip(skip_steps)
        return ds

    def val_batches(self):
        from zoo.data.classification import make_dataset

        return make_dataset(self.task, "val", self.batch_size, encoded=self.val_arrays)


def load_classify_data(cfg) -> ClassifyData:
    from zoo.data import load_task
    from zoo.data.classification import arrays

    task = load_task(cfg.data)
    t = cfg.trainer
    return ClassifyData(task=task, batch_size=int(t.batch_size), seed=int(cfg.seed),
                        steps_per_epoch=int(t.steps_per_epoch) if t.steps_per_epoch else None,
                        bucket_boundaries=t.bucket_boundaries, train_arrays=arrays(task, "train"),
                        val_arrays=arrays(task, "val"))


def build_classifier(cfg, task):
    """``zoo.models.create(cfg.model.name, ...)`` with the data's sizes the constructor asks for, built."""
    import zoo.models
    from zoo.models.self_attention.transformer_classifier import attention_takes_max_length

    longest, attention = cfg.model.get("max_length"), cfg.model.get("attention")
    if attention is not None and attention_takes_max_length(str(attention)) and task.max_length > int(longest):
        raise ConfigError(f"model.max_length={longest} is shorter than data={task.name}'s longest input "
                          f"({task.max_length} tokens), and model.attention={attention} is sized for the longest "
                          f"sequence: use model.max_length={task.max_length} or more.")
    sizes = {"vocab_size": task.vocab_size, "num_classes": task.num_classes}
    wanted = inspect.signature(zoo.models.MODELS.get(cfg.model.name)).parameters
    model = create_model(cfg.model.name, **{k: v for k, v in sizes.items() if k in wanted},
                         **model_kwargs(cfg.model))
    return model.ensure_built()


class ClassifyKind(TaskKind):
    """Text classification for the run lifecycle (``zoo.training.lifecycle.run``): ``ClassifyData``, a
    classifier with the data's sizes, accuracy per epoch and at the end, the ``Classifier`` export."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self._classifier = (None, None)  # (model, its exported module): traced once, for scoring and export

    def classifier(self, data, model):
        if self._classifier[0] is not model:
            from zoo.export.classifier import Classifier

            self._classifier = (model, Classifier(model, data.task))
        return self._classifier[1]

    def check_runtime(self, runtime) -> None:
        """One replica in float32: the batches are not sharded over replicas, and the export is float32."""
        if runtime.replicas > 1 or runtime.precision != "float32":
            raise ConfigError("classification models train with trainer.strategy=default and trainer.precision="
                              f"float32 (got strategy={self.cfg.trainer.strategy}, "
                              f"precision={self.cfg.trainer.precision}).")

    def build_data(self, runtime) -> ClassifyData:
        return load_classify_data(self.cfg)

    def build_model(self, data, runtime):
        with runtime.strategy.scope():
            model = build_classifier(self.cfg, data.task)
            optimizer = make_optimizer(self.cfg.optimizer, clipnorm=self.cfg.trainer.clipnorm)
            optimizer.build(model.trainable_variables)
        return model, optimizer

    def metric(self, data) -> str:
        return "accuracy"

    def validation(self, data, model, runtime):
        from zoo.evaluation.classify import score_classifier

        classify, batch_size = self.classifier(data, model).classify, int(self.cfg.trainer.batch_size)

        def val_metrics() -> Dict[str, float]:
            return {"accuracy": score_classifier(classify, data.task, "val", batch_size)[0]["accuracy"]}

        return val_metrics

    def score(self, data, model, workdir: str) -> Dict[str, float]:
        from zoo.evaluation.classify import log_classifier_outputs, score_classifier

        metrics, outputs = score_classifier(self.classifier(data, model).classify, data.task, "test",
                                            int(self.cfg.trainer.batch_size))
        log_classifier_outputs("test", data.task, metrics, outputs, int(self.cfg.tracking.predictions), workdir)
        return {f"test_{k}": v for k, v in metrics.items()}

    def export(self, data, model, config_yaml: str, workdir: str) -> Dict[str, str]:
        """``saved_model/`` (with ``assets.extra/model.keras`` and ``config.yaml``) and ``vocab/``."""
        if not all(np.all(np.isfinite(w)) for w in model.get_weights()):
            raise ValueError("The model's weights hold NaN or infinite values; it is not exported.")
        saved_dir = os.path.join(workdir, "saved_model")
        self.classifier(data, model).save(saved_dir, config_yaml=config_yaml)
        model.save(os.path.join(saved_dir, "assets.extra", "model.keras"))
        vocab_dir = os.path.join(workdir, "vocab")
        data.task.tokenizer.save_artifacts(os.path.join(vocab_dir, "tokens"))
        return {"saved_model": saved_dir, "vocab": vocab_dir}

    def summary(self, data, metrics: Dict[str, float], epochs: int, train_seconds: float) -> str:
        return (f"test_accuracy = {metrics['test_accuracy']:.4f}   majority class = "
                f"{metrics['test_majority_accuracy']:.4f}   ({epochs} epochs, {train_seconds:.0f} s training)")
