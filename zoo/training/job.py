"""The training job behind ``python train.py``: ``train(cfg) -> metrics``, and the translation task kind.

``train`` checks the config once (unless the entry point has), resolves it, picks the task kind the
model and data name (``seq2seq``: ``TranslationKind`` below; ``qa``: ``zoo.training.qa.QAKind``;
``regression``: ``zoo.training.regression.RegressionKind``; ``classify``:
``zoo.training.classify.ClassifyKind``; ``image``: ``zoo.training.image.ImageKind``; ``speech``:
``zoo.training.speech.SpeechKind``) and hands both to the one run lifecycle,
``zoo.training.lifecycle.run``.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

from omegaconf import DictConfig, OmegaConf

from zoo import kernels
from zoo.config import quiet_tensorflow, validate_train
from zoo.environ import set_onednn
from zoo.errors import ConfigError
from zoo.evaluation.examples import parse_examples
from zoo.training import lifecycle, log, score
from zoo.training.data import load_data
from zoo.training.export import export, make_translator
from zoo.training.lifecycle import TaskKind
from zoo.training.model import build, float32_copy


def _resolve(cfg: DictConfig) -> DictConfig:
    """A resolved copy in struct mode (Hydra composed the attention's hyperparameters into it)."""
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    OmegaConf.set_struct(cfg, True)
    return cfg


def train(cfg: DictConfig, on_epoch: Optional[Callable[[Dict[str, float], int], None]] = None,
          validated: bool = False, on_model: Optional[lifecycle.ModelHook] = None) -> Dict[str, object]:
    """Trains ``cfg.model`` on ``cfg.data``, tracks everything in MLflow, exports the model.

    The stages (data -> model -> fit -> score -> export, inside the MLflow run) are the lifecycle's
    (``zoo.training.lifecycle.run``); returns the final metrics (``test_exact_match``, ``test_bleu``,
    ...), ``run_id``, and ``objective``: the name of the task's own metric (``test_<Task.metric>``),
    the value ``train.py`` returns. ``on_epoch(record, epoch)`` sees each epoch's record after it is
    logged; raising ``StopTraining`` there ends the run early, KILLED (``zoo.search`` prunes trials
    this way). ``on_model(kind, data, model)`` sees the final model before it is scored (the lifecycle's
    hook). ``validated=True``: the caller has checked this very config (``train.py`` checks its
    command line before TensorFlow starts), so it is not checked twice.
    """
    if not validated:
        validate_train(cfg)
    cfg = _resolve(cfg)
    kernels.use(cfg.get("kernels", kernels.FAST))  # zoo/fast's speed-ups or the plain reference path
    example_pairs = parse_examples(cfg.get("examples"), cfg.get("examples_bleu_k", 2))
    task = cfg.model.get("task", "seq2seq")
    if example_pairs and task in ("regression", "qa", "classify", "image", "speech"):
        raise ConfigError(f"examples need a translation model; model={cfg.model.name} is a "
                          f"{cfg.model.task} model.")
    quiet_tensorflow()
    set_onednn(cfg.trainer.get("onednn"))  # read once, when TensorFlow is imported: before that
    if task == "regression":
        from zoo.training.regression import RegressionKind

        kind = RegressionKind(cfg)
    elif task == "qa":
        from zoo.training.qa import QAKind

        kind = QAKind(cfg)
    elif task == "classify":
        from zoo.training.classify import ClassifyKind

        kind = ClassifyKind(cfg)
    elif task == "image":
        from zoo.training.image import ImageKind

        kind = ImageKind(cfg)
    elif task == "speech":
        from zoo.training.speech import SpeechKind

        kind = SpeechKind(cfg)
    else:
        kind = TranslationKind(cfg, example_pairs)
    return lifecycle.run(cfg, kind, on_epoch, on_model)


class TranslationKind(TaskKind):
    """Sequence-to-sequence tasks (translation, dates, reversal): token batches from ``zoo.training.data``,
    a registered ``Seq2SeqModel``, decoding scored with every registered metric, a SavedModel translator."""

    def __init__(self, cfg: DictConfig, example_pairs=()):
        super().__init__(cfg)
        self.example_pairs = example_pairs
        self._translator = (None, None)  # (model, its translator): traced once, used for scoring and export

    def translator(self, data, model):
        if self._translator[0] is not model:
            self._translator = (model, make_translator(model, data.task, self.cfg))
        return self._translator[1]

    def build_data(self, runtime):
        return load_data(self.cfg, runtime.replicas)

    def build_model(self, data, runtime):
        return build(self.cfg, data.task, runtime)

    def metric(self, data) -> str:
        return data.task.metric

    def validation(self, data, model, runtime):
        task = data.task
        val_metric = score.validation_metric(self.translator(data, model).translate, task)
        if runtime.precision == "float32":
            return val_metric
        # decoded in float32, the dtypes the decoder and export use
        decoder = float32_copy(self.cfg, task, model)
        in_float32 = score.validation_metric(make_translator(decoder, task, self.cfg).translate, task)

        def val_metric():
            decoder.set_weights(model.get_weights())
            return in_float32()

        return val_metric

    def final_model(self, data, model, runtime):
        if runtime.precision != "float32":  # scored and exported as always: float32 in and out
            return float32_copy(self.cfg, data.task, model)
        return model

    def score(self, data, model, workdir: str) -> Dict[str, float]:
        task, translate = data.task, self.translator(data, model).translate
        metrics, signatures, outputs = score.score_test(translate, task)
        score.log_test_report(task, metrics, signatures, outputs, self.cfg.tracking, workdir, model=model)
        examples_csv, example_metrics = score.examples(translate, self.example_pairs,
                                                       int(self.cfg.examples_bleu_k), workdir)
        if examples_csv:  # cfg.examples: d2l-style printout, examples.csv, example_bleu_<i>
            log.log_files([examples_csv])
            log.log_metrics(example_metrics)
        return {**{f"test_{k}": v for k, v in metrics.items()}, **example_metrics}

    def export(self, data, model, config_yaml: str, workdir: str) -> Dict[str, str]:
        return export(self.translator(data, model), model, data.task, config_yaml, workdir)

    def log_served_model(self, saved_model: str) -> None:
        log.log_pyfunc(saved_model)

    def summary(self, data, metrics: Dict[str, float], epochs: int, train_seconds: float) -> str:
        """The task's metric first, then BLEU and chrF, epochs and training time."""
        metric = data.task.metric
        summary = f"test_{metric} = {metrics[f'test_{metric}']:.4f}"
        if metric != "bleu":
            summary += f"   test_bleu = {metrics['test_bleu']:.2f}"
        if "test_bleu_multiref" in metrics:
            summary += f"   test_bleu_multiref = {metrics['test_bleu_multiref']:.2f}"
        return f"{summary}   test_chrf = {metrics['test_chrf']:.2f}   ({epochs} epochs, {train_seconds:.0f} s training)"
