"""``train.py``'s own flags (``--overrides``, ``--from-run``), rewritten into Hydra overrides before
Hydra sees the command line; ``--from-run`` reads a run's recorded overrides from the store."""

from typing import List, Sequence

from zoo.tracking.runs import _exit, recorded_overrides


def expand_command_line(argv: Sequence[str]) -> List[str]:
    """``train.py``'s own flags, rewritten into plain overrides before Hydra sees the command line.

    - ``--overrides "<a=1 b=2>"``: one string of overrides, split as a shell would (MLproject's
      ``main`` entry point passes its ``overrides`` parameter this way);
    - ``--from-run <run id>``: the overrides recorded on that run (tag ``zoo.overrides``), followed by
      any given after it, so ``python train.py --from-run <id>`` re-runs it and
      ``python train.py --from-run <id> seed=2`` re-runs it with one change. The store is
      ``MLFLOW_TRACKING_URI`` or ``tracking.uri=`` on the same command line (default ``sqlite:///mlflow.db``).
    """
    import shlex

    argv = list(argv)
    out = argv[:1]
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("--overrides", "--from-run") and i + 1 >= len(argv):
            example = '"model=luong trainer.epochs=2"' if arg == "--overrides" else "<run id>"
            _exit(f"{arg} needs a value, e.g. {arg} {example}")
        if arg == "--overrides" or arg.startswith("--overrides="):
            value = arg.split("=", 1)[1] if "=" in arg else argv[i + 1]
            out += shlex.split(value)
            i += 1 if "=" in arg else 2
        elif arg == "--from-run" or arg.startswith("--from-run="):
            run_id = arg.split("=", 1)[1] if "=" in arg else argv[i + 1]
            given = [a for a in argv if a.startswith("tracking.uri=")]
            out += recorded_overrides(run_id, given[-1].split("=", 1)[1] if given else None)
            i += 1 if "=" in arg else 2
        else:
            out.append(arg)
            i += 1
    return out
