"""A real tracking server: ``mlflow server`` on 127.0.0.1 (SQLite backend, local artifacts), and the
three ways a team uses it, over HTTP: ``mlflow run .`` (the MLproject), the model registry with an
alias, and ``python train.py --from-run <id>`` (re-running a run from its record).
"""

import os
import sys

import pytest

from conftest import ROOT, evaluate_here, run_python, train_py_here
from conftest import mlflow_server as start_mlflow_server


@pytest.fixture
def mlflow_server(tmp_path):
    """``mlflow server`` on a free port of 127.0.0.1; yields its URI; stopped afterwards."""
    with start_mlflow_server(tmp_path) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.slow
def test_mlflow_run_registry_alias_and_rerun_from_the_record_against_a_real_server(mlflow_server, tmp_path, monkeypatch,
                                                                                   capsys):
    import mlflow

    # `mlflow run` starts `python train.py`: the python of this interpreter's environment.
    env = {"MLFLOW_TRACKING_URI": mlflow_server,
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    # The server, the registry and the rerun are the same for every model: seq2seq, the quickest to trace,
    # for one epoch, with dropout (the rerun's equal numbers need the seed to give the same masks too); no
    # attention maps, no predictions.csv: nothing here reads them (the rerun repeats these overrides).
    overrides = (f"model=seq2seq debug=smoke model.dropout=0.2 trainer.epochs=1 tracking.register_as=zoo-seq2seq "
                 f"tracking.attention_plots=0 tracking.predictions=0 "
                 f"trainer.checkpoint_dir={tmp_path / 'ckpt'} hydra.run.dir={tmp_path / 'outputs'}")
    launched = run_python(["-m", "mlflow", "run", str(ROOT), "-P", f"overrides={overrides}", "--env-manager", "local",
                           "--experiment-name", "attention-zoo"], cwd=tmp_path, env_extra=env)
    assert launched.returncode == 0, launched.stderr[-3000:]

    client = mlflow.MlflowClient(mlflow_server)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments)
    assert len(runs) == 1, [(r.info.run_name, r.info.status) for r in runs]  # mlflow run's run is the training run
    run = runs[0]
    assert run.info.status == "FINISHED" and run.info.run_name == "seq2seq-dates"
    assert run.data.params["model.name"] == "seq2seq" and run.data.params["trainer.epochs"] == "1"
    assert "test_exact_match" in run.data.metrics and "train_loss" in run.data.metrics
    assert run.data.tags["mlflow.project.entryPoint"] == "main"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"saved_model", "config.yaml", "environment.json"} <= artifacts
    local = client.download_artifacts(run.info.run_id, "config.yaml", str(tmp_path))
    assert "name: seq2seq" in open(local, encoding="utf-8").read()

    version = client.get_model_version_by_alias("zoo-seq2seq", "current")
    assert version.run_id == run.info.run_id and version.version == "1"
    # The alias resolves through the server (evaluate in this process; tests/test_end_to_end.py runs evaluate.py).
    evaluate_here(monkeypatch, mlflow_server, tmp_path,
                  ["model_uri=models:/zoo-seq2seq@current", "log=false", "perplexity=false"])
    assert "test_exact_match" in capsys.readouterr().out

    # `--from-run` in this process (train_py_here: `mlflow run` above is the subprocess this test needs)
    code, printed = train_py_here(["--from-run", run.info.run_id], tmp_path, env)
    assert code == 0, printed[-3000:]
    assert f"Re-running {run.info.run_id}: python train.py model=seq2seq debug=smoke" in printed
    # Logging the pyfunc model prints none of MLflow's chatter: its hint about type hints, the progress
    # bar of the SavedModel's copy into the model's folder.
    assert "type hints" not in printed and "Downloading artifacts" not in printed, printed[-3000:]
    again = [r for r in client.search_runs(experiments) if r.info.run_id != run.info.run_id]
    assert len(again) == 1 and again[0].info.status == "FINISHED"
    for key in ("test_exact_match", "test_chrf", "num_params"):
        assert again[0].data.metrics[key] == pytest.approx(run.data.metrics[key], abs=1e-6), key
    assert client.get_model_version_by_alias("zoo-seq2seq", "current").version == "2"
