"""Runs in a real SQLite store: parallel jobs (a Hydra sweep with a parallel launcher, or two
terminals) may open the same new store at the same moment."""

import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT

START_A_RUN = r"""
import sys, time
from zoo.tracking.runs import mlflow_run
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))   # every process opens the store at the same moment
with mlflow_run(sys.argv[1], "parallel") as run:
    import mlflow
    mlflow.log_metric("x", 1.0)
print(run.info.run_id)
"""


@pytest.mark.slow
def test_parallel_jobs_can_create_the_same_new_sqlite_store(tmp_path):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    script = tmp_path / "start.py"
    script.write_text(START_A_RUN, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    start = time.time() + 8.0  # after every interpreter has imported mlflow
    procs = [subprocess.Popen([sys.executable, str(script), uri, str(start)], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, results):
        assert proc.returncode == 0, err[-2000:]
    run_ids = {out.strip().splitlines()[-1] for out, _ in results}
    assert len(run_ids) == 4
    client = mlflow.MlflowClient(uri)
    for run_id in run_ids:
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED" and run.data.metrics["x"] == 1.0
