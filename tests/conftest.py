"""Shared fixtures: Hydra composition, a temporary MLflow store, quiet TensorFlow."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The package is installed (``pip install -e .``, a line of requirements.txt); ROOT is where the
# entry points and conf/ are.
ROOT = Path(__file__).resolve().parent.parent


def compose(overrides=(), config_name="train"):
    """The config ``python train.py <overrides>`` would run with (Hydra's Compose API)."""
    from zoo.config import compose_train

    return compose_train(overrides, config_name)


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch):
    """A fresh SQLite tracking store; returns its URI. The working directory is ``tmp_path``."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    return uri


def run_python(args, cwd=None, env_extra=None, timeout=600):
    """Runs ``python <args>`` in a subprocess with this interpreter; returns CompletedProcess."""
    import subprocess

    env = dict(os.environ)
    # MLflow's fluent API sets MLFLOW_EXPERIMENT_ID in this process (set_experiment); a child must not
    # inherit it (``mlflow run`` refuses it beside --experiment-name), nor a run id.
    for leaked in ("MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID"):
        env.pop(leaked, None)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *args], cwd=cwd or ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def mismatch():
    """A throwaway by-length metric registered for one test: the percentage of wrong hypotheses."""
    import zoo.metrics

    @zoo.metrics.register("mismatch", scale=100, higher_is_better=False, label="mismatch %", by_length=True)
    def score(hypotheses, references, **inputs):
        return 100.0 * sum(h != r for h, r in zip(hypotheses, references)) / max(1, len(references))

    yield zoo.metrics.get("mismatch")
    zoo.metrics.unregister("mismatch")
    assert "mismatch" not in zoo.metrics.names()


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per CPU core, plus one. The end-to-end tests spend part of their time
    waiting (for a server to start, a subprocess to reach a checkpoint, workers to meet), and the
    extra worker runs other tests meanwhile."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(config, items):
    """Files that hold ``slow`` tests run first, those with the most first; each file's tests in
    their written order.

    With ``-n auto --dist loadfile`` (pyproject.toml) every worker takes whole files in this
    order, so the minute-long end-to-end files start early and the short files fill the end,
    instead of one long file starting last while the other workers wait."""
    slow = {}
    for item in items:
        if item.get_closest_marker("slow"):
            slow[item.path] = slow.get(item.path, 0) + 1
    items.sort(key=lambda item: -slow.get(item.path, 0))  # stable: the written order within a file
