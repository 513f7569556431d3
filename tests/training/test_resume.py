"""``trainer.resume``: which run continues, and the refusals (a real SQLite MLflow store)."""

import mlflow
import pytest

from zoo.config import flatten
from zoo.errors import ConfigError
from zoo.training import resume

from conftest import compose

BASE = ["debug=smoke"]


def make_run(uri, cfg, status):
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("attention-zoo")
    with mlflow.start_run() as run:
        mlflow.log_params({k: ("null" if v is None else str(v)) for k, v in flatten(cfg).items()})
        mlflow.set_tag("zoo.overrides", "debug=smoke")
    mlflow.MlflowClient(uri).set_terminated(run.info.run_id, status)
    return run.info.run_id


def test_a_killed_run_is_found_by_id_and_as_last(mlflow_store):
    cfg = compose(BASE)
    older = make_run(mlflow_store, cfg, "KILLED")
    make_run(mlflow_store, cfg, "FINISHED")
    assert resume.find_run(mlflow_store, "attention-zoo", older).info.run_id == older
    newer = make_run(mlflow_store, cfg, "FAILED")
    assert resume.find_run(mlflow_store, "attention-zoo", "last").info.run_id == newer


def test_finished_unknown_and_nothing_to_resume_are_refused(mlflow_store):
    cfg = compose(BASE)
    with pytest.raises(ConfigError, match="trainer.resume=last: experiment 'attention-zoo' .* no unfinished run"):
        resume.find_run(mlflow_store, "attention-zoo", "last")
    finished = make_run(mlflow_store, cfg, "FINISHED")
    with pytest.raises(ConfigError, match=f"trainer.resume={finished}: the run is FINISHED"):
        resume.find_run(mlflow_store, "attention-zoo", finished)
    with pytest.raises(ConfigError, match="trainer.resume=0123abc: no run with this id"):
        resume.find_run(mlflow_store, "attention-zoo", "0123abc")


def test_a_config_that_changes_the_model_is_refused_naming_the_key_and_both_values(mlflow_store):
    run_id = make_run(mlflow_store, compose([*BASE, "model.hidden_size=24"]), "KILLED")
    run = mlflow.MlflowClient(mlflow_store).get_run(run_id)
    resume.check_config(run, compose([*BASE, "model.hidden_size=24", "trainer.epochs=5", "trainer.verbose=1"]))
    with pytest.raises(ConfigError, match=r"model.hidden_size was 24 in the run and is 16 now"):
        resume.check_config(run, compose([*BASE, "model.hidden_size=16"]))
    with pytest.raises(ConfigError, match=r"seed was 42 in the run and is 1 now"):
        resume.check_config(run, compose([*BASE, "model.hidden_size=24", "seed=1"]))


def test_restore_takes_the_newest_readable_checkpoint_and_refuses_in_one_line_when_none_is(mlflow_store, tmp_path):
    """``resume.restore`` (before the run reopens): a cut-short newest checkpoint is passed over for the one
    before it; when none can be read, one ``ConfigError`` line names them and says the run keeps its status."""
    import keras
    import numpy as np

    from zoo.training import checkpoint

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    run = mlflow.MlflowClient(mlflow_store).get_run(make_run(mlflow_store, compose(BASE), "KILLED"))
    root = tmp_path / "checkpoints"
    assert resume.restore(run, str(root), model, optimizer) is None  # no checkpoint: a run from epoch 1
    for step in (1, 2):
        checkpoint.save(root / run.info.run_id, model, optimizer, {"global_step": step, "epoch": step})
    weights = root / run.info.run_id / "ckpt-000000002" / "weights.npz"
    weights.write_bytes(weights.read_bytes()[:50])
    restored = resume.restore(run, str(root), model, optimizer)
    assert restored.path.name == "ckpt-000000001" and restored.state["epoch"] == 1
    weights = root / run.info.run_id / "ckpt-000000001" / "weights.npz"
    weights.write_bytes(b"")
    with pytest.raises(ConfigError) as refused:
        resume.restore(run, str(root), model, optimizer)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"trainer.resume={run.info.run_id}: none of the 1 checkpoints")
    assert "The run stays KILLED and nothing was deleted" in message
    assert sorted(p.name for p in (root / run.info.run_id).iterdir()) == ["ckpt-000000001", "unreadable-ckpt-000000002"]
    assert np.isfinite(model.get_weights()[0]).all()
