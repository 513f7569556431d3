"""Hyperparameter search: ``python -m zoo.search [overrides] <key>=<range> ... [search.trials=20]``.

Optuna (TPE sampler by default) over ``train.py``'s own configs, composed with Hydra's compose API:
each override given a range in Hydra's sweep syntax (``interval``, ``range``, ``choice``, ``a,b,c``,
``tag(log, ...)``) is a dimension of the search, every other override is fixed. Each trial is
``zoo.training.train`` on the sampled config and a child run of one parent run (tag ``zoo.kind=search``),
named by what it sampled. With ``search.pruning`` a trial whose validation metric after an epoch is
below the median of the earlier trials at that epoch stops there (Optuna's median pruner) and ends
KILLED. The parent gets the best trial (params ``best.*``, metric ``best_<metric>``), a table of
trials (``search/trials.csv|md``) and Optuna's plots (optimization history, intermediate values,
parameter importances). Options and their defaults: ``conf/search.yaml``.

    python -m zoo.search model=luong trainer.epochs=4 'optimizer.learning_rate=tag(log,interval(1e-4,1e-2))' \\
        'model.attention=choice(dot,general,concat)' search.trials=12

hydra-optuna-sweeper 1.3 pins optuna<3, so this drives a current Optuna directly.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

from omegaconf import OmegaConf

from zoo.catalog import CONF_DIR
from zoo.config import compose_train, hydra_overrides, precheck
from zoo.errors import ConfigError
from zoo.evaluation.sweep import csv_text, markdown

SEARCH_KIND = "search"


def options(argv: Sequence[str]):
    """``(search options, the rest of argv)``: ``search.<key>=<value>`` over ``conf/search.yaml``."""
    defaults = OmegaConf.load(os.path.join(CONF_DIR, "search.yaml"))
    given = [a for a in argv if a.startswith("search.")]
    for arg in given:
        key = arg.split("=", 1)[0][len("search."):]
        if key not in defaults:
            raise ConfigError(f"Unknown option '{arg.split('=', 1)[0]}'. Available: "
                              f"{', '.join('search.' + k for k in defaults)}")
    cfg = OmegaConf.merge(defaults, OmegaConf.from_dotlist([a[len("search."):] for a in given]))
    if cfg.direction not in ("maximize", "minimize"):
        raise ConfigError(f"search.direction={cfg.direction} is not valid. Available: maximize, minimize "
                          f"(default: {defaults.direction})")
    if cfg.sampler not in ("tpe", "random"):
        raise ConfigError(f"search.sampler={cfg.sampler} is not valid. Available: tpe, random (default: {defaults.sampler})")
    if not isinstance(cfg.trials, int) or cfg.trials < 1:
        raise ConfigError(f"search.trials={cfg.trials} is not valid: expected a positive integer "
                          f"(default: {defaults.trials})")
    return cfg, [a for a in argv if not a.startswith("search.")]


def space(argv: Sequence[str]) -> Tuple[List[str], Dict[str, object]]:
    """``(fixed overrides, {key: Hydra sweep})``: the overrides that give a range are the search space."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    fixed, dims = [], {}
    parser = OverridesParser.create()
    for arg in argv:
        try:
            override = parser.parse_override(arg)
        except Exception as error:  # noqa: BLE001 - Hydra's grammar errors
            raise ConfigError(f"'{arg}' is not a valid override: {str(error).splitlines()[0]}") from None
        if override.is_sweep_override():
            dims[override.key_or_group] = override.value()
        else:
            fixed.append(arg)
    if not dims:
        raise ConfigError("Nothing to search: give at least one key a range, e.g. "
                          "'optimizer.learning_rate=tag(log,interval(1e-4,1e-2))' or 'model.attention=dot,general'")
    return fixed, dims


def suggest(trial, key: str, sweep) -> object:
    """A value for ``key`` from ``trial``, by the kind of Hydra sweep."""
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    if isinstance(sweep, ChoiceSweep):
        values = list(sweep.list)
        return values[trial.suggest_categorical(key, list(range(len(values))))] if any(
            not isinstance(v, (str, int, float, bool)) for v in values) else trial.suggest_categorical(key, values)
    log = "log" in sweep.tags
    if isinstance(sweep, RangeSweep):
        start, stop, step = sweep.start, sweep.stop, sweep.step or 1
        last = start + (math.ceil((stop - start) / step) - 1) * step  # the last value of range(start, stop, step)
        if all(float(v).is_integer() for v in (start, stop, step)):
            return trial.suggest_int(key, int(start), int(last), step=int(step), log=log and step == 1)
        return trial.suggest_float(key, float(start), float(last), step=float(step))
    if isinstance(sweep, IntervalSweep):
        if isinstance(sweep.start, int) and isinstance(sweep.end, int) and not log:
            return trial.suggest_int(key, sweep.start, sweep.end)
        return trial.suggest_float(key, float(sweep.start), float(sweep.end), log=log)
    raise ConfigError(f"{key}: unsupported range {sweep}; use interval(), range() or choice()")


def _validation_key(record: Dict[str, float]) -> Optional[str]:
    for key in ("val_bleu", "val_exact_match"):
        if key in record:
            return key
    return next((k for k in record if k.startswith("val_") and k != "val_loss"), None)


def run(argv: Sequence[str]) -> Dict[str, object]:
    """The search (see the module docstring). Returns the best trial's value, params and run id,
    and the parent run's id."""
    import optuna

    from zoo.plots.search import search_plots
    from zoo.tracking import SWEEP_PARENT_VARIABLE, end_detached_run, resolve_tracking_uri, start_detached_run
    from zoo.training import StopTraining, train

    opts, rest = options(argv)
    fixed, dims = space(rest)
    problem = precheck(fixed)
    if problem:
        raise ConfigError(problem.removeprefix("error: "))
    base = compose_train(hydra_overrides(fixed))
    uri = resolve_tracking_uri(base.tracking.uri)
    experiment = opts.experiment or str(base.tracking.experiment)
    command = "python -m zoo.search " + " ".join(shlex.quote(a) for a in argv)
    parent = start_detached_run(uri, experiment, "search " + " ".join(argv)[:230],
                                {"zoo.kind": SEARCH_KIND, "zoo.command": command,
                                 "mlflow.note.content": f"Search started: `{command}`"})
    print(f"Search: MLflow parent run {parent} in {uri}; {opts.trials} trials over {', '.join(dims)}", flush=True)
    os.environ[SWEEP_PARENT_VARIABLE] = parent
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = (optuna.samplers.TPESampler(seed=int(opts.seed)) if opts.sampler == "tpe"
               else optuna.samplers.RandomSampler(seed=int(opts.seed)))
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=int(opts.warmup_epochs))
              if opts.pruning else optuna.pruners.NopPruner())
    study = optuna.create_study(direction=str(opts.direction), sampler=sampler, pruner=pruner,
                                storage=opts.storage, study_name=opts.study_name or f"zoo-search-{parent}",
                                load_if_exists=True)
    objective_name = {}

    def objective(trial):
        sampled = {key: suggest(trial, key, sweep) for key, sweep in dims.items()}
        label = ", ".join(f"{k.split('.')[-1]}={v:.3g}" if isinstance(v, float) else f"{k.split('.')[-1]}={v}"
                          for k, v in sampled.items())
        overrides = [*fixed, *(f"{k}={v}" for k, v in sampled.items()),
                     f"tracking.run_name='trial {trial.number}: {label}'", f"tracking.experiment={experiment}"]
        cfg = compose_train(hydra_overrides(overrides))
        print(f"\nTrial {trial.number}: {label}", flush=True)

        def report(record, epoch):
            key = _validation_key(record)
            if key is None:
                return
            trial.report(float(record[key]), epoch)
            if trial.should_prune():
                raise StopTraining(f"pruned by zoo.search after epoch {epoch}: {key}={record[key]:.4f} "
                                   f"below the median of earlier trials")

        try:
            result = train(cfg, on_epoch=report)
        except StopTraining as stop:
            print(f"Trial {trial.number}: {stop}", flush=True)
            raise optuna.TrialPruned(str(stop)) from None
        objective_name["name"] = result["objective"]
        trial.set_user_attr("run_id", result["run_id"])
        return float(result[result["objective"]])

    status = "FAILED"
    try:
        study.optimize(objective, n_trials=int(opts.trials), catch=(ConfigError,))
        status = "FINISHED"
    finally:
        os.environ.pop(SWEEP_PARENT_VARIABLE, None)
        metric = objective_name.get("name", "objective")
        best = _log_study(study, parent, uri, metric, dims, search_plots)
        end_detached_run(uri, parent, status)
    if best is None:
        raise RuntimeError("No trial finished: see the trials' runs for why.")
    print(f"\nBest trial {best['number']}: {metric} = {best['value']:.4f} with "
          f"{', '.join(f'{k}={v}' for k, v in best['params'].items())} (run {best['run_id']})")
    print(f"Search parent run: {parent}")
    return {**best, "parent_run_id": parent, "metric": metric}


def _log_study(study, parent: str, uri: str, metric: str, dims, search_plots) -> Optional[Dict[str, object]]:
    """Trials table, best trial and plots on the parent run; the best trial (or None)."""
    import mlflow
    import optuna

    client = mlflow.MlflowClient(uri)
    header = ["trial", "state", metric, *dims, "epochs", "run id"]
    rows = []
    for t in study.trials:
        rows.append([t.number, t.state.name, "" if t.value is None else f"{t.value:.4f}",
                     *[t.params.get(k, "") for k in dims], len(t.intermediate_values), t.user_attrs.get("run_id", "")])
    completed = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    best = None
    with tempfile.TemporaryDirectory() as workdir:
        for name, text in (("trials.csv", csv_text(header, rows)), ("trials.md", markdown(header, rows) + "\n")):
            with open(os.path.join(workdir, name), "w", encoding="utf-8") as f:
                f.write(text)
        if completed:
            search_plots(study, workdir)
        for name in sorted(os.listdir(workdir)):
            client.log_artifact(parent, os.path.join(workdir, name), "search")
    if completed:
        trial = study.best_trial
        best = {"number": trial.number, "value": trial.value, "params": dict(trial.params),
                "run_id": trial.user_attrs.get("run_id")}
        client.log_metric(parent, f"best_{metric}", float(trial.value))
        for key, value in trial.params.items():
            client.log_param(parent, f"best.{key}", value)
        client.set_tag(parent, "zoo.best_run", str(best["run_id"]))
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)
    client.set_tag(parent, "mlflow.note.content",
                   (f"Best: trial {best['number']}, {metric} = {best['value']:.4f}, run {best['run_id']}. "
                    if best else "No trial finished. ") + f"{len(completed)} finished, {pruned} pruned.\n\n"
                   + markdown(header, rows))
    return best


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        run(argv)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
