"""Checkpoints: written atomically, pruned to the newest N, restored exactly (weights, optimizer
state, seed generators, Python and NumPy RNGs)."""

import json
import random

import numpy as np
import pytest


def tiny():
    import keras

    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dropout(0.5),
                              keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    model.compile(optimizer=optimizer, loss="mse")
    model.train_on_batch(np.ones((2, 3)), np.ones((2, 1)))  # moments and the dropout seed move
    return model, optimizer


def test_a_checkpoint_restores_everything_exactly(tmp_path):
    from zoo.training import checkpoint

    model, optimizer = tiny()
    random.seed(5), np.random.seed(6)
    path = checkpoint.save(tmp_path, model, optimizer, {"global_step": 7, "epoch": 1},
                           best_weights=model.get_weights())
    expected = [v.numpy().copy() for v in model.variables + optimizer.variables]
    draws = random.random(), np.random.rand()
    other, other_optimizer = tiny()
    other.train_on_batch(np.zeros((2, 3)), np.zeros((2, 1)))
    state, best = checkpoint.load(path, other, other_optimizer)
    assert state == {"global_step": 7, "epoch": 1}
    for want, got in zip(expected, other.variables + other_optimizer.variables):
        np.testing.assert_array_equal(want, got.numpy())
    assert (random.random(), np.random.rand()) == draws
    assert len(best) == len(model.get_weights())


def test_writes_are_atomic_and_only_the_newest_are_kept(tmp_path):
    from zoo.training import checkpoint

    model, optimizer = tiny()
    for step in (10, 20, 30):
        checkpoint.save(tmp_path, model, optimizer, {"global_step": step}, keep=2)
    (tmp_path / ".tmp-half-written").mkdir()  # what a kill during a write leaves
    assert [p.name for p in checkpoint.checkpoints(tmp_path)] == ["ckpt-000000020", "ckpt-000000030"]
    checkpoint.prune(tmp_path, 2)
    assert not list(tmp_path.glob(".tmp-*"))
    assert json.loads((checkpoint.latest(tmp_path) / "state.json").read_text())["global_step"] == 30


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    import keras

    from zoo.training import checkpoint

    model, optimizer = tiny()
    path = checkpoint.save(tmp_path, model, optimizer, {"global_step": 1})
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(5), keras.layers.Dropout(0.5),
                              keras.layers.Dense(1)])
    other_optimizer = keras.optimizers.Adam(0.01)
    other_optimizer.build(other.trainable_variables)
    with pytest.raises(ValueError, match="shape"):
        checkpoint.load(path, other, other_optimizer)


def three_checkpoints(tmp_path):
    """ckpt-10, -20, -30 of a model whose weights differ at each; returns (model, optimizer, weights at each)."""
    from zoo.training import checkpoint

    model, optimizer = tiny()
    saved = {}
    for step in (10, 20, 30):
        model.train_on_batch(np.full((2, 3), step / 10), np.ones((2, 1)))
        checkpoint.save(tmp_path, model, optimizer, {"global_step": step, "epoch": step // 10}, keep=3)
        saved[step] = [v.numpy().copy() for v in model.variables]
    return model, optimizer, saved


def cut_in_half(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_damaged_newest_checkpoint_is_named_set_aside_and_the_one_before_it_restored(tmp_path, capsys):
    """weights.npz cut to half (a full disk, an interrupted copy): one line names it; the previous
    checkpoint is restored; the damaged one is renamed, not deleted, so no pruning takes a good one for it."""
    from zoo.training import checkpoint

    model, optimizer, saved = three_checkpoints(tmp_path)
    cut_in_half(tmp_path / "ckpt-000000030" / "weights.npz")
    model.train_on_batch(np.zeros((2, 3)), np.zeros((2, 1)))
    path, state, _ = checkpoint.newest_readable(tmp_path, model, optimizer)
    assert path.name == "ckpt-000000020" and state["global_step"] == 20
    for want, got in zip(saved[20], model.variables):
        np.testing.assert_array_equal(want, got.numpy())
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "ckpt-000000030" in lines[0] and "weights.npz cannot be read" in lines[0], lines
    assert "resuming from ckpt-000000020" in lines[0]
    assert [p.name for p in checkpoint.checkpoints(tmp_path)] == ["ckpt-000000010", "ckpt-000000020"]
    assert (tmp_path / "unreadable-ckpt-000000030" / "weights.npz").exists()


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "missing state"])
def test_when_no_checkpoint_can_be_read_one_error_says_so_and_nothing_changes(tmp_path, damage):
    from zoo.training import checkpoint

    model, optimizer, _ = three_checkpoints(tmp_path)
    for path in checkpoint.checkpoints(tmp_path):
        if damage == "truncated":
            cut_in_half(path / "optimizer.npz")
        elif damage == "corrupt":
            data = bytearray((path / "weights.npz").read_bytes())
            data[100:140] = b"\xff" * 40
            (path / "weights.npz").write_bytes(bytes(data))
        else:
            (path / "state.json").write_text("{")
    before = sorted(p.name for p in tmp_path.iterdir())
    variables = [v.numpy().copy() for v in model.variables + optimizer.variables]
    with pytest.raises(checkpoint.Unreadable) as caught:
        checkpoint.newest_readable(tmp_path, model, optimizer)
    message = str(caught.value)
    assert "\n" not in message and "none of the 3 checkpoints" in message, message
    assert all(f"ckpt-0000000{n}0" in message for n in (1, 2, 3)), message
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing renamed or deleted
    for want, got in zip(variables, model.variables + optimizer.variables):
        np.testing.assert_array_equal(want, got.numpy())  # a half-read checkpoint changed nothing


def test_a_checkpoint_of_another_configuration_is_passed_over_for_an_older_one_that_fits(tmp_path):
    import keras

    from zoo.training import checkpoint

    model, optimizer, saved = three_checkpoints(tmp_path)
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(5), keras.layers.Dropout(0.5),
                              keras.layers.Dense(1)])
    other_optimizer = keras.optimizers.Adam(0.01)
    other_optimizer.build(other.trainable_variables)
    checkpoint.save(tmp_path, other, other_optimizer, {"global_step": 40, "epoch": 4}, keep=4)
    path, _, _ = checkpoint.newest_readable(tmp_path, model, optimizer)
    assert path.name == "ckpt-000000030"
    assert (tmp_path / "unreadable-ckpt-000000040").is_dir()


def test_a_checkpoint_that_cannot_be_written_is_one_warning_and_the_previous_ones_stay(tmp_path, capsys,
                                                                                       monkeypatch):
    """The low-level writer raises ENOSPC (a full disk) halfway through a file: the half-written
    checkpoint is removed, the previous ones stay whole, one warning names the folder and the space a
    checkpoint needs, later failures say nothing more, and the next write that works says so."""
    import errno

    from zoo.training import checkpoint

    model, optimizer = tiny()
    writer = checkpoint.Writer(tmp_path / "run", keep=2)
    for step in (10, 20):
        assert writer.save(model, optimizer, {"global_step": step, "epoch": 0}) is not None
    real = checkpoint._write_npz

    def full_disk(path, arrays):
        with open(path, "wb") as f:
            f.write(b"\0" * 64)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(checkpoint, "_write_npz", full_disk)
    for step in (30, 40, 50):
        assert writer.save(model, optimizer, {"global_step": step, "epoch": 0}) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: checkpoint at step 30 not written to "), err
    assert str((tmp_path / "run").absolute()) in err[0] and "No space left on device" in err[0]
    assert "a checkpoint needs about" in err[0] and "free there" in err[0] and "training goes on" in err[0]
    assert [p.name for p in checkpoint.checkpoints(tmp_path / "run")] == ["ckpt-000000010", "ckpt-000000020"]
    assert not list((tmp_path / "run").glob(".tmp-*"))
    checkpoint.load(tmp_path / "run" / "ckpt-000000020", model, optimizer)  # whole
    monkeypatch.setattr(checkpoint, "_write_npz", real)
    assert writer.save(model, optimizer, {"global_step": 60, "epoch": 1}).name == "ckpt-000000060"
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"Checkpoints are written to {(tmp_path / 'run').absolute()} again (ckpt-000000060)."], err


def test_a_folder_that_cannot_be_created_is_a_warning_too(tmp_path, capsys):
    from zoo.training import checkpoint

    model, optimizer = tiny()
    (tmp_path / "file").write_text("not a folder")
    assert checkpoint.Writer(tmp_path / "file" / "run").save(model, optimizer, {"global_step": 1, "epoch": 0}) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not written to" in err[0] and str(tmp_path / "file" / "run") in err[0], err
