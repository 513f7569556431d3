"""The story-QA task kind (``task: qa`` models on ``data=story_qa``) of the one run lifecycle.

What differs from translation is small and lives here (``QAKind``): the data (``zoo.data.story_qa``
batches ``((story [B, S, W], question [B, Wq]), answer [B, 1])``), the model's sizes
(``vocab_size`` and, where the model takes it, ``memory_size``), the exported module
(``zoo.export.reader.Reader``: raw story and question strings in) and the scoring
(``zoo.evaluation.qa``: accuracy and attention-as-evidence per kind of question). The loop is
``zoo.training.fit.fit`` unchanged: a QA model's ``call`` returns ``[B, 1, V]`` logits, so the
per-token loss against ``answer [B, 1]`` is the answer's cross-entropy, and ``model.losses``
(the self-attentive penalty) is added as for every model.
"""

from __future__ import annotations

import inspect
import os
from typing import Dict

from zoo.config import model_kwargs
from zoo.training.data import EncodedData
from zoo.training.lifecycle import ONE_REPLICA_FLOAT32, TaskKind
from zoo.training.model import create_model

DATA_SIZES = ("vocab_size", "memory_size")  # from the data, never from a config
TRAINER_CONSTRAINTS = ONE_REPLICA_FLOAT32  # refused before TensorFlow starts (zoo.config.task_kind_problems)


class QAData(EncodedData):
    """``EncodedData`` of ``zoo.data.story_qa``: ``((story, question), answer [B, 1])`` batches, bucketed
    by the number of sentences; one answer token per question."""

    @staticmethod
    def module():
        import zoo.data.story_qa

        return zoo.data.story_qa

    def train_rows(self) -> int:
        return len(self.encoded["train"]["answer"])


def load_qa_data(cfg) -> QAData:
    return QAData.from_config(cfg)


def build_qa_model(cfg, task):
    """``zoo.models.create(cfg.model.name, ...)`` with the data's sizes the constructor asks for, built."""
    import zoo.models

    sizes = {"vocab_size": task.vocab_size, "memory_size": task.memory_size}
    builder = zoo.models.MODELS.get(cfg.model.name)
    wanted = inspect.signature(builder).parameters
    model = create_model(cfg.model.name, **{k: v for k, v in sizes.items() if k in wanted},
                              **model_kwargs(cfg.model))
    return model.ensure_built()


def make_reader(model, task):
    from zoo.export.reader import Reader

    return Reader(model, task.tokenizer, task.memory_size, task.max_words, task.max_question_words)


class QAKind(TaskKind):
    """Story question answering for the run lifecycle (``zoo.training.lifecycle.run``): ``QAData``, a
    ``QAModel`` with the data's sizes, accuracy and evidence per epoch and at the end, the ``Reader``."""

    def reader(self, data, model):
        return self.module_of(model, lambda: make_reader(model, data.task))

    def build_data(self, runtime) -> QAData:
        return load_qa_data(self.cfg)

    def new_model(self, data):
        return build_qa_model(self.cfg, data.task)

    def metric(self, data) -> str:
        return "accuracy"

    def validation(self, data, model, runtime):
        import zoo.evaluation.qa as qa

        answer, examples = self.reader(data, model).answer, data.task.examples["val"]

        def val_metrics() -> Dict[str, float]:
            metrics, _ = qa.score_qa(answer, examples)
            return {"accuracy": metrics["accuracy"], "evidence": metrics["evidence"]}

        return val_metrics

    def score(self, data, model, workdir: str) -> Dict[str, float]:
        import zoo.evaluation.qa as qa

        task, tracking = data.task, self.cfg.tracking
        metrics, outputs = qa.score_qa(self.reader(data, model).answer, task.examples["test"])
        qa.log_qa_outputs("test", task.examples["test"], metrics, outputs, int(tracking.attention_plots),
                          int(tracking.predictions), workdir, model.has_word_attention)
        return {f"test_{k}": v for k, v in metrics.items()}

    def export(self, data, model, config_yaml: str, workdir: str) -> Dict[str, str]:
        return export_reader(self.reader(data, model), model, data.task, config_yaml, workdir)

    def log_served_model(self, saved_model: str) -> None:
        from zoo.export.pyfunc import log_reader_pyfunc

        log_reader_pyfunc(saved_model)

    def summary(self, data, metrics: Dict[str, float], epochs: int, train_seconds: float) -> str:
        return (f"test_accuracy = {metrics['test_accuracy']:.4f}   test_evidence = {metrics['test_evidence']:.4f}   "
                f"({epochs} epochs, {train_seconds:.0f} s training)")

    def report(self, data, result, summary: str):
        """Accuracy and evidence per kind of question, then epochs and training time."""
        import zoo.evaluation.qa as qa

        return ["", qa.format_table(result, data.task.kinds), summary[summary.rindex("("):]]


def export_reader(reader, model, task, config_yaml: str, workdir: str) -> Dict[str, str]:
    """``saved_model/`` (with ``assets.extra/model.keras`` and ``config.yaml``) and ``vocab/words``."""
    import numpy as np

    if not all(np.all(np.isfinite(w)) for w in model.get_weights()):
        raise ValueError("The model's weights hold NaN or infinite values; it is not exported.")
    saved_dir = os.path.join(workdir, "saved_model")
    reader.save(saved_dir, config_yaml=config_yaml)
    model.save(os.path.join(saved_dir, "assets.extra", "model.keras"))
    vocab_dir = os.path.join(workdir, "vocab")
    task.tokenizer.save_artifacts(os.path.join(vocab_dir, "words"))
    return {"saved_model": saved_dir, "vocab": vocab_dir}
