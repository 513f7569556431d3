"""Train a model: ``python train.py model=bahdanau [data=dates] [key=value ...]``.

Thin Hydra entry point; the work is ``zoo.training.train(cfg)``. Returns the task's own test
metric (``test_exact_match`` on dates, ``test_bleu`` on translation) for sweepers.
``python train.py --from-run <run id> [key=value ...]`` re-runs a run from its recorded overrides;
``--overrides "<a=1 b=2>"`` takes the overrides as one string (MLproject's ``main`` entry point).
"""

import sys

import hydra
from omegaconf import DictConfig

from zoo.config import ConfigError, exit_on_bad_command_line, print_errors
from zoo.tracking.command_line import expand_command_line


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float:
    from zoo.training import Interrupted, NonFiniteLoss, train

    try:
        metrics = train(cfg, validated=True)  # exit_on_bad_command_line checked it before Hydra ran
    except ConfigError as error:
        print_errors(error)
        sys.exit(2)
    except NonFiniteLoss as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except Interrupted as stopped:
        print(f"\n{stopped}", file=sys.stderr, flush=True)
        sys.exit(stopped.exit_code)
    objective = metrics.get("objective")
    return float(metrics[objective]) if objective else 0.0


if __name__ == "__main__":
    sys.argv = expand_command_line(sys.argv)
    exit_on_bad_command_line("train")
    main()
