"""``train(cfg) -> metrics``: data -> model -> fit -> score -> export, inside an MLflow run (log)."""

from zoo.training.fit import NonFiniteLoss
from zoo.training.job import train
from zoo.training.signals import Interrupted, StopTraining

__all__ = ["Interrupted", "NonFiniteLoss", "StopTraining", "train"]
