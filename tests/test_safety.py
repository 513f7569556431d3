"""Safety: ``.keras`` files load with ``safe_mode=True``; nothing unpickles data; no credential from
the environment or from a tracking URI reaches params, tags, ``config.yaml`` or the exported model;
the documented MLflow commands bind to 127.0.0.1."""

import ast
import re

import numpy as np
import pytest

from zoo.config import redact_uri

from conftest import ROOT, compose

SOURCES = sorted((ROOT / "zoo").rglob("*.py")) + [ROOT / "train.py", ROOT / "evaluate.py"]


def calls(name):
    """``(file, line, call node)`` of every call of ``<...>.name(...)`` or ``name(...)`` in the package."""
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if called == name:
                    yield path.relative_to(ROOT), node.lineno, node


def test_every_keras_load_is_in_safe_mode():
    found = list(calls("load_model"))
    keras_loads = [(p, n, c) for p, n, c in found if "pyfunc" not in ast.unparse(c.func)]
    assert keras_loads, "expected the evaluation's keras.models.load_model"
    for path, line, call in keras_loads:
        flags = {k.arg: k.value for k in call.keywords}
        assert "safe_mode" in flags and ast.literal_eval(flags["safe_mode"]) is True, f"{path}:{line}"


def test_nothing_unpickles_data():
    # An import of a pickling library, a call of its loader, or numpy's allow_pickle (the word alone may appear
    # in prose, e.g. Hydra's joblib launcher, which pickles no data of ours).
    pattern = re.compile(r"^\s*(import|from)\s+(pickle|cloudpickle|dill|joblib)\b|\b(pickle|cloudpickle|dill|joblib)"
                         r"\.(load|loads|Unpickler)\b|allow_pickle\s*=\s*True|torch\.load")
    offending = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in SOURCES
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not offending, offending
    # Every MLflow pyfunc model is logged from code (a file path), not as a pickled object: log_model gets
    # str(<path>), and the paths zoo.export.pyfunc hands it are its files SERVED_CODE and READER_CODE.
    logged = list(calls("log_model"))
    assert logged
    for path, line, call in logged:
        python_model = {k.arg: k.value for k in call.keywords}["python_model"]
        assert ast.unparse(python_model).startswith("str("), f"{path}:{line}"
    handed = [ast.unparse(call.args[0]) for _, _, call in calls("_log_model")]
    assert sorted(handed) == ["READER_CODE", "SERVED_CODE"]


def test_a_keras_file_round_trips_in_safe_mode(tmp_path):
    keras = pytest.importorskip("keras")
    import zoo.models

    model = zoo.models.create("transformer", source_vocab_size=11, target_vocab_size=9, embed_dim=8,
                              intermediate_dim=16, num_layers=1, num_heads=2)
    inputs = (np.array([[5, 6, 3, 0]]), np.array([[2, 5, 6]]))
    expected = keras.ops.convert_to_numpy(model(inputs))
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras", compile=False, safe_mode=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(inputs)), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("uri, expected", [
    ("http://alice:pw789@mlflow.example:5000", "http://***@mlflow.example:5000"),
    ("https://host/path?token=tok000&x=1", "https://host/path?token=***&x=1"),
    ("postgresql://mlflow:secret@db:5432/mlflow", "postgresql://***@db:5432/mlflow"),
    ("sqlite:////tmp/mlflow.db", "sqlite:////tmp/mlflow.db"),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
])
def test_uris_lose_their_credentials(uri, expected):
    assert redact_uri(uri) == expected


def test_documented_mlflow_commands_bind_to_localhost():
    from zoo.tracking import ui_command

    assert "--host 127.0.0.1" in ui_command("sqlite:///mlflow.db")
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line in doc.read_text(encoding="utf-8").splitlines():
            if re.search(r"\bmlflow (ui|server)\b", line) and "--" in line:
                assert "--host 127.0.0.1" in line, f"{doc.name}: {line.strip()}"


SECRETS = {"MLFLOW_TRACKING_TOKEN": "fake-token-4d1c", "AWS_SECRET_ACCESS_KEY": "fake-aws-secret-93af",
           "MLFLOW_TRACKING_PASSWORD": "fake-password-7e2b"}


@pytest.mark.slow
def test_no_secret_reaches_the_run(mlflow_store, monkeypatch, tmp_path):
    """A real (smoke) training run with fake credentials in the environment and in tracking.uri."""
    import mlflow

    from zoo.training import train

    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    uri_secret = "pw-uri-5c3a"
    result = train(compose(["debug=smoke", f"tracking.uri=http://alice:{uri_secret}@mlflow.example:5000",
                            "tracking.log_pyfunc=false", "tracking.attention_plots=0"]))
    client = mlflow.MlflowClient(mlflow_store)
    run = client.get_run(result["run_id"])
    secrets = [*SECRETS.values(), uri_secret]
    recorded = {**run.data.params, **run.data.tags}
    assert run.data.params["tracking.uri"] == "http://***@mlflow.example:5000"
    files = [mlflow.artifacts.download_artifacts(run_id=result["run_id"], artifact_path=name,
                                                 dst_path=str(tmp_path / "a"), tracking_uri=mlflow_store)
             for name in ("config.yaml", "saved_model/assets.extra/config.yaml")]
    texts = [f"{k}={v}" for k, v in recorded.items()] + [open(f, encoding="utf-8").read() for f in files]
    leaked = [s for s in secrets for t in texts if s in t]
    assert not leaked, leaked
