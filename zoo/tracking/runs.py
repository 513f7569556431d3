"""The MLflow run contract (docs/design.md): one place that starts, fills and ends runs."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from zoo.config import flatten, redact_uri, redacted
from zoo.environ import restored
from zoo.store import split_userinfo

MAX_PARAM_LENGTH = 6000
# Set by a sweep (``zoo.sweep.SweepCallback``) for its jobs: each job's run becomes a child of this run.
SWEEP_PARENT_VARIABLE = "ZOO_SWEEP_PARENT_RUN_ID"
# Set by ``mlflow run``: the run the job must log into (its experiment is the run's, not tracking.experiment).
MLFLOW_RUN_VARIABLE = "MLFLOW_RUN_ID"
PACKAGES = ("tensorflow", "tensorflow-text", "keras", "mlflow", "hydra-core", "numpy", "sacrebleu", "sentencepiece")


def resolve_tracking_uri(uri: Optional[str]) -> str:
    """``MLFLOW_TRACKING_URI`` if set, else ``uri``; a relative SQLite path becomes absolute.

    Never the deprecated file store: a plain path or ``file:`` URI is refused with the fix.
    """
    uri = os.environ.get("MLFLOW_TRACKING_URI") or uri or "sqlite:///mlflow.db"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        path = Path(uri[len("sqlite:///"):])
        uri = "sqlite:///" + str(path.resolve())
    elif "://" not in uri or uri.startswith("file:"):
        raise ValueError(f"tracking.uri={uri!r} is a file store, which MLflow no longer supports for runs. "
                         f"Use a database, e.g. tracking.uri=sqlite:///mlflow.db, or a server http://host:port.")
    return uri


CREDENTIAL_VARIABLES = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")


@contextlib.contextmanager
def tracking_credentials(uri: str) -> Iterator[str]:
    """Yields ``uri`` without its ``user:password@``, which MLflow reads inside the block from
    ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` (put back as they were afterwards).

    MLflow's client does send a URI's user-info (``requests`` reads it), but MLflow also prints and
    records the URI: its ``View run ... at`` line, its request errors (``API request to <url> failed``),
    the ``MLFLOW_TRACKING_URI`` it hands subprocesses. Without the user-info there, no message of the
    run can show the password. A URI's user-info wins over the variables, as it does for ``requests``.
    A URI without user-info is yielded as it is and the variables are left alone."""
    clean, user, password = split_userinfo(uri)
    if user is None:
        yield uri
        return
    with restored(*CREDENTIAL_VARIABLES):
        os.environ["MLFLOW_TRACKING_USERNAME"] = user
        os.environ["MLFLOW_TRACKING_PASSWORD"] = password or ""
        yield clean


def use_tracking_uri(uri: str) -> None:
    """``mlflow.set_tracking_uri(uri)``, leaving ``os.environ`` as it was.

    MLflow also writes the URI into ``MLFLOW_TRACKING_URI`` (for subprocesses), which
    ``resolve_tracking_uri`` reads first: a second run in the same process (a notebook, a test
    worker) with another ``tracking.uri`` would log into the first run's store."""
    import mlflow

    with restored("MLFLOW_TRACKING_URI"):
        mlflow.set_tracking_uri(uri)


def ui_command(uri: str) -> str:
    """The command that opens the MLflow UI on this store."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri} in a browser"
    return f"mlflow ui --host 127.0.0.1 --backend-store-uri {uri}"


def _git(*args: str) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit() -> str:
    return _git("rev-parse", "HEAD") or "unknown"


def git_dirty() -> Optional[bool]:
    """Whether tracked files differ from the commit (None outside a git checkout)."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def command_line_overrides() -> List[str]:
    """The job's overrides: Hydra's task overrides inside a Hydra app, else ``sys.argv`` minus flags.

    Secrets masked (``redact_uri``): they are recorded (tag ``zoo.overrides``, ``zoo.command``, the
    description) and printed (the resume command)."""
    overrides = None
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            overrides = list(HydraConfig.get().overrides.task)
    except Exception:  # noqa: BLE001 - no Hydra app around (tests, notebooks)
        pass
    if overrides is None:
        overrides = [a for a in sys.argv[1:] if not a.startswith("-")]
    return [redact_uri(o) for o in overrides]


def hydra_output_dir() -> Optional[str]:
    """The job's Hydra output directory (holding ``.hydra/``), or None outside a Hydra app."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return HydraConfig.get().runtime.output_dir
    except Exception:  # noqa: BLE001 - no Hydra app around
        pass
    return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpus() -> List[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def environment() -> Dict[str, object]:
    """The reproducibility record of this process: code, packages, Python, hardware, command line.

    Nothing is read from environment variables (secrets live there).
    """
    from importlib import metadata

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "train.py"
    return {"git_commit": git_commit(), "git_dirty": git_dirty(), "python": platform.python_version(),
            "packages": versions, "platform": platform.platform(), "cpu": _cpu_model(), "cpu_cores": os.cpu_count(),
            "gpus": _gpus(), "command": " ".join(["python", script, *command_line_overrides()])}


def sweep_parent_id() -> Optional[str]:
    """The parent run of the sweep this job belongs to, or None outside a sweep."""
    return os.environ.get(SWEEP_PARENT_VARIABLE) or None


def _quiet_mlflow() -> None:
    for name in ("alembic", "mlflow.store.db.utils", "mlflow.tracking.fluent", "mlflow.store"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _prepare_store(tracking_uri: str) -> None:
    """Creates (migrates) a SQLite store under a file lock, so parallel jobs can share a new one.

    Two processes that open a fresh SQLite store at once both run MLflow's schema migration, and
    one fails with ``duplicate column name``; a lock beside the database serializes the first opening.
    """
    if not tracking_uri.startswith("sqlite:///"):
        return
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, MLflow's own behaviour
        return
    import mlflow

    db = Path(tracking_uri[len("sqlite:///"):])
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(str(db) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            mlflow.MlflowClient(tracking_uri).search_experiments(max_results=1)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def mlflow_run(tracking_uri: str, experiment: str, run_name: Optional[str] = None, run_id: Optional[str] = None,
               tags: Optional[Dict[str, str]] = None, system_metrics: bool = False) -> Iterator[Any]:
    """Starts (or resumes, with ``run_id``) a run; ends it FINISHED, FAILED or KILLED.

    Under ``mlflow run`` (``MLFLOW_RUN_ID`` set) a new run is that run, in its own experiment. In a
    sweep's job (``ZOO_SWEEP_PARENT_RUN_ID`` set) a new run is a child of the sweep's parent run.
    ``system_metrics`` records CPU and memory use (MLflow's sampler, psutil) while the run is open.
    A URI's ``user:password@`` reaches MLflow as credentials, never in a message (``tracking_credentials``).
    """
    with tracking_credentials(tracking_uri) as uri:
        with _run(uri, experiment, run_name, run_id, tags, system_metrics) as run:
            yield run


@contextlib.contextmanager
def _run(tracking_uri: str, experiment: str, run_name: Optional[str], run_id: Optional[str],
         tags: Optional[Dict[str, str]], system_metrics: bool) -> Iterator[Any]:
    import mlflow

    if run_id is None and sweep_parent_id():
        tags = {**(tags or {}), "mlflow.parentRunId": sweep_parent_id()}
    _quiet_mlflow()
    _prepare_store(tracking_uri)
    use_tracking_uri(tracking_uri)
    if run_id is None and os.environ.get(MLFLOW_RUN_VARIABLE):
        run_id = os.environ[MLFLOW_RUN_VARIABLE]
        tags = {**(tags or {}), **({"mlflow.runName": run_name} if run_name else {})}
        run_name = None
    elif run_id is None:
        mlflow.set_experiment(experiment)
    run = mlflow.start_run(run_id=run_id, run_name=run_name, tags=tags if run_id is None else None,
                           log_system_metrics=True if system_metrics else None)
    if tags and run_id is not None:
        mlflow.set_tags(tags)
    try:
        yield run
    except KeyboardInterrupt:
        mlflow.end_run(status="KILLED")
        raise
    except BaseException as error:  # an exception may name the status it ends a run with (StopTraining: KILLED)
        mlflow.end_run(status=getattr(error, "run_status", "FAILED"))
        raise
    else:
        mlflow.end_run(status="FINISHED")


def log_config(cfg: DictConfig, extra_tags: Optional[Dict[str, str]] = None) -> None:
    """Params = the flattened resolved config; tags = model, data, commit, overrides; config.yaml;
    the reproducibility record (``log_environment``)."""
    import mlflow

    cfg = redacted(cfg)  # no credentials of tracking.uri (MLFLOW_TRACKING_URI) in params or config.yaml
    params = {k: (str(v)[:MAX_PARAM_LENGTH] if v is not None else "null") for k, v in flatten(cfg).items()}
    mlflow.log_params(params)
    tags = {
        "zoo.model": str(cfg.model.name),
        "zoo.data": str(cfg.data.name),
        "mlflow.source.git.commit": git_commit(),
        "zoo.git_commit": git_commit(),
        "zoo.overrides": " ".join(command_line_overrides()),
    }
    tags.update(extra_tags or {})
    mlflow.set_tags(tags)
    mlflow.log_text(OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")
    log_environment()


def log_environment() -> None:
    """The reproducibility record: ``environment.json``, tags for the UI, Hydra's ``.hydra/`` files."""
    import mlflow

    record = environment()
    mlflow.log_text(json.dumps(record, indent=2) + "\n", "environment.json")
    mlflow.set_tags({"zoo.git_dirty": str(record["git_dirty"]).lower(), "zoo.python": str(record["python"]),
                     "zoo.cpu": f"{record['cpu']} ({record['cpu_cores']} cores)",
                     "zoo.gpus": ", ".join(record["gpus"]) or "none",
                     "zoo.tensorflow": str(record["packages"]["tensorflow"]), "zoo.command": str(record["command"])})
    hydra_dir = hydra_output_dir()
    if hydra_dir and os.path.isdir(os.path.join(hydra_dir, ".hydra")):
        _log_redacted_folder(os.path.join(hydra_dir, ".hydra"), "hydra")


def _log_redacted_folder(folder: str, artifact_path: str) -> None:
    """The text files of ``folder`` as artifacts, each with its secrets masked (Hydra's files hold the
    command line and the config as typed: ``tracking.uri=http://user:password@host``)."""
    import mlflow

    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            relative = path.relative_to(folder).as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            mlflow.log_text(redact_uri(text), f"{artifact_path}/{relative}")


def log_dataset(name: str, digest: str, source: str, context: str, profile: Dict[str, object]) -> None:
    """One split of the data in the run's Datasets section: name, digest, source and profile."""
    import mlflow
    from mlflow.data.code_dataset_source import CodeDatasetSource
    from mlflow.data.meta_dataset import MetaDataset

    class ProfiledDataset(MetaDataset):
        @property
        def profile(self):
            return profile

        def to_dict(self):
            return {**super().to_dict(), "profile": json.dumps(profile)}

    dataset = ProfiledDataset(CodeDatasetSource({"source": source}), name=name, digest=digest[:36])
    mlflow.log_input(dataset, context=context)


def set_description(text: str) -> None:
    """The run's Description in the UI (``mlflow.note.content``)."""
    import mlflow

    mlflow.set_tag("mlflow.note.content", text)


def digest_texts(texts: Sequence[str]) -> str:
    """The sha256 of strings, one per line: a split's dataset digest."""
    import hashlib

    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


def register_model(run_id: str, name: str, alias: str) -> str:
    """Registers the run's logged ``model`` as a new version of ``name``; ``alias`` points at it.

    Returns the version. Aliases replace the deprecated registry stages.
    """
    import mlflow

    version = mlflow.register_model(f"runs:/{run_id}/model", name).version
    mlflow.MlflowClient().set_registered_model_alias(name, alias, version)
    return str(version)


def start_detached_run(tracking_uri: str, experiment: str, run_name: str, tags: Dict[str, str]) -> str:
    """Creates a RUNNING run without making it the active run (a sweep's parent); returns its id."""
    import mlflow

    _quiet_mlflow()
    _prepare_store(tracking_uri)
    client = mlflow.MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    return client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id


def end_detached_run(tracking_uri: str, run_id: str, status: str = "FINISHED") -> None:
    import mlflow

    mlflow.MlflowClient(tracking_uri).set_terminated(run_id, status)


def child_runs(tracking_uri: str, parent_run_id: str) -> List[Dict[str, object]]:
    """The runs whose ``mlflow.parentRunId`` is ``parent_run_id``, oldest first: id, name, status,
    overrides, tags, and each metric's latest value."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri)
    parent = client.get_run(parent_run_id)
    runs = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_run_id}'",
                              order_by=["attributes.start_time ASC"], max_results=5000)
    return [{"run_id": r.info.run_id, "name": r.info.run_name, "status": r.info.status,
             "overrides": r.data.tags.get("zoo.overrides", ""), "tags": dict(r.data.tags),
             "metrics": dict(r.data.metrics)} for r in runs]


def metric_history(tracking_uri: str, run_id: str, key: str) -> List[tuple]:
    """``[(step, value), ...]`` of a metric, by step."""
    import mlflow

    history = mlflow.MlflowClient(tracking_uri).get_metric_history(run_id, key)
    return sorted((m.step, m.value) for m in history)


def _exit(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def recorded_overrides(run_id: str, uri: Optional[str] = None) -> List[str]:
    """The overrides a run was trained with (its ``zoo.overrides`` tag); exits 2 with one line if the
    run cannot be found. Says so when the code has changed since (another git commit)."""
    import shlex

    import mlflow

    _quiet_mlflow()
    try:
        uri = resolve_tracking_uri(uri)
    except ValueError as error:
        _exit(str(error))
    try:
        run = mlflow.MlflowClient(uri).get_run(run_id)
    except Exception as error:  # noqa: BLE001 - MLflow raises several types for an unknown id or store
        first = (str(error).splitlines() or [""])[0][:200]
        _exit(f"--from-run {run_id}: no such run in {redact_uri(uri)} ({redact_uri(first)}). Check the id in the MLflow UI, "
              f"or point at its store with MLFLOW_TRACKING_URI.")
    if "zoo.overrides" not in run.data.tags:
        _exit(f"--from-run {run_id}: the run has no zoo.overrides tag (it was not started by train.py).")
    recorded = run.data.tags.get("zoo.git_commit")
    if recorded and recorded != git_commit():
        print(f"note: run {run_id} was trained at commit {recorded[:12]}; this checkout is at {git_commit()[:12]}.",
              file=sys.stderr)
    # A masked user-info is dropped: the re-run authenticates as this command does (its tracking.uri,
    # MLFLOW_TRACKING_USERNAME / PASSWORD or TOKEN).
    overrides = [o.replace("://***@", "://") for o in shlex.split(run.data.tags["zoo.overrides"])
                 if not o.startswith(("trainer.resume=", "+trainer.resume="))]
    print(f"Re-running {run_id}: python train.py {' '.join(shlex.quote(o) for o in overrides)}", flush=True)
    return overrides
