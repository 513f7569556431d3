"""Evaluate a trained model: ``python evaluate.py run_id=<id>`` or ``saved_model=<dir>``.

Thin Hydra entry point; the work is ``zoo.evaluation.evaluate.evaluate(cfg)``.
"""

import sys

import hydra
from omegaconf import DictConfig

from zoo.config import ConfigError, exit_on_bad_command_line, print_errors


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    from zoo.evaluation.evaluate import evaluate

    try:
        evaluate(cfg)
    except ConfigError as error:
        print_errors(error)
        sys.exit(2)


if __name__ == "__main__":
    exit_on_bad_command_line("evaluate")
    main()
