"""Train a model: ``python train.py model=bahdanau [data=dates] [key=value ...]``.

Thin Hydra entry point; the work is ``zoo.training.train(cfg)``.
"""

import sys

import hydra
from omegaconf import DictConfig

from zoo.config import ConfigError, exit_on_bad_command_line


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float:
    from zoo.training import train

    try:
        metrics = train(cfg)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    return metrics.get("test_exact_match", 0.0)


if __name__ == "__main__":
    exit_on_bad_command_line("train")
    main()
