"""A resume never loses the run, and a full disk never ends one (issue 45, item 3).

Tiny data, in this process: a run stopped after its second epoch (``StopTraining`` from its epoch hook,
which ends it KILLED and keeps its checkpoints, as a kill does; the real SIGTERM and SIGKILL of a
``python train.py`` are tests/training/test_recovery.py's) whose newest checkpoint's ``weights.npz`` is
then cut to half its size (as a full disk or an interrupted copy leaves it) is resumed from the
checkpoint before it, into the same MLflow run, each epoch logged once; when no checkpoint can be read,
the resume is refused in one line and changes nothing. A checkpoint writer that raises ENOSPC (a full
disk) costs one warning line, and the run finishes.
"""

import errno
import shutil

import mlflow
import pytest

from training.test_recovery import history, runs, train_here

from conftest import compose

pytestmark = pytest.mark.slow

# Three epochs of 4 steps, checkpoints at epoch ends only, the newest two kept; narrow layers. seq2seq:
# checkpoints, resumes and the run's MLflow record are zoo/training's, the same for every sequence model,
# and seq2seq's step traces fastest (as in test_recovery.py).
TINY = ["debug=smoke", "model=seq2seq", "model.hidden_size=16", "data.train_size=64", "data.val_size=16",
        "data.test_size=16", "trainer.epochs=3", "trainer.steps_per_epoch=null", "trainer.batch_size=16",
        "trainer.early_stopping_patience=0", "trainer.keep_checkpoints=2", "tracking.export=false",
        "tracking.attention_plots=0", "tracking.predictions=0"]
KEYS = ("train_loss", "val_loss", "val_exact_match", "epoch_seconds")


def cut_in_half(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_truncated_newest_checkpoint_is_named_and_the_run_goes_on_from_the_one_before(tmp_path, monkeypatch,
                                                                                          capfd):
    """The run stops with its second epoch logged (checkpoints of epochs 1 and 2). With both cut short the
    resume is one ``ConfigError`` line (``train.py`` prints it as one ``error:`` line, exit code 2: the
    FINISHED refusal of test_recovery.py checks that path of the entry point) and nothing changes; with
    the older one whole again, the resume names the newest in one line, goes on from the older one and
    trains epoch 2 again without logging it twice."""
    from zoo.config import print_errors
    from zoo.errors import ConfigError
    from zoo.training import StopTraining

    def stop_after_epoch_2(record, epoch):
        if epoch == 2:
            raise StopTraining("stopped after epoch 2 by the test")

    with pytest.raises(StopTraining):
        train_here(monkeypatch, tmp_path, TINY, on_epoch=stop_after_epoch_2)
    client, (run,) = runs(tmp_path)
    run_id, status = run.info.run_id, run.info.status
    assert status != "FINISHED"
    older, newest = sorted((tmp_path / "checkpoints" / run_id).glob("ckpt-*"))
    assert [s for s, _ in history(client, run_id, "train_loss")] == [1, 2]

    # No checkpoint can be read: one line says so; the run keeps its status, nothing is deleted.
    backup = tmp_path / "older-weights.npz"
    shutil.copyfile(older / "weights.npz", backup)
    cut_in_half(older / "weights.npz")
    cut_in_half(newest / "weights.npz")
    capfd.readouterr()
    with pytest.raises(ConfigError) as refused:
        train_here(monkeypatch, tmp_path, [*TINY, f"trainer.resume={run_id}"])
    print_errors(refused.value)
    err = capfd.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, err[-3000:]
    assert "none of the 2 checkpoints" in errors[0] and older.name in errors[0] and newest.name in errors[0]
    assert f"The run stays {status}" in errors[0]
    assert client.get_run(run_id).info.status == status
    assert older.is_dir() and newest.is_dir()

    # The older one readable again: the resume names the newest in one line and goes on from the older.
    shutil.copyfile(backup, older / "weights.npz")
    capfd.readouterr()
    train_here(monkeypatch, tmp_path, [*TINY, f"trainer.resume={run_id}"])
    out, err = capfd.readouterr()
    named = [line for line in err.splitlines() if newest.name in line]
    assert len(named) == 1 and "cannot be restored" in named[0] and "weights.npz" in named[0], err[-3000:]
    assert f"Resuming from {older}" in out and "(epoch 2," in out  # epoch 2 is trained again
    client, found = runs(tmp_path)
    assert [r.info.run_id for r in found] == [run_id]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["epochs_trained"] == 3
    for key in KEYS:
        assert [s for s, _ in history(client, run_id, key)] == [1, 2, 3], key  # each epoch exactly once


def test_a_checkpoint_writer_that_finds_the_disk_full_is_one_warning_and_the_run_finishes(
        mlflow_store, monkeypatch, capfd):
    """Every checkpoint write raises ENOSPC halfway through its first file (the low-level writer is
    patched; a tmpfs too small for one would need root): one warning naming the folder and the size
    a checkpoint needs, the run FINISHED with each epoch logged, nothing half written left behind."""
    from zoo.training import checkpoint, train

    def full_disk(path, arrays):
        with open(path, "wb") as f:
            f.write(b"\0" * 64)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(checkpoint, "_write_npz", full_disk)
    result = train(compose(["debug=smoke", "model=seq2seq", "model.hidden_size=16", "trainer.epochs=3",
                            "trainer.checkpoint_every_steps=1", "tracking.export=false", "tracking.attention_plots=0", "tracking.predictions=0"]))
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "not written to" in line]
    assert len(warnings) == 1, err[-3000:]
    assert warnings[0].startswith("warning: checkpoint at step 1 not written to ")
    assert "No space left on device" in warnings[0] and "a checkpoint needs about" in warnings[0]
    client = mlflow.MlflowClient(mlflow_store)
    run = client.get_run(result["run_id"])
    assert run.info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(result["run_id"], "train_loss")] == [1, 2, 3]
