"""``python -m zoo.search``: Optuna over train.py's configs, trials as child runs of one parent, pruning."""

import re
import sys

import mlflow
import optuna
import pytest

from zoo.errors import ConfigError
from zoo.search import options, space, suggest

from conftest import empty_store


def test_ranges_in_hydras_sweep_syntax_become_optuna_distributions():
    fixed, dims = space(["model=luong", "optimizer.learning_rate=tag(log,interval(1e-4,1e-2))",
                         "model.hidden_size=range(32,257,32)", "model.attention=dot,general,concat",
                         "trainer.epochs=3"])
    assert fixed == ["model=luong", "trainer.epochs=3"]
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
    values = {key: suggest(trial, key, sweep) for key, sweep in dims.items()}
    d = trial.distributions
    assert isinstance(d["optimizer.learning_rate"], optuna.distributions.FloatDistribution)
    assert d["optimizer.learning_rate"].log and d["optimizer.learning_rate"].low == 1e-4
    assert isinstance(d["model.hidden_size"], optuna.distributions.IntDistribution)
    assert (d["model.hidden_size"].low, d["model.hidden_size"].high, d["model.hidden_size"].step) == (32, 256, 32)
    assert d["model.attention"].choices == ("dot", "general", "concat")
    assert 1e-4 <= values["optimizer.learning_rate"] <= 1e-2 and values["model.hidden_size"] % 32 == 0


@pytest.mark.parametrize("argv, message", [
    (["model=luong"], "Nothing to search"),
    (["x=dot,general", "search.trails=3"], "Unknown option 'search.trails'. Available: search.trials"),
    (["x=dot,general", "search.direction=up"], "search.direction=up is not valid. Available: maximize, minimize"),
    (["x=dot,general", "search.trials=0"], "search.trials=0 is not valid: expected a positive integer"),
])
def test_a_bad_search_command_line_is_one_clear_error(argv, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        space(options(argv)[1])


def _search(tmp_path, monkeypatch, *args):
    """``zoo.search.main`` over a tiny seq2seq, in this process (TensorFlow is loaded already; trials draw no
    attention maps and write no predictions: nothing here reads them; one step an epoch, 4 validation
    and test examples: a trial's cost is its traces, its numbers are not what is checked). The search
    is the same for any model and key: seq2seq is the quickest to trace, its ``model.hidden_size`` the key."""
    from zoo.search import main

    uri = empty_store(tmp_path)
    argv = ["model=seq2seq", "debug=smoke", f"trainer.checkpoint_dir={tmp_path / 'ckpt'}", "tracking.export=false",
            "tracking.attention_plots=0", "tracking.predictions=0", "trainer.steps_per_epoch=1", "data.val_size=4",
            "data.test_size=4", *args]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("attention-zoo").experiment_id
    parent = client.search_runs([experiment], "tags.zoo.kind = 'search'")
    assert len(parent) == 1
    children = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent[0].info.run_id}'")
    return client, parent[0], children


@pytest.mark.slow
def test_every_trial_is_a_child_run_and_the_parent_logs_the_best_trial_and_optunas_plots(tmp_path, monkeypatch,
                                                                                         capsys):
    client, parent, children = _search(tmp_path, monkeypatch, "model.hidden_size=8,16", "search.trials=2",
                                       "search.pruning=false", "search.sampler=random", "trainer.epochs=1")
    stdout = capsys.readouterr().out
    assert parent.info.status == "FINISHED"
    assert len(children) == 2 and all(c.info.status == "FINISHED" for c in children)
    assert all(c.info.run_name.startswith("trial ") for c in children)
    best = client.get_run(parent.data.tags["zoo.best_run"])
    assert parent.data.params["best.model.hidden_size"] == best.data.params["model.hidden_size"]
    assert parent.data.metrics["best_test_exact_match"] == max(c.data.metrics["test_exact_match"] for c in children)
    logged = {a.path for a in client.list_artifacts(parent.info.run_id, "search")}
    assert {"search/trials.csv", "search/trials.md", "search/optimization_history.png",
            "search/intermediate_values.png"} <= logged
    assert "Best trial" in stdout


def test_python_m_zoo_search_is_the_entry_point(monkeypatch, capsys):
    """The module runs as ``python -m zoo.search`` (the searches above call its ``main``): its ``__main__``,
    run here (runpy), exits 0 after its help; a new interpreter would add only its start."""
    import runpy

    monkeypatch.setattr(sys, "argv", ["python -m zoo.search", "--help"])
    monkeypatch.delitem(sys.modules, "zoo.search", raising=False)  # runpy runs it afresh, as python -m does
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("zoo.search", run_name="__main__", alter_sys=True)
    assert exited.value.code == 0
    assert "python -m zoo.search" in capsys.readouterr().out


@pytest.mark.slow
def test_a_trial_below_the_median_of_earlier_trials_is_pruned_and_its_run_ends_killed(tmp_path, monkeypatch):
    # Earlier trials of the same study (kept in an Optuna storage) reached 1.0 after epoch 1; a smoke
    # run's validation exact match after epoch 1 is 0, below their median: the pruner stops it there.
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = optuna.create_study(storage=storage, study_name="dates", direction="maximize")
    for value in (0.9, 1.0):
        study.add_trial(optuna.trial.create_trial(
            params={"model.hidden_size": 8}, value=value, intermediate_values={1: 1.0, 2: value},
            distributions={"model.hidden_size": optuna.distributions.CategoricalDistribution([8, 16])}))
    client, parent, children = _search(tmp_path, monkeypatch, "model.hidden_size=8,16", "search.trials=1",
                                       f"search.storage={storage}", "search.study_name=dates",
                                       "search.warmup_epochs=0")
    assert len(children) == 1
    child = children[0]
    assert child.info.status == "KILLED"
    assert "pruned by zoo.search after epoch 1" in child.data.tags["zoo.stopped"]
    assert [m.step for m in client.get_metric_history(child.info.run_id, "val_exact_match")] == [1]
    assert "test_exact_match" not in child.data.metrics  # stopped before scoring and export
    assert optuna.load_study(study_name="dates", storage=storage).trials[-1].state == optuna.trial.TrialState.PRUNED
    trials = client.download_artifacts(parent.info.run_id, "search/trials.md", str(tmp_path))
    assert "PRUNED" in open(trials, encoding="utf-8").read()
