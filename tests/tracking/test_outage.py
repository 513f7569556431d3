"""A tracking server that goes away during a run: a real ``mlflow server`` on 127.0.0.1, reached through
an address that stops answering (connection refused, open connections cut, as when the server is
stopped) and answers again. Metrics logged meanwhile fail fast (no retry storm), are kept in the run's
output directory, and arrive, with their steps, when the server answers again; the run's status is still set."""

import contextlib
import os
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from zoo.tracking.buffer import FILE_NAME, MetricBuffer

from conftest import empty_store

pytestmark = pytest.mark.slow

# MLflow 3's job runner (GenAI scorers) would start eight more Python processes at every start
SERVER_ENV = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``mlflow server`` on 127.0.0.1 (SQLite store, local artifacts), reached at ``uri``: an address of
    its own (a relay in this process) that ``stop`` takes away and ``start`` brings back.

    For the client an outage is its server's address refusing connections, and the connections it
    holds cut; the relay does exactly that, and the server behind it keeps running, so the test pays
    one start of ``mlflow server`` (about 12 s of CPU: the CLI's process and uvicorn's) instead of two.
    The store is a SQLite file either way: nothing the server holds in memory matters here."""

    def __init__(self, root):
        self.root, self.port, self.backend = root, free_port(), free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.process, self.listener, self.connections = None, None, []
        self.lock = threading.Lock()
        # A migrated empty store, as the first start would make it (conftest.mlflow_server)
        empty_store(root, default_artifacts="mlflow-artifacts:/0")

    def launch(self, timeout=180):
        """Starts ``mlflow server`` on its own port and waits until it answers ``/health``."""
        command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.backend),
                   "--workers", "1", "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
                   "--artifacts-destination", str(self.root / "artifacts")]
        self.process = subprocess.Popen(command, cwd=self.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True, env=SERVER_ENV)
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.backend}/health", timeout=2):
                    return
            except OSError:
                assert self.process.poll() is None, "mlflow server exited"
                time.sleep(0.5)
        raise TimeoutError(f"mlflow server on port {self.backend} did not answer in {timeout} s")

    def start(self):
        """The server's address answers: connections to ``uri`` reach the server."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self):
        """The server's address goes away: new connections are refused, the open ones are cut."""
        listener, self.listener = self.listener, None
        listener.close()
        with self.lock:
            cut, self.connections = self.connections, []
        for connection in cut:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def shut_down(self):
        if self.listener is not None:
            self.stop()
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the server and its workers: a session of their own
            self.process.wait(timeout=60)

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by stop()
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.backend), timeout=30)
            except OSError:
                client.close()
                continue
            with self.lock:
                if self.listener is not listener:  # stopped meanwhile
                    client.close()
                    upstream.close()
                    return
                self.connections += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source, target):
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def server(tmp_path):
    running = Server(tmp_path)
    try:
        running.launch()
        running.start()
        yield running
    finally:
        running.shut_down()


def test_metrics_survive_a_server_outage(server, tmp_path, capfd, monkeypatch):
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
    # last metrics, from a buffer of their own, in the same outage: the address comes back once.)
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
    # The command the message names (its __main__, in this process: the interpreter's start is not the claim)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
    monkeypatch.setattr(sys, "argv", ["python -m zoo.tracking.buffer", str(end / FILE_NAME)])
    monkeypatch.delitem(sys.modules, "zoo.tracking.buffer", raising=False)  # runpy runs it afresh, as python -m
    runpy.run_module("zoo.tracking.buffer", run_name="__main__", alter_sys=True)
    assert f"Sent 1 metric rows of {end / FILE_NAME}." in capfd.readouterr().out
    assert MlflowClient(server.uri).get_run(run_id).data.metrics["test_bleu"] == 12.5
    assert not (end / FILE_NAME).exists()
