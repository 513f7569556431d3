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

import inspect
import os
from typing import Dict

from zoo.config import model_kwargs
from zoo.errors import ConfigError
from zoo.training.data import EncodedData
from zoo.training.lifecycle import ONE_REPLICA_FLOAT32, TaskKind
from zoo.training.model import create_model

DATA_SIZES = ("vocab_size", "num_classes")  # from the data, never from a config
TRAINER_CONSTRAINTS = ONE_REPLICA_FLOAT32  # refused before TensorFlow starts (zoo.config.task_kind_problems)


class ClassifyData(EncodedData):
    """``EncodedData`` of ``zoo.data.classification``: ``(ids [B, T], class + 1 [B, 1])`` batches,
    bucketed by length; one label per example."""

    @staticmethod
    def module():
        import zoo.data.classification

        return zoo.data.classification

    def train_rows(self) -> int:
        return len(self.encoded["train"][1])


def load_classify_data(cfg) -> ClassifyData:
    return ClassifyData.from_config(cfg)


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

    def classifier(self, data, model):
        from zoo.export.classifier import Classifier

        return self.module_of(model, lambda: Classifier(model, data.task))

    def build_data(self, runtime) -> ClassifyData:
        return load_classify_data(self.cfg)

    def new_model(self, data):
        return build_classifier(self.cfg, data.task)

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
        saved_dir = self.save_with_model(self.classifier(data, model), model, config_yaml, workdir)
        vocab_dir = os.path.join(workdir, "vocab")
        data.task.tokenizer.save_artifacts(os.path.join(vocab_dir, "tokens"))
        return {"saved_model": saved_dir, "vocab": vocab_dir}

    def summary(self, data, metrics: Dict[str, float], epochs: int, train_seconds: float) -> str:
        return (f"test_accuracy = {metrics['test_accuracy']:.4f}   majority class = "
                f"{metrics['test_majority_accuracy']:.4f}   ({epochs} epochs, {train_seconds:.0f} s training)")
