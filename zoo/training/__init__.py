"""``train(cfg) -> metrics``: data -> model -> fit -> test -> export -> MLflow."""

from zoo.training.train import train

__all__ = ["train"]
