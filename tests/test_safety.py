"""Safety: ``.keras`` files load with ``safe_mode=True``; nothing unpickles data; tracking URIs are
redacted; the documented MLflow commands bind to 127.0.0.1. That no credential from the environment or
from a tracking URI reaches a run's params, tags, artifacts, exported model or output is
tests/test_credentials.py's end-to-end test, for every task kind against a real server."""

import ast
import re

import numpy as np
import pytest

from zoo.config import redact_uri

from conftest import ROOT

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
    # str(<path>), and the paths zoo.export.pyfunc hands it are its files (translation, story QA, image, speech).
    logged = list(calls("log_model"))
    assert logged
    for path, line, call in logged:
        python_model = {k.arg: k.value for k in call.keywords}["python_model"]
        assert ast.unparse(python_model).startswith("str("), f"{path}:{line}"
    handed = [ast.unparse(call.args[0]) for _, _, call in calls("_log_model")]
    assert sorted(handed) == ["IMAGE_CODE", "READER_CODE", "SERVED_CODE", "SPEECH_CODE"]


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
