"""Credentials for a tracking server: what MLflow's own client accepts, the checks before a run accept
too (``user:password@`` in the URI, ``MLFLOW_TRACKING_USERNAME`` / ``PASSWORD``, ``MLFLOW_TRACKING_TOKEN``,
``MLFLOW_TRACKING_INSECURE_TLS``), and no message, param, tag, artifact or export shows the secret."""

import base64
import http.server
import json
import os
import threading

import pytest

from zoo import store
from zoo.config import redact_uri

from conftest import mlflow_server

SECRET = "s3cr3t-9f1c"
CREDENTIAL_VARIABLES = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN",
                        "MLFLOW_TRACKING_INSECURE_TLS", "MLFLOW_TRACKING_AUTH", "MLFLOW_TRACKING_AWS_SIGV4",
                        "MLFLOW_TRACKING_SERVER_CERT_PATH", "MLFLOW_TRACKING_CLIENT_CERT_PATH")


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch, tmp_path):
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.mlflow/credentials of the machine


def basic(user, password):
    return "Basic " + base64.standard_b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def guarded_server():
    """A REST endpoint on 127.0.0.1 answering MLflow's ``experiments/search`` and ``runs/get`` only to
    ``Authorization: <expected>``, 401 otherwise; records the headers it saw."""
    seen, expected = [], {"header": basic("zoo", SECRET)}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            seen.append({"path": self.path, "authorization": self.headers.get("Authorization")})
            if self.headers.get("Authorization") != expected["header"]:
                self.send_response(401, "Unauthorized")
                self.end_headers()
                return
            body = {"experiments": []}
            if self.path.startswith("/api/2.0/mlflow/runs/get"):
                body = {"run": {"info": {"run_id": "abc", "status": "KILLED", "artifact_uri": "mlflow-artifacts:/x",
                                         "lifecycle_stage": "active"}}}
            payload = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield {"port": server.server_address[1], "seen": seen, "expected": expected}
    finally:
        server.shutdown()
        server.server_close()


def test_user_info_is_split_from_the_address_and_percent_decoded():
    assert store.split_userinfo("http://zoo:p%40ss@127.0.0.1:5000/x") == ("http://127.0.0.1:5000/x", "zoo", "p@ss")
    assert store.split_userinfo("http://127.0.0.1:5000") == ("http://127.0.0.1:5000", None, None)
    assert store.split_userinfo("https://token@host") == ("https://host", "token", "")


def test_authorization_follows_mlflow_uri_then_variables_then_file_then_token(monkeypatch, tmp_path):
    assert store.authorization("http://host") is None
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok")
    assert store.authorization("http://host") == "Bearer tok"
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text(
        "[mlflow]\nmlflow_tracking_username = filer\nmlflow_tracking_password = filepw\n")
    assert store.authorization("http://host") == basic("filer", "filepw")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "envuser")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "envpw")
    assert store.authorization("http://host") == basic("envuser", "envpw")
    assert store.authorization(f"http://zoo:{SECRET}@host") == basic("zoo", SECRET)  # the URI wins, as in requests


def test_secrets_are_masked_anywhere_in_a_text():
    text = f"python train.py tracking.uri=http://zoo:{SECRET}@127.0.0.1:5000 seed=1\nuri: 'https://h/?token={SECRET}'"
    masked = redact_uri(text)
    assert SECRET not in masked
    assert "tracking.uri=http://***@127.0.0.1:5000 seed=1" in masked and "?token=***'" in masked


@pytest.mark.parametrize("how", ["uri", "variables", "token"])
def test_the_store_look_up_sends_the_credentials_mlflow_would(guarded_server, monkeypatch, how):
    port = guarded_server["port"]
    uri = f"http://127.0.0.1:{port}"
    if how == "uri":
        uri = f"http://zoo:{SECRET}@127.0.0.1:{port}"
    elif how == "variables":
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "zoo")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", SECRET)
    else:
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", SECRET)
        guarded_server["expected"]["header"] = f"Bearer {SECRET}"
    store.check_reachable(uri)
    assert store.find_run(uri, "abc")["status"] == "KILLED"
    assert [s["authorization"] for s in guarded_server["seen"]] == [guarded_server["expected"]["header"]] * 2
    assert all(s["path"].startswith("/api/2.0/mlflow/") for s in guarded_server["seen"])


def test_wrong_credentials_are_named_without_the_secret(guarded_server):
    uri = f"http://zoo:wrong-{SECRET}@127.0.0.1:{guarded_server['port']}"
    with pytest.raises(store.StoreError) as refused:
        store.check_reachable(uri)
    message = str(refused.value)
    assert "401" in message and "MLFLOW_TRACKING_USERNAME" in message and SECRET not in message
    assert f"http://***@127.0.0.1:{guarded_server['port']}" in message


def test_an_auth_plugin_leaves_the_look_up_to_mlflow(guarded_server, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_AUTH", "some_plugin")
    uri = f"http://127.0.0.1:{guarded_server['port']}"
    store.check_reachable(uri)  # it answered (401): reachable; MLflow authenticates the run itself
    with pytest.raises(store.NotChecked):
        store.find_run(uri, "abc")


def test_insecure_tls_turns_verification_off_as_for_mlflow(monkeypatch, tmp_path):
    import ssl

    assert store._tls_context() is None
    monkeypatch.setenv("MLFLOW_TRACKING_INSECURE_TLS", "true")
    context = store._tls_context()
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname


def test_a_refusal_before_tensorflow_names_no_secret():
    import socket

    from zoo.config import problems

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    found = problems([f"tracking.uri=http://zoo:{SECRET}@127.0.0.1:{port}", "trainer.resume=0123abcd"])
    assert found and not any(SECRET in line for line in found), found
    assert any(f"http://***@127.0.0.1:{port}" in line for line in found), found


def test_tracking_credentials_hand_the_user_info_to_mlflow_for_the_block(monkeypatch):
    from zoo.tracking import tracking_credentials

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "before")
    with tracking_credentials(f"http://zoo:{SECRET}@127.0.0.1:5000") as uri:
        assert uri == "http://127.0.0.1:5000"
        assert os.environ["MLFLOW_TRACKING_USERNAME"] == "zoo" and os.environ["MLFLOW_TRACKING_PASSWORD"] == SECRET
    assert os.environ["MLFLOW_TRACKING_USERNAME"] == "before" and "MLFLOW_TRACKING_PASSWORD" not in os.environ
    with tracking_credentials("http://127.0.0.1:5000") as uri:
        assert uri == "http://127.0.0.1:5000" and os.environ["MLFLOW_TRACKING_USERNAME"] == "before"


# One small run of every task kind against a real `mlflow server`, with the password in tracking.uri, and
# other secrets in its environment: a token (the URI's user-info wins over it, as in MLflow) and a cloud key.
OTHER_SECRETS = {"MLFLOW_TRACKING_TOKEN": "fake-token-4d1c", "AWS_SECRET_ACCESS_KEY": "fake-aws-secret-93af"}
ALL_SECRETS = (SECRET, *OTHER_SECRETS.values())
# One epoch each: a second one logs nothing of another kind (the secrets' places are the run's, not the epoch's).
KINDS = {
    "translation": ["model=bahdanau", "data=dates", "debug=smoke", "trainer.epochs=1", "tracking.attention_plots=1"],
    "story_qa": ["model=memory_network", "data=story_qa", "debug=smoke", "trainer.epochs=1",
                 "tracking.attention_plots=1"],
    # debug=smoke sets model.embed_dim, which the regression model does not take: its own tiny settings
    "regression": ["experiment=nadaraya_watson", "trainer.epochs=1", "trainer.verbose=0"],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``mlflow server`` on a free port of 127.0.0.1 (SQLite backend, local artifacts, no auth: it ignores
    credentials, and the test is that the zoo takes them and never shows them); yields its port."""
    with mlflow_server(tmp_path_factory.mktemp("server")) as port:
        yield port


@pytest.fixture(scope="module")
def runs(server, tmp_path_factory):
    """Every task kind trained by ``python train.py ... tracking.uri=http://zoo:<secret>@127.0.0.1:<port>``
    (in this process, ``train_py_here``: the run is the claim; everything it prints is captured,
    TensorFlow's C++ log included); ``{kind: (return code, everything it printed, its folder)}``."""
    from conftest import train_py_here

    # secrets a user's environment holds beside the URI's: none may show either
    env = {**{name: None for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME",
                                      "MLFLOW_RUN_ID", *CREDENTIAL_VARIABLES)}, **OTHER_SECRETS}
    done = {}
    for kind, overrides in KINDS.items():
        folder = tmp_path_factory.mktemp(kind)
        code, printed = train_py_here([*overrides, f"tracking.uri=http://zoo:{SECRET}@127.0.0.1:{server}",
                                       f"hydra.run.dir={folder / 'outputs'}",
                                       f"trainer.checkpoint_dir={folder / 'checkpoints'}"], folder, env)
        done[kind] = (code, printed, folder)
    return done


def _texts_of(folder):
    """``(path, text)`` of every file under ``folder`` (binary files read as latin-1: bytes are searched too)."""
    from pathlib import Path

    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            yield path, path.read_bytes().decode("latin-1")


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_task_kind_runs_against_a_server_with_a_password_and_shows_it_nowhere(kind, runs, server, tmp_path):
    import mlflow

    code, printed, _ = runs[kind]
    assert code == 0, printed[-3000:]
    assert not [s for s in ALL_SECRETS if s in printed]
    assert f"http://127.0.0.1:{server}" in printed  # the URI is printed, without its user-info

    uri = f"http://127.0.0.1:{server}"
    client = mlflow.MlflowClient(uri)
    run_id = printed.split("MLflow run id: ")[1].split()[0]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["tracking.uri"] == f"http://***@127.0.0.1:{server}"
    recorded = [f"{k}={v}" for k, v in {**run.data.params, **run.data.tags}.items()]
    recorded += [f"{d.dataset.name} {d.dataset.source} {d.dataset.profile}" for d in run.inputs.dataset_inputs]
    assert not [line for line in recorded if any(s in line for s in ALL_SECRETS)]

    downloaded = mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(tmp_path / "run"), tracking_uri=uri)
    names = {p.relative_to(downloaded).as_posix() for p, _ in _texts_of(downloaded)}
    assert "config.yaml" in names and "hydra/overrides.yaml" in names
    exported = {"translation": "saved_model/assets.extra/config.yaml", "story_qa": "saved_model/assets.extra/config.yaml",
                "regression": "keras_model/config.yaml"}[kind]
    assert exported in names  # the config written into the export
    models = [m for m in client.search_logged_models([run.info.experiment_id]) if m.source_run_id == run_id]
    assert len(models) == (0 if kind == "regression" else 1)  # the pyfunc model: MLflow 3 keeps its files apart
    for model in models:
        mlflow.artifacts.download_artifacts(artifact_uri=model.artifact_location,
                                            dst_path=str(tmp_path / "models" / model.model_id), tracking_uri=uri)
    leaked = [str(p) for p, text in [*_texts_of(downloaded), *_texts_of(tmp_path / "models")]
              if any(s in text for s in ALL_SECRETS)]
    assert not leaked, leaked
