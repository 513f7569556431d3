"""Shared fixtures: Hydra composition, a temporary MLflow store, quiet TensorFlow."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Python's default, where an environment turns it off (PYTHONDONTWRITEBYTECODE): compiled modules are
# cached in __pycache__ (git ignores it), so the xdist workers, started after this file is read, and
# the tests' subprocesses do not each compile the package again, nor pytest rewrite every test file's
# asserts again in every worker (measured: 6 s of CPU per worker's collection).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# Tests compare with float64 NumPy at atol 1e-5. On a GPU (Ampere and later) float32 matmuls default
# to TensorFloat-32, 10-bit mantissas: measured on an H100 with the JAX backend, 5 of the layer tests
# then miss by 1e-5 to 1e-3. The suite asks for full float32 products; training keeps each backend's
# default. CPUs ignore both variables.
os.environ.setdefault("JAX_DEFAULT_MATMUL_PRECISION", "highest")
os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")  # cuBLAS and cuDNN, for TensorFlow on a GPU
# One thread per TensorFlow pool in each worker and in the tests' subprocesses: the suite runs one
# worker per core plus one (pytest_xdist_auto_num_workers), so every core is busy already, and the tiny
# ops of the tests gain nothing from more threads but their hand-offs and spinning. Measured: three
# smoke runs at once (bahdanau, seq2seq, transformer), each trained twice in its process, took 8%
# less CPU (146-153 s against 166-171 s, alternating). Training and the benchmark keep TensorFlow's
# defaults (trainer.intra_op_threads / inter_op_threads null); a test of those settings sets its own.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

# The package is installed (``pip install -e .``, a line of requirements.txt); ROOT is where the
# entry points and conf/ are.
ROOT = Path(__file__).resolve().parent.parent


def compose(overrides=(), config_name="train"):
    """The config ``python train.py <overrides>`` would run with (Hydra's Compose API)."""
    from zoo.config import compose_train

    return compose_train(overrides, config_name)


def built_once(make):
    """``get(name)``: ``make(name).ensure_built()``, made on the first ask and kept, for a test file's
    checks that only read a model (outputs, weights, decoding, saving); a test that trains or changes a
    model makes its own."""
    models = {}

    def get(name):
        if name not in models:
            models[name] = make(name).ensure_built()
        return models[name]

    return get


_template = []  # the empty store every ``empty_store`` copies, made once per test process


def empty_store(directory, name="mlflow.db", default_artifacts=None) -> str:
    """The URI of a new, empty MLflow SQLite store at ``<directory>/<name>``.

    MLflow makes a new store by running its schema migrations (1-2 s of CPU each time, and dozens
    of tests start one); here it makes one store per test process, and each test gets a copy of
    that file: the same tables and ``Default`` experiment, its artifact location moved to
    ``<directory>/mlruns/0``, where MLflow puts it for a store made in ``directory``, or to
    ``default_artifacts`` (``mlflow-artifacts:/0`` for a store ``mlflow server`` serves artifacts
    of). Tests of store creation itself make theirs with MLflow."""
    import shutil
    import sqlite3
    import tempfile

    if not _template:
        import atexit

        import mlflow

        folder = tempfile.mkdtemp(prefix="zoo-test-store-")
        atexit.register(shutil.rmtree, folder, True)
        template = Path(folder) / "mlflow.db"
        mlflow.MlflowClient(f"sqlite:///{template}").search_experiments(max_results=1)
        _template.append(template)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / name
    shutil.copyfile(_template[0], db)
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                           (default_artifacts or str(directory.resolve() / "mlruns" / "0"),))
    connection.close()
    return f"sqlite:///{db}"


# MLflow's fluent API writes these into os.environ (set_tracking_uri, set_experiment), for subprocesses;
# zoo.tracking.resolve_tracking_uri reads MLFLOW_TRACKING_URI first. A test (or module fixture) that
# points MLflow at its own store would leave the later tests of its worker logging there.
_MLFLOW_VARIABLES = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID")
_MLFLOW_ENVIRONMENT = {name: os.environ.get(name) for name in _MLFLOW_VARIABLES}


@pytest.fixture(autouse=True)
def _mlflow_environment_as_at_start():
    """After each test, the MLflow variables are as the session found them."""
    yield
    for name, value in _MLFLOW_ENVIRONMENT.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch):
    """A new SQLite tracking store (``empty_store``); returns its URI. The working directory is ``tmp_path``."""
    uri = empty_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    return uri


def evaluate_here(monkeypatch, uri, workdir, overrides):
    """``python evaluate.py <overrides>`` in this process (TensorFlow is loaded already; each entry
    point keeps its own subprocess tests): the config Hydra composes, the store ``uri``, in ``workdir``."""
    from zoo.evaluation.evaluate import evaluate

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(workdir)
    return evaluate(compose(overrides, config_name="evaluate"))


def greedy_agrees_with_teacher_forcing(model, sources, cells, max_length=5):
    """Greedy decoding of ``sources`` and teacher forcing on its own output give the same ids and the
    same attention weights, ``cells`` per step (the memory's positions), each step's summing to 1."""
    import keras
    import numpy as np

    from zoo.decoding import greedy_decode

    ids, weights, lengths = (keras.ops.convert_to_numpy(t) for t in greedy_decode(model, sources, max_length=max_length))
    batch = len(ids)
    assert weights.shape == (batch, ids.shape[1], cells)  # [B, T_out, cells]
    target_in = np.concatenate([np.full((batch, 1), 2, "int32"), ids[:, :-1]], axis=1)  # <bos>, then its own
    logits, forced = (keras.ops.convert_to_numpy(t) for t in model.teacher_forced(sources, target_in))
    for row in range(batch):
        n = lengths[row]
        np.testing.assert_array_equal(logits[row, :n].argmax(-1), ids[row, :n])
        np.testing.assert_allclose(weights[row, :n], forced[row, :n], atol=1e-5)
        np.testing.assert_allclose(weights[row, :n].sum(-1), 1.0, atol=1e-5)


IMAGE_METRICS = ("test_exact_match", "test_digit_error_rate", "test_alignment_accuracy", "test_alignment_mass")


def image_run_reads_as_scored(overrides, uri, workdir):
    """Trains an image model (``overrides``) in this process into the store ``uri`` (the caller's working
    directory ``workdir``, e.g. ``mlflow_store``'s): the run FINISHED with the image task's test metrics
    logged as ``train`` returned them, and its SavedModel's ``read`` gives the test images the texts the run
    scored (its ``predictions.csv``). Returns ``(run's metrics, read's attention, read's ids, the task)``."""
    import csv

    import mlflow
    import pytest
    import tensorflow as tf

    from zoo.data import load_task
    from zoo.training import train

    result = train(compose(overrides))
    run = mlflow.MlflowClient(uri).get_run(result["run_id"])
    model = next(o.partition("=")[2] for o in overrides if o.startswith("model="))
    assert run.info.status == "FINISHED" and run.data.params["model.name"] == model
    metrics = run.data.metrics
    for key in IMAGE_METRICS:
        assert key in metrics and metrics[key] == pytest.approx(result[key], nan_ok=True), key
    art = Path(mlflow.artifacts.download_artifacts(run_id=result["run_id"], dst_path=str(Path(workdir) / "art"),
                                                   tracking_uri=uri))
    rows = list(csv.DictReader(open(art / "predictions.csv", encoding="utf-8")))
    task = load_task(compose(overrides).data)
    reader = tf.saved_model.load(str(art / "saved_model"))
    out = reader.read(tf.constant(task.splits["test"].images))
    assert [t.decode() for t in out["text"].numpy()] == [r["hypothesis"] for r in rows]
    return metrics, out["attention"].numpy(), out["ids"].numpy(), task


def train_py_here(args, cwd, env=None, printed=None):
    """``python train.py <args>`` run in this process as its ``__main__`` block runs it (the command
    line's expansion, its check before TensorFlow, Hydra's single run or multirun, the exit codes), in
    ``cwd`` with ``env`` over ``os.environ`` (a ``None`` value removes a variable); returns
    ``(exit code, everything printed)``. What it prints, Python's streams and the file descriptors
    TensorFlow's C++ logging writes to, goes to the file ``printed`` (default ``<cwd>/printed.txt``).

    For the tests whose claim is the run, not the process: a ``python train.py`` subprocess pays
    TensorFlow's, Keras' and MLflow's imports again (about 12 s of CPU here). Signals, exit codes seen
    by a shell, several processes at once and the checks before TensorFlow starts keep their
    subprocesses. Hydra's singleton and the root logger (Hydra configures it for its job) are as before
    afterwards."""
    import logging
    import runpy

    from hydra.core.global_hydra import GlobalHydra

    cwd = Path(cwd)
    printed = Path(printed or cwd / "printed.txt")
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    # Hydra's logging.config.dictConfig shuts down every handler logging knows of: hidden from it, the
    # worker's own handlers (pytest's; absl's, which would close its stream, pytest's capture) stay open.
    known = logging._handlerList[:]
    del logging._handlerList[:]
    code = 0
    with pytest.MonkeyPatch.context() as patch, open(printed, "w+", encoding="utf-8") as out:
        patch.chdir(cwd)
        patch.setattr(sys, "argv", [str(ROOT / "train.py"), *args])
        for name, value in (env or {}).items():
            if value is None:
                patch.delenv(name, raising=False)
            else:
                patch.setenv(name, value)
        sys.stdout.flush()
        sys.stderr.flush()
        saved_fds, saved_streams = (os.dup(1), os.dup(2)), (sys.stdout, sys.stderr)
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        sys.stdout = sys.stderr = out
        try:
            runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        finally:
            out.flush()
            sys.stdout, sys.stderr = saved_streams
            for fd, saved in zip((1, 2), saved_fds):
                os.dup2(saved, fd)
                os.close(saved)
            GlobalHydra.instance().clear()
            for handler in root.handlers:
                if handler not in handlers:
                    handler.close()
            root.handlers[:] = handlers
            root.setLevel(level)
            logging._handlerList[:0] = known
        out.seek(0)
        return code, out.read()


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


# Seconds each test file took (setup, call and teardown of its tests, summed) in a full run on the
# 2-core CI machine; ``python -m pytest --update-durations`` rewrites it after a full run.
DURATIONS = Path(__file__).with_name("durations.json")


def pytest_addoption(parser):
    parser.addoption("--update-durations", action="store_true",
                     help="after the run, write each test file's total seconds to tests/durations.json "
                          "(the order files are handed to the workers in)")
    parser.addoption("--cpu-report", metavar="PATH", default=None,
                     help="after the run, write each test's CPU seconds (its worker's and the subprocesses "
                          "it waited for), costliest first, to PATH; print the ten costliest")


def _file_seconds():
    import json

    try:
        return {name: float(seconds) for name, seconds in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def pytest_collection_modifyitems(config, items):
    """Test files longest first, by the seconds ``tests/durations.json`` recorded; each file's tests
    in their written order.

    With ``-n auto --dist loadfile`` (pyproject.toml) every worker takes whole files in this order
    (longest processing time first), so the minute-long end-to-end files start early and the short
    files fill the end, instead of one long file starting last while the other workers wait. A
    file not recorded yet counts as the longest if it holds ``slow`` tests, else as the shortest."""
    seconds = _file_seconds()
    longest = max(seconds.values(), default=0.0) + 1.0
    slow = {item.path for item in items if item.get_closest_marker("slow")}

    def expected(item):
        name = item.path.relative_to(ROOT).as_posix()
        return seconds.get(name, longest if item.path in slow else 0.0)

    items.sort(key=lambda item: -expected(item))  # stable: the written order within a file


_spent = {}


def pytest_runtest_logreport(report):
    # In the controlling process (xdist relays every worker's reports): seconds per test file.
    name = report.nodeid.split("::")[0]
    _spent[name] = _spent.get(name, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    import json

    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if session.config.getoption("--cpu-report"):
        _write_cpu_report(session.config.getoption("--cpu-report"))
    if not session.config.getoption("--update-durations"):
        return
    if exitstatus != 0:
        print("\ntests/durations.json not updated: the run failed")
        return
    option = session.config.option
    if option.file_or_dir or option.keyword or option.markexpr:  # a file's time is the sum of all its tests
        print("\ntests/durations.json not updated: --update-durations needs the whole suite "
              "(no paths, -k or -m)")
        return
    recorded = {**_file_seconds(), **{name: round(s, 1) for name, s in _spent.items()}}
    DURATIONS.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n")
    print(f"\ntests/durations.json: {len(_spent)} files, {sum(_spent.values()):.0f} s of tests")


def _cpu_seconds():
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """``--cpu-report``: each test's CPU (setup, call and teardown), its worker's and that of the
    subprocesses it waited for (a subprocess reaped late counts to a later test), one line per test in
    ``<PATH>.<worker>.jsonl``; the controlling process merges them (``pytest_sessionfinish``)."""
    path = item.config.getoption("--cpu-report")
    if not path:
        yield
        return
    import json

    own, children = _cpu_seconds()
    yield
    own_after, children_after = _cpu_seconds()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"{path}.{worker}.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"test": item.nodeid, "own": round(own_after - own, 2),
                            "subprocesses": round(children_after - children, 2)}) + "\n")


def _write_cpu_report(path: str) -> None:
    import glob
    import json

    parts = glob.glob(glob.escape(path) + ".*.jsonl")
    rows = [json.loads(line) for part in parts for line in Path(part).read_text(encoding="utf-8").splitlines()]
    for part in parts:
        os.remove(part)
    rows.sort(key=lambda r: -(r["own"] + r["subprocesses"]))
    total = sum(r["own"] + r["subprocesses"] for r in rows)
    lines = [f"{r['own'] + r['subprocesses']:8.1f}  (worker {r['own']:7.1f}, subprocesses {r['subprocesses']:7.1f})  "
             f"{r['test']}" for r in rows]
    Path(path).write_text(f"CPU seconds per test, {len(rows)} tests, {total:.0f} s in all\n" + "\n".join(lines) + "\n",
                          encoding="utf-8")
    print(f"\n{path}: CPU of {len(rows)} tests, {total:.0f} s; the ten costliest:")
    print("\n".join(lines[:10]))


def free_port() -> int:
    """A free TCP port of 127.0.0.1."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mlflow_server(folder):
    """``mlflow server`` on a free port of 127.0.0.1 (SQLite backend and artifacts in ``folder``, its log
    in ``folder/server.log``), once it answers ``/health``: a context manager yielding the port, the
    server stopped after. Its store starts as a copy of ``empty_store``'s (the server would otherwise
    run MLflow's schema migrations), with the ``Default`` experiment's artifacts where the server
    puts them, ``mlflow-artifacts:/0``."""
    import contextlib
    import subprocess
    import time
    import urllib.request

    @contextlib.contextmanager
    def running():
        port = free_port()
        if not (folder / "server.db").exists():
            empty_store(folder, "server.db", default_artifacts="mlflow-artifacts:/0")
        log = open(folder / "server.log", "w")
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
             "--backend-store-uri", f"sqlite:///{folder / 'server.db'}",
             "--artifacts-destination", str(folder / "artifacts"), "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, cwd=folder,
            # MLflow 3's job runner (GenAI scorers) starts eight more Python processes the zoo never uses
            env=dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"))
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("mlflow server did not start: " + (folder / "server.log").read_text()[-2000:])
            time.sleep(0.5)
        try:
            yield port
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()

    return running()
