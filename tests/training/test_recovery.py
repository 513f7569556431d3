"""Nothing lost: real ``python train.py`` subprocesses killed (SIGKILL, SIGTERM) and resumed into
the same MLflow run, and a diverging run stopped cleanly. Each trains a tiny model for seconds."""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest

from conftest import ROOT, empty_store

pytestmark = pytest.mark.slow

# Three short epochs of about 60 steps each, checkpointing every 10 steps.
TINY = ["debug=smoke", "data.train_size=960", "data.val_size=32", "data.test_size=64", "trainer.epochs=3",
        "trainer.steps_per_epoch=null", "trainer.batch_size=16", "trainer.early_stopping_patience=0",
        "trainer.checkpoint_every_steps=10", "tracking.export=false", "tracking.attention_plots=0"]


def start(workdir: Path, overrides):
    uri = f"sqlite:///{workdir / 'mlflow.db'}" if (workdir / "mlflow.db").exists() else empty_store(workdir)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", MLFLOW_TRACKING_URI=uri)
    return subprocess.Popen([sys.executable, str(ROOT / "train.py"), *overrides], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def runs(workdir: Path):
    client = mlflow.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    return client, client.search_runs(experiments)


def wait_for_checkpoint_in_epoch(workdir: Path, epoch: int, proc, timeout=300):
    """Waits until a checkpoint written inside ``epoch`` (1-based) exists; returns its state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for state_file in workdir.glob("checkpoints/*/ckpt-*/state.json"):
            try:
                state = json.loads(state_file.read_text())
            except (OSError, ValueError):
                continue  # renamed away by the pruning
            if state["epoch"] == epoch - 1 and state["step_in_epoch"] > 0:
                return state
        if proc.poll() is not None:
            raise AssertionError(f"training ended before epoch {epoch}: {proc.stderr.read()[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint inside epoch {epoch} after {timeout} s")


def history(client, run_id, key):
    return [(m.step, m.value) for m in client.get_metric_history(run_id, key)]


def test_sigterm_then_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path):
    """One run stopped twice and finished: SIGTERM in epoch 1 (a checkpoint, KILLED, a printed resume
    command); that command, SIGKILLed in epoch 2 (RUNNING: no chance to say more); then
    ``trainer.resume=<run id>`` to the end. One MLflow run, each epoch's metrics once, and the losses
    of an uninterrupted run trained beside it. A FINISHED run is not resumed."""
    straight_dir, work = tmp_path / "straight", tmp_path / "stopped"
    straight_dir.mkdir(), work.mkdir()
    straight_proc = start(straight_dir, [*TINY, "trainer.verbose=0"])  # trains beside the one to be stopped
    proc = start(work, TINY)
    wait_for_checkpoint_in_epoch(work, 1, proc)
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc)
    assert code == 128 + signal.SIGTERM, err[-3000:]
    client, (run,) = runs(work)
    run_id = run.info.run_id
    assert run.info.status == "KILLED"
    assert "SIGTERM" in run.data.tags["zoo.stopped"]
    assert list((work / "checkpoints" / run_id).glob("ckpt-*/weights.npz"))
    match = re.search(r"Resume with: (python train\.py .*)$", err, re.MULTILINE)
    assert match, err[-3000:]
    command = shlex.split(match.group(1))
    assert command[-1] == f"trainer.resume={run_id}"

    proc = start(work, command[2:])  # the printed command
    wait_for_checkpoint_in_epoch(work, 2, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    client, (run,) = runs(work)
    assert run.info.run_id == run_id and run.info.status == "RUNNING"
    assert [step for step, _ in history(client, run_id, "train_loss")] == [1], "killed during epoch 2"

    code, out, err = finish(start(work, [*TINY, f"trainer.resume={run_id}"]))
    assert code == 0, err[-3000:]
    code, out, err = finish(straight_proc)
    assert code == 0, err[-3000:]
    client, found = runs(work)
    assert [r.info.run_id for r in found] == [run_id]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    _, (straight,) = runs(straight_dir)
    straight_client = mlflow.MlflowClient(f"sqlite:///{straight_dir / 'mlflow.db'}")
    for key in ("train_loss", "val_loss", "val_exact_match", "train_tokens_per_sec", "epoch_seconds"):
        assert [s for s, _ in history(client, run_id, key)] == [1, 2, 3], key  # each epoch exactly once
    for key in ("train_loss", "val_loss"):  # same seed, same batches, same weights: equal on this CPU
        resumed = [v for _, v in history(client, run_id, key)]
        assert resumed == pytest.approx([v for _, v in history(straight_client, straight.info.run_id, key)],
                                        rel=1e-5), key
    metrics = run.data.metrics
    assert metrics["test_exact_match"] == pytest.approx(straight.data.metrics["test_exact_match"], abs=0.002)
    assert metrics["epochs_trained"] == 3
    assert run.data.tags["zoo.resumes"] == "2"
    assert not list((work / "checkpoints").glob(f"{run_id}/ckpt-*"))  # FINISHED: nothing left to resume
    # tracking.export=false: scored and reported, no model written
    assert "saved_model" not in {a.path for a in client.list_artifacts(run_id)}

    # A FINISHED run is not resumed: one line, exit code 2.
    code, out, err = finish(start(work, command[2:]))
    assert code == 2 and "is FINISHED" in err and len(err.strip().splitlines()) == 1, err[-3000:]


def test_a_diverging_run_stops_with_advice_and_exports_nothing(tmp_path):
    code, out, err = finish(start(tmp_path, [*TINY, "optimizer=sgd", "optimizer.learning_rate=1e12",
                                             "trainer.clipnorm=null", "tracking.export=true"]))
    assert code == 1, err[-3000:]
    assert re.search(r"The training loss is (nan|inf|-inf) at step \d+ \(epoch \d\)", err), err[-3000:]
    for advice in ("optimizer.learning_rate", "trainer.precision=float32", "trainer.clipnorm"):
        assert advice in err
    client, (run,) = runs(tmp_path)
    assert run.info.status == "FAILED" and run.data.tags["zoo.error"].startswith("NonFiniteLoss")
    assert not [a.path for a in client.list_artifacts(run.info.run_id) if a.path == "saved_model"]


QA_TINY = ["model=memory_network", "data=story_qa", "data.train_size=320", "data.val_size=25", "data.test_size=50",
           "data.max_sentences=6", "model.embed_dim=8", "trainer.epochs=3", "trainer.batch_size=16",
           "trainer.early_stopping_patience=0", "trainer.checkpoint_every_steps=10", "trainer.verbose=0",
           "tracking.export=false", "tracking.attention_plots=0", "tracking.predictions=10"]


def test_a_killed_story_qa_run_resumes_into_the_same_run(tmp_path):
    """The qa path (zoo/training/qa.py) checkpoints and resumes like translation: SIGKILL in epoch 2, then
    trainer.resume=<run id> finishes the same run, each epoch's metrics once. Two train.py starts: 70 s at
    load 8 on the shared 2-core CPU, mostly TensorFlow's start."""
    proc = start(tmp_path, QA_TINY)
    wait_for_checkpoint_in_epoch(tmp_path, 2, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    client, (run,) = runs(tmp_path)
    assert run.info.status == "RUNNING"
    run_id = run.info.run_id
    assert [step for step, _ in history(client, run_id, "val_accuracy")] == [1], "killed during epoch 2"

    code, out, err = finish(start(tmp_path, [*QA_TINY, f"trainer.resume={run_id}"]))
    assert code == 0, err[-3000:]
    client, found = runs(tmp_path)
    assert [r.info.run_id for r in found] == [run_id]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["zoo.resumes"] == "1"
    for key in ("train_loss", "val_loss", "val_accuracy", "val_evidence"):
        assert [s for s, _ in history(client, run_id, key)] == [1, 2, 3], key  # each epoch exactly once
    assert run.data.metrics["epochs_trained"] == 3
    assert 0.0 <= run.data.metrics["test_accuracy_single_fact"] <= 1.0
    assert not list((tmp_path / "checkpoints").glob(f"{run_id}/ckpt-*"))
