"""A tracking server that goes away during a run: a real ``mlflow server`` on 127.0.0.1 is stopped
and started again. Metrics logged meanwhile fail fast (no retry storm), are kept in the run's output
directory, and arrive, with their steps, when the server answers again; the run's status is still set."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from zoo.tracking.buffer import FILE_NAME, MetricBuffer

from conftest import ROOT, empty_store

pytestmark = pytest.mark.slow

# MLflow 3's job runner (GenAI scorers) would start eight more Python processes at every start
SERVER_ENV = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``mlflow server`` on 127.0.0.1 with a SQLite store that outlives its restarts."""

    def __init__(self, root):
        self.root, self.port = root, free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.process = None
        # A migrated empty store, as the first start would make it (conftest.mlflow_server)
        empty_store(root, default_artifacts="mlflow-artifacts:/0")

    def start(self, timeout=180):
        command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port),
                   "--workers", "1", "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
                   "--artifacts-destination", str(self.root / "artifacts")]
        self.process = subprocess.Popen(command, cwd=self.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True, env=SERVER_ENV)
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2):
                    return
            except OSError:
                assert self.process.poll() is None, "mlflow server exited"
                time.sleep(0.5)
        raise TimeoutError(f"mlflow server on {self.uri} did not answer in {timeout} s")

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the server and its workers: a session of their own
            self.process.wait(timeout=60)
        self.process = None


@pytest.fixture
def server(tmp_path):
    running = Server(tmp_path)
    running.start()
    yield running
    running.stop()


def test_metrics_survive_a_server_outage(server, tmp_path, capfd):
    from mlflow import MlflowClient

    client = MlflowClient(server.uri)
    run_id = client.create_run(client.create_experiment("outage")).info.run_id
    out, end = tmp_path / "outputs", tmp_path / "end_of_run"
    buffer = MetricBuffer(run_id, server.uri, str(out))
    assert buffer.log({"train_loss": 2.0}, step=1)

    server.stop()
    started = time.perf_counter()
    assert not buffer.log({"train_loss": 1.5}, step=2)  # the server is away: kept, training goes on
    assert time.perf_counter() - started < 10, "a failed log must not retry for long"
    assert not buffer.log({"train_loss": 1.2}, step=3)
    assert (out / FILE_NAME).read_text().count("\n") == 2  # written where the run's outputs are
    warning = capfd.readouterr().err
    assert "is not answering" in warning and str(out / FILE_NAME) in warning

    # Still away at the end of a run: the file stays, and the message says how to send it. (The run's
    # last metrics, from a buffer of their own, in the same outage: the server restarts once.)
    last = MetricBuffer(run_id, server.uri, str(end))
    assert not last.log({"test_bleu": 12.5}) and not last.flush(final=True)
    assert f"python -m zoo.tracking.buffer {end / FILE_NAME}" in capfd.readouterr().err

    server.start()
    assert buffer.log({"train_loss": 1.0}, step=4)  # back: everything kept goes first, in order
    client = MlflowClient(server.uri)
    history = client.get_metric_history(run_id, "train_loss")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [(1, 2.0), (2, 1.5), (3, 1.2),
                                                                                    (4, 1.0)]
    assert not (out / FILE_NAME).exists()
    client.set_terminated(run_id, "FINISHED")
    assert client.get_run(run_id).info.status == "FINISHED"

    assert "test_bleu" not in client.get_run(run_id).data.metrics and (end / FILE_NAME).exists()  # until sent
    sent = subprocess.run([sys.executable, "-m", "zoo.tracking.buffer", str(end / FILE_NAME)], cwd=ROOT,
                          env=dict(os.environ, MLFLOW_TRACKING_URI=server.uri), capture_output=True, text=True,
                          timeout=120)
    assert sent.returncode == 0, sent.stderr
    assert MlflowClient(server.uri).get_run(run_id).data.metrics["test_bleu"] == 12.5
    assert not (end / FILE_NAME).exists()
