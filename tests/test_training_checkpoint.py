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
