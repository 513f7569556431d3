"""Looking runs up in an MLflow store without importing MLflow, for the config validator.

``python train.py trainer.resume=<id>`` and ``python evaluate.py run_id=<id>`` must say in a
second that the id is not in the store, or that the store is not there, before TensorFlow (and
MLflow, about 2 s to import) starts. A SQLite store is read with the standard library, read-only;
a tracking server is asked over its REST API with a short timeout, so a server that is down is
named at once instead of after MLflow's retries. Everything else uses MLflow itself (zoo.tracking).

The look-up authenticates as MLflow's own client would (``mlflow.utils.credentials``,
``mlflow.utils.rest_utils.http_request``), so whatever MLflow accepts is accepted here: HTTP Basic
from the URI's ``user:password@`` (which ``requests`` sends for MLflow), else from
``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` or ``~/.mlflow/credentials``, else a
Bearer ``MLFLOW_TRACKING_TOKEN``; ``MLFLOW_TRACKING_INSECURE_TLS``, ``MLFLOW_TRACKING_SERVER_CERT_PATH``
and ``MLFLOW_TRACKING_CLIENT_CERT_PATH`` as for MLflow. An auth plugin (``MLFLOW_TRACKING_AUTH``,
``MLFLOW_TRACKING_AWS_SIGV4``) cannot be reproduced without MLflow: a server that then refuses the
look-up is left for MLflow to answer (``NotChecked``). No message holds a secret (``redact_uri``).
"""

from __future__ import annotations

import base64
import configparser
import json
import os
import re
import sqlite3
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Dict, Optional, Tuple

TIMEOUT = 3.0  # seconds for one request to a tracking server


class StoreError(Exception):
    """The store cannot be read: missing database file, server down, not an MLflow store."""


class NotChecked(StoreError):
    """The server answered, but refused a look-up whose authentication only MLflow can make (an auth
    plugin): the question is left to MLflow when the run starts."""


_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/@\s]+)@")
_SECRET_QUERY = re.compile(r"([?&](?:[^=&\s]*(?:token|secret|password|passwd|key|signature|credential)[^=&\s]*)=)"
                           r"[^&\s'\"]*", re.IGNORECASE)


def redact_uri(value: str) -> str:
    """``value`` without the secrets of the URIs in it: ``http://alice:pw@host`` -> ``http://***@host``,
    ``?token=x`` -> ``?token=***``. URIs anywhere in the text are masked (a command line, a YAML file)."""
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(r"\1***@", value))


def split_userinfo(uri: str) -> Tuple[str, Optional[str], Optional[str]]:
    """``(uri without user:password@, user, password)``, percent-decoded as ``requests`` reads them;
    ``(uri, None, None)`` when the URI holds no user-info."""
    parts = urllib.parse.urlsplit(uri)
    if "@" not in parts.netloc:
        return uri, None, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return (urllib.parse.urlunsplit(parts._replace(netloc=host)), urllib.parse.unquote(user),
            urllib.parse.unquote(password))


def _true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("true", "1")


def _credentials_file() -> Tuple[Optional[str], Optional[str]]:
    """``mlflow_tracking_username`` / ``_password`` of ``~/.mlflow/credentials`` (MLflow reads it too)."""
    path = Path(os.path.expanduser("~/.mlflow/credentials"))
    if not path.is_file():
        return None, None
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except configparser.Error:
        return None, None
    if "mlflow" not in parser:
        return None, None
    return parser["mlflow"].get("mlflow_tracking_username"), parser["mlflow"].get("mlflow_tracking_password")


def authorization(uri: str) -> Optional[str]:
    """The ``Authorization`` header MLflow's client sends to ``uri``, or None."""
    _, user, password = split_userinfo(uri)
    if user is None:
        file_user, file_password = _credentials_file()
        user = os.environ.get("MLFLOW_TRACKING_USERNAME") or file_user
        password = os.environ.get("MLFLOW_TRACKING_PASSWORD") or file_password
        if not (user and password):
            token = os.environ.get("MLFLOW_TRACKING_TOKEN")
            return f"Bearer {token}" if token else None
    return "Basic " + base64.standard_b64encode(f"{user}:{password or ''}".encode("utf-8")).decode("ascii")


def _tls_context() -> Optional[ssl.SSLContext]:
    """TLS as MLflow's ``requests`` call verifies it: against ``MLFLOW_TRACKING_SERVER_CERT_PATH`` when set,
    else not at all with ``MLFLOW_TRACKING_INSECURE_TLS``; ``MLFLOW_TRACKING_CLIENT_CERT_PATH`` as client."""
    server_cert, client_cert = (os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH"),
                                os.environ.get("MLFLOW_TRACKING_CLIENT_CERT_PATH"))
    insecure = _true("MLFLOW_TRACKING_INSECURE_TLS")
    if not (insecure or server_cert or client_cert):
        return None
    if server_cert:  # MLflow's MlflowHostCreds.verify: the certificate path wins over the insecure flag
        where = {"capath" if os.path.isdir(server_cert) else "cafile": server_cert}
        context = ssl.create_default_context(**where)
    else:
        context = ssl.create_default_context()
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    if client_cert:
        context.load_cert_chain(client_cert)
    return context


def _plugin_auth() -> bool:
    """Whether MLflow authenticates through a plugin this module cannot reproduce."""
    return bool(os.environ.get("MLFLOW_TRACKING_AUTH")) or _true("MLFLOW_TRACKING_AWS_SIGV4")


def tracking_uri(configured: Optional[str]) -> str:
    """``MLFLOW_TRACKING_URI`` if set, else ``configured``, else ``sqlite:///mlflow.db``."""
    return os.environ.get("MLFLOW_TRACKING_URI") or configured or "sqlite:///mlflow.db"


def is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def sqlite_path(uri: str) -> Optional[Path]:
    """The database file of a ``sqlite:///`` URI (relative to the working directory), else None."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///"):]).expanduser()


def _get(uri: str, endpoint: str, params: Dict[str, str]) -> Optional[dict]:
    """JSON of ``GET <uri>/api/2.0/mlflow/<endpoint>``; None for "does not exist"; StoreError when down.

    The URI's user-info is sent as an ``Authorization`` header, never as part of the address (urllib
    would take ``user:password`` for a host name)."""
    address, _, _ = split_userinfo(uri)
    shown = redact_uri(uri)
    url = f"{address.rstrip('/')}/api/2.0/mlflow/{endpoint}?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(url)
    header = authorization(uri)
    if header:
        request.add_header("Authorization", header)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=_tls_context()) as response:
            return json.loads(response.read().decode("utf-8") or "{}")
    except urllib.error.HTTPError as error:
        if error.code in (400, 404):
            return None
        if error.code in (401, 403) and _plugin_auth():
            raise NotChecked(f"the tracking server {shown} answered HTTP {error.code}") from None
        hint = (": give the credentials MLflow uses (user:password@ in the URI, MLFLOW_TRACKING_USERNAME and "
                "MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN)" if error.code in (401, 403) else "")
        raise StoreError(f"the tracking server {shown} answered HTTP {error.code} {error.reason}{hint}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = redact_uri(str(getattr(error, "reason", error)))
        raise StoreError(f"the tracking server {shown} is not reachable ({reason}). Start it (mlflow server "
                         f"--host 127.0.0.1 --port <port>) or point MLFLOW_TRACKING_URI / tracking.uri at a "
                         f"running one") from None


def check_reachable(uri: str) -> None:
    """Raises StoreError when a tracking server does not answer within ``TIMEOUT`` seconds.

    A SQLite store that does not exist yet is fine (the first run creates it)."""
    if is_server(uri):
        try:
            _get(uri, "experiments/search", {"max_results": "1"})
        except NotChecked:
            pass  # it answered


def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise StoreError(f"there is no MLflow store at {path.absolute()} (no such file; relative paths are "
                         f"relative to the working directory {os.getcwd()})")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=TIMEOUT)


def find_run(uri: str, run_id: str) -> Optional[Dict[str, str]]:
    """``{"run_id", "status", "artifact_uri", "lifecycle_stage"}`` of a run, or None if the store has none
    with that id. Raises StoreError when the store cannot be read."""
    path = sqlite_path(uri)
    if path is not None:
        try:
            with _connect(path) as db:
                row = db.execute("SELECT run_uuid, status, artifact_uri, lifecycle_stage FROM runs "
                                 "WHERE run_uuid = ?", (str(run_id),)).fetchone()
        except sqlite3.Error as error:
            raise StoreError(f"{path} is not a readable MLflow store ({error})") from None
        return None if row is None else dict(zip(("run_id", "status", "artifact_uri", "lifecycle_stage"), row))
    if is_server(uri):
        found = _get(uri, "runs/get", {"run_id": str(run_id)})
        if not found or "run" not in found:
            return None
        info = found["run"]["info"]
        return {"run_id": info.get("run_id", run_id), "status": info.get("status", ""),
                "artifact_uri": info.get("artifact_uri", ""), "lifecycle_stage": info.get("lifecycle_stage", "")}
    raise StoreError(f"cannot look runs up in {redact_uri(uri)} without MLflow")


def has_artifact(uri: str, run: Dict[str, str], path: str) -> Optional[bool]:
    """Whether ``path`` (a directory such as ``saved_model``) is among the run's artifacts;
    None when the artifact store is neither a local folder nor the tracking server's proxy."""
    artifact_uri = run.get("artifact_uri") or ""
    local = artifact_uri[len("file://"):] if artifact_uri.startswith("file://") else artifact_uri
    if local and os.path.isabs(local):
        if (Path(local) / path).exists():
            return True
        return _logged_model(uri, run["run_id"], path)  # MLflow 3 keeps a logged model's files apart
    if is_server(uri) and artifact_uri.startswith("mlflow-artifacts:"):
        listed = _get(uri, "artifacts/list", {"run_id": run["run_id"], "path": path})
        return bool(listed and listed.get("files"))
    return None


def _logged_model(uri: str, run_id: str, name: str) -> Optional[bool]:
    """Whether the run logged a model named ``name`` (``runs:/<id>/<name>``); None when unknown."""
    path = sqlite_path(uri)
    if path is None:
        return None
    try:
        with _connect(path) as db:
            return db.execute("SELECT 1 FROM logged_models WHERE source_run_id = ? AND name = ?",
                              (run_id, name)).fetchone() is not None
    except (sqlite3.Error, StoreError):
        return None


def find_model_version(uri: str, name: str, version: Optional[str] = None,
                       alias: Optional[str] = None) -> Optional[Dict[str, str]]:
    """``{"version", "run_id"}`` of a registered model's version (by number, alias, or the latest), or None."""
    path = sqlite_path(uri)
    if path is not None:
        try:
            with _connect(path) as db:
                if alias is not None:
                    row = db.execute("SELECT version FROM registered_model_aliases WHERE name = ? AND alias = ?",
                                     (name, alias)).fetchone()
                    if row is None:
                        return None
                    version = str(row[0])
                query = "SELECT version, run_id FROM model_versions WHERE name = ?"
                args = [name]
                if version is not None and version != "latest":
                    query += " AND version = ?"
                    args.append(int(version) if str(version).isdigit() else -1)
                row = db.execute(query + " ORDER BY version DESC", args).fetchone()
        except sqlite3.Error as error:
            raise StoreError(f"{path} is not a readable MLflow store ({error})") from None
        return None if row is None else {"version": str(row[0]), "run_id": row[1] or ""}
    if is_server(uri):
        if alias is not None:
            found = _get(uri, "registered-models/alias", {"name": name, "alias": alias})
        elif version is not None and version != "latest":
            found = _get(uri, "model-versions/get", {"name": name, "version": str(version)})
        else:
            latest = _get(uri, "registered-models/get-latest-versions", {"name": name})
            found = {"model_version": (latest or {}).get("model_versions", [None])[0]} if latest else None
        model_version = (found or {}).get("model_version")
        return None if not model_version else {"version": str(model_version.get("version")),
                                                "run_id": model_version.get("run_id", "")}
    raise StoreError(f"cannot look models up in {redact_uri(uri)} without MLflow")
