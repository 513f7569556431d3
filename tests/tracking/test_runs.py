"""Runs in a real SQLite store: parallel jobs (a Hydra sweep with a parallel launcher, or two
terminals) may open the same new store at the same moment."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

# One interpreter imports MLflow and zoo.tracking once, then forks a process per job: four processes, each
# with its own SQLite connections, open the same new store at the same moment, as four jobs of a parallel
# launcher would, without four interpreters importing MLflow (nothing is opened before the fork).
START_RUNS = r"""
import os, sys, time
import mlflow
import mlflow.store.tracking.sqlalchemy_store, mlflow.tracking.fluent, alembic.command, git  # noqa: E401, F401
from zoo.tracking.runs import mlflow_run  # all imported once, before the fork; no store is opened before it
uri, jobs = sys.argv[1], int(sys.argv[2])
start = time.time() + 1.0  # the forks take milliseconds
children = []
for job in range(jobs):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a job: wait for the start, open the store, log, report its run id
        os.close(read)
        try:
            time.sleep(max(0.0, start - time.time()))  # every job opens the store at the same moment
            with mlflow_run(uri, "parallel") as run:
                mlflow.log_metric("x", 1.0)
            os.write(write, run.info.run_id.encode())
            code = 0
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(write)
    children.append((pid, read))
failed = 0
for pid, read in children:
    run_id = b""
    while chunk := os.read(read, 64):
        run_id += chunk
    _, status = os.waitpid(pid, 0)
    failed += status != 0
    print(run_id.decode())
sys.exit(1 if failed else 0)
"""


@pytest.mark.slow
def test_parallel_jobs_can_create_the_same_new_sqlite_store(tmp_path):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    script = tmp_path / "start.py"
    script.write_text(START_RUNS, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([sys.executable, str(script), uri, "4"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_ids = set(proc.stdout.split())
    assert len(run_ids) == 4
    client = mlflow.MlflowClient(uri)
    for run_id in run_ids:
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED" and run.data.metrics["x"] == 1.0


def test_tracking_logs_the_scores_and_files_it_is_handed(mlflow_store, tmp_path):
    import mlflow

    from zoo.tracking import active_run_tags, log_files, log_scores, mlflow_run

    (tmp_path / "predictions.csv").write_text("source,reference\n", encoding="utf-8")
    (tmp_path / "by_length").mkdir()
    (tmp_path / "by_length" / "test.csv").write_text("bin\n", encoding="utf-8")
    with mlflow_run(mlflow_store, "attention-zoo", tags={"zoo.model": "luong"}) as run:
        log_scores("test", {"bleu": 12.5, "exact_match": 0.25}, {"bleu_signature": "nrefs:1|case:mixed"})
        log_files([str(tmp_path / "predictions.csv"), str(tmp_path / "by_length")])
        assert active_run_tags()["zoo.model"] == "luong"
    client = mlflow.MlflowClient(mlflow_store)
    data = client.get_run(run.info.run_id).data
    assert data.metrics == {"test_bleu": 12.5, "test_exact_match": 0.25}
    assert data.tags["zoo.bleu_signature"] == "nrefs:1|case:mixed"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"predictions.csv", "by_length"}
    assert [a.path for a in client.list_artifacts(run.info.run_id, "by_length")] == ["by_length/test.csv"]


def test_a_second_run_in_the_process_goes_to_its_own_tracking_uri(tmp_path, monkeypatch):
    """``mlflow.set_tracking_uri`` writes ``MLFLOW_TRACKING_URI`` into the environment, which
    ``resolve_tracking_uri`` reads first: two runs in one process (a notebook) with two
    ``tracking.uri`` both went to the first store. The environment is left as the user set it."""
    import mlflow

    from zoo.tracking import mlflow_run, resolve_tracking_uri

    from conftest import empty_store

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    first, second = empty_store(tmp_path / "a"), empty_store(tmp_path / "b")
    ids = []
    for uri in (first, second):
        with mlflow_run(resolve_tracking_uri(uri), "notebook") as run:
            ids.append(run.info.run_id)
        assert "MLFLOW_TRACKING_URI" not in os.environ
    for uri, run_id in zip((first, second), ids):
        assert [r.info.run_id for r in mlflow.MlflowClient(uri).search_runs(
            [mlflow.MlflowClient(uri).get_experiment_by_name("notebook").experiment_id])] == [run_id]

    monkeypatch.setenv("MLFLOW_TRACKING_URI", second)  # the user's own choice still wins, and stays
    with mlflow_run(resolve_tracking_uri(first), "notebook"):
        pass
    assert os.environ["MLFLOW_TRACKING_URI"] == second
