"""``train(cfg) -> metrics``: data -> model -> fit -> test -> export -> MLflow."""

from zoo.training.job import train

__all__ = ["train"]
