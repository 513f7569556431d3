"""``train(cfg) -> metrics``: data -> model -> fit -> score -> export, inside an MLflow run (log).

One run lifecycle (``zoo.training.lifecycle.run``) serves every kind of task; a kind hands it a
``TaskKind`` (``job.TranslationKind``, ``qa.QAKind``, ``regression.RegressionKind``)."""

from zoo.training.fit import NonFiniteLoss
from zoo.training.job import train
from zoo.training.signals import Interrupted, StopTraining

__all__ = ["Interrupted", "NonFiniteLoss", "StopTraining", "train"]
