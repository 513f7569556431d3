"""Nothing lost: real ``python train.py`` subprocesses killed (SIGKILL, SIGTERM) and resumed into
the same MLflow run, and a diverging run stopped cleanly. Each trains a tiny model for seconds.

A process is killed where the test says because it is frozen while the test looks: ``freeze_when``
stops it (SIGSTOP), reads its checkpoints, and lets it go on (SIGCONT) unless they show the moment
wanted; then the signal is sent to the stopped process, which cannot have moved on meanwhile. What
needs no process boundary (the uninterrupted reference run, a resume that is not killed, the diverging
run and the refused resume of a FINISHED run, whose exit codes and printed lines ``train_py_here`` takes
from train.py's own main) runs in this
process: a ``python train.py`` start costs TensorFlow's import and every first trace again."""

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

from conftest import ROOT, compose, empty_store, train_py_here

pytestmark = pytest.mark.slow

# Two short epochs of 12 steps, checkpointing every 2 steps. The model is seq2seq at width 16: what is
# claimed (signals, checkpoints, the MLflow run, the resumed losses) is zoo/training's lifecycle, the same
# for every sequence model, and seq2seq's training step traces fastest (each of the four runs pays its
# traces again: in-process probes, 2 epochs of 10 steps: bahdanau 11.9 s of CPU, seq2seq 7.2 s). The
# window the test stops a process in (a checkpoint inside the epoch, before the epoch's end) is the
# epoch's later steps and its validation: 5 checkpoints, not one, inside each epoch.
TINY = ["debug=smoke", "model=seq2seq", "model.hidden_size=16", "data.train_size=192", "data.val_size=16",
        "data.test_size=16", "trainer.epochs=2", "trainer.steps_per_epoch=null", "trainer.batch_size=16",
        "trainer.early_stopping_patience=0", "trainer.checkpoint_every_steps=2", "tracking.export=false",
        "tracking.attention_plots=0", "tracking.predictions=0"]


def start(workdir: Path, overrides):
    uri = f"sqlite:///{workdir / 'mlflow.db'}" if (workdir / "mlflow.db").exists() else empty_store(workdir)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", MLFLOW_TRACKING_URI=uri)
    for leaked in ("MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID"):  # a run in this process
        env.pop(leaked, None)
    return subprocess.Popen([sys.executable, str(ROOT / "train.py"), *overrides], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def train_here(monkeypatch, workdir: Path, overrides, on_epoch=None):
    """``python train.py <overrides>`` in this process (TensorFlow is loaded already), in ``workdir``
    with its store (``<workdir>/mlflow.db``, made when missing); returns ``train``'s result.
    ``on_epoch(record, epoch)``: ``train``'s epoch hook."""
    from zoo.training import train

    db = workdir / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}" if db.exists() else empty_store(workdir))
    monkeypatch.chdir(workdir)
    return train(compose(overrides), on_epoch=on_epoch)


def runs(workdir: Path):
    client = mlflow.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    return client, client.search_runs(experiments)


def _stopped(pid: int, timeout=10.0) -> bool:
    """Waits until ``pid`` is stopped (state T); False when it has exited instead."""
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):  # no procfs (not Linux): a stop takes effect at once
        time.sleep(0.01)
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[-1].split()[0]
        except OSError:
            return False
        if state in "Tt":
            return True
        if state in "ZX":
            return False
        time.sleep(0.001)
    raise AssertionError(f"process {pid} did not stop within {timeout} s")


def freeze_when(proc, condition, what: str, timeout=300, every=0.05):
    """Returns ``condition()``'s first true value, seen with ``proc`` stopped (SIGSTOP), and leaves it
    stopped: a signal sent now finds the process exactly where the condition saw it. Between looks the
    process runs (SIGCONT) for ``every`` seconds. The process is killed when the condition fails (an
    AssertionError), the time is up or the test stops otherwise."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"training ended before {what}: {proc.stderr.read()[-3000:]}")
            os.kill(proc.pid, signal.SIGSTOP)
            if _stopped(proc.pid):
                try:
                    found = condition()
                except AssertionError:
                    raise
                except Exception:  # noqa: BLE001 - a file or store the process was writing when stopped: look again
                    found = None
                if found:
                    return found
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(every)
        raise AssertionError(f"not {what} after {timeout} s")
    except BaseException:
        proc.kill()
        raise


def checkpoint_states(workdir: Path):
    """The loop states of the checkpoints in ``workdir``, oldest first."""
    states = []
    for state_file in workdir.glob("checkpoints/*/ckpt-*/state.json"):
        try:
            states.append(json.loads(state_file.read_text()))
        except (OSError, ValueError):
            continue  # being removed by the pruning
    return sorted(states, key=lambda s: s["global_step"])


def inside_epoch(workdir: Path, epoch: int):
    """A condition: the newest checkpoint is one written inside ``epoch`` (1-based), so the epoch has not
    ended (its end's checkpoint comes before its metrics are logged); returns that checkpoint's state.
    Fails at once when the newest checkpoint is already past the epoch."""
    def condition():
        states = checkpoint_states(workdir)
        if not states:
            return None
        newest = states[-1]
        assert newest["epoch"] < epoch, f"epoch {epoch} ended before the test could stop the run: {newest}"
        return newest if newest["epoch"] == epoch - 1 and newest["step_in_epoch"] > 0 else None

    return condition


def kill(proc, signum):
    """Sends ``signum`` to the stopped ``proc`` and lets it go on to receive it."""
    os.kill(proc.pid, signum)
    os.kill(proc.pid, signal.SIGCONT)


def history(client, run_id, key):
    return [(m.step, m.value) for m in client.get_metric_history(run_id, key)]


def test_sigterm_then_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, monkeypatch):
    """One run stopped twice and finished: SIGTERM in epoch 1 (a checkpoint, KILLED, a printed resume
    command); that command, SIGKILLed in epoch 2 (RUNNING: no chance to say more); then
    ``trainer.resume=<run id>`` to the end (from the SIGKILL's last checkpoint, inside epoch 2). One MLflow run, each epoch's metrics once, and the losses
    of an uninterrupted run of the same config. A FINISHED run is not resumed."""
    straight_dir, work = tmp_path / "straight", tmp_path / "stopped"
    straight_dir.mkdir(), work.mkdir()
    straight = train_here(monkeypatch, straight_dir, TINY)  # the uninterrupted run, in this process

    proc = start(work, TINY)
    freeze_when(proc, inside_epoch(work, 1), "a checkpoint inside epoch 1")
    kill(proc, signal.SIGTERM)
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
    freeze_when(proc, inside_epoch(work, 2), "a checkpoint inside epoch 2")
    kill(proc, signal.SIGKILL)
    proc.wait(timeout=60)
    client, (run,) = runs(work)
    assert run.info.run_id == run_id and run.info.status == "RUNNING"
    assert [step for step, _ in history(client, run_id, "train_loss")] == [1], "killed during epoch 2"

    train_here(monkeypatch, work, [*TINY, f"trainer.resume={run_id}"])  # to the end, in this process
    client, found = runs(work)
    assert [r.info.run_id for r in found] == [run_id]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    straight_client, (straight_run,) = runs(straight_dir)
    assert straight_run.info.run_id == straight["run_id"]
    for key in ("train_loss", "val_loss", "val_exact_match", "train_tokens_per_sec", "epoch_seconds"):
        assert [s for s, _ in history(client, run_id, key)] == [1, 2], key  # each epoch exactly once
    for key in ("train_loss", "val_loss"):  # same seed, same batches, same weights: equal on this CPU
        resumed = [v for _, v in history(client, run_id, key)]
        assert resumed == pytest.approx([v for _, v in history(straight_client, straight["run_id"], key)],
                                        rel=1e-5), key
    metrics = run.data.metrics
    assert metrics["test_exact_match"] == pytest.approx(straight_run.data.metrics["test_exact_match"], abs=0.002)
    assert metrics["epochs_trained"] == 2
    assert run.data.tags["zoo.resumes"] == "2"
    assert not list((work / "checkpoints").glob(f"{run_id}/ckpt-*"))  # FINISHED: nothing left to resume
    # tracking.export=false: scored and reported, no model written
    assert "saved_model" not in {a.path for a in client.list_artifacts(run_id)}

    # A FINISHED run is not resumed: one line, exit code 2. The printed command's train.py main in this
    # process (its exit code and what it prints are the claim, not a signal; the refusal comes after
    # TensorFlow is imported, when the run is looked up).
    code, printed = train_py_here(command[2:], work, {"MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlflow.db'}"})
    assert code == 2 and "is FINISHED" in printed and len(printed.strip().splitlines()) == 1, printed[-3000:]


def test_a_diverging_run_stops_with_advice_and_exports_nothing(tmp_path):
    # train.py's main in this process (its exit code and what it prints are the claim, not a signal).
    # The default model, bahdanau: seq2seq's saturating GRUs stay finite at this learning rate.
    empty_store(tmp_path)
    code, err = train_py_here([*[o for o in TINY if o != "model=seq2seq"], "optimizer=sgd", "optimizer.learning_rate=1e12", "trainer.clipnorm=null",
                               "tracking.export=true"], tmp_path, {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"})
    assert code == 1, err[-3000:]
    assert re.search(r"The training loss is (nan|inf|-inf) at step \d+ \(epoch \d\)", err), err[-3000:]
    for advice in ("optimizer.learning_rate", "trainer.precision=float32", "trainer.clipnorm"):
        assert advice in err
    client, (run,) = runs(tmp_path)
    assert run.info.status == "FAILED" and run.data.tags["zoo.error"].startswith("NonFiniteLoss")
    assert not [a.path for a in client.list_artifacts(run.info.run_id) if a.path == "saved_model"]


# Two epochs of 10 steps: stopped inside epoch 2, the resume finishes it.
QA_TINY = ["model=memory_network", "data=story_qa", "data.train_size=160", "data.val_size=25", "data.test_size=50",
           "data.max_sentences=6", "model.embed_dim=8", "trainer.epochs=2", "trainer.batch_size=16",
           "trainer.early_stopping_patience=0", "trainer.checkpoint_every_steps=2", "trainer.verbose=0",
           "tracking.export=false", "tracking.attention_plots=0", "tracking.predictions=10"]


def test_a_stopped_story_qa_run_resumes_mid_epoch_into_the_same_run(tmp_path, monkeypatch):
    """The qa path (zoo/training/qa.py) checkpoints and resumes like translation: a run stopped inside
    epoch 2, then trainer.resume=<run id> finishes the same run, each epoch's metrics once. Both in this
    process: the stop is a real SIGTERM this process sends itself right after the first checkpoint inside
    epoch 2 (so it lands there on any machine); the run's own loop defers it to the step's end, checkpoints
    and stops. What a signal does to a ``python train.py`` (exit code, printed command, SIGKILL) is the
    translation test's above: the lifecycle is the same for every task kind."""
    from zoo.training import Interrupted, checkpoint

    real, sent = checkpoint.Writer.save, []

    def save(self, model, optimizer, state, *args, **kwargs):
        written = real(self, model, optimizer, state, *args, **kwargs)
        if not sent and state["epoch"] == 1 and state["step_in_epoch"] > 0:
            sent.append(state["global_step"])
            os.kill(os.getpid(), signal.SIGTERM)
        return written

    monkeypatch.setattr(checkpoint.Writer, "save", save)
    with pytest.raises(Interrupted) as stopped:
        train_here(monkeypatch, tmp_path, QA_TINY)
    assert stopped.value.exit_code == 128 + signal.SIGTERM and "Resume with: python train.py" in str(stopped.value)
    client, (run,) = runs(tmp_path)
    assert run.info.status == "KILLED"
    run_id = run.info.run_id
    assert [step for step, _ in history(client, run_id, "val_accuracy")] == [1], "stopped during epoch 2"
    (state,) = [s for s in checkpoint_states(tmp_path) if s["global_step"] > sent[0]]  # the stop's own
    assert state["epoch"] == 1 and state["step_in_epoch"] > 0

    train_here(monkeypatch, tmp_path, [*QA_TINY, f"trainer.resume={run_id}"])
    client, found = runs(tmp_path)
    assert [r.info.run_id for r in found] == [run_id]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["zoo.resumes"] == "1"
    for key in ("train_loss", "val_loss", "val_accuracy", "val_evidence"):
        assert [s for s, _ in history(client, run_id, key)] == [1, 2], key  # each epoch exactly once
    assert run.data.metrics["epochs_trained"] == 2
    assert 0.0 <= run.data.metrics["test_accuracy_single_fact"] <= 1.0
    assert not list((tmp_path / "checkpoints").glob(f"{run_id}/ckpt-*"))
