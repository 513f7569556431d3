"""Stage ``log``: the run around the stages ends FINISHED, FAILED (with the error's first line)
or KILLED (with the signal), and a resume logs exactly the epochs a kill left unlogged."""

import signal

import mlflow
import pytest

from zoo.training import log
from zoo.training.signals import Interrupted

from conftest import compose


class Tokenizer:
    vocab_size = 7


def tiny_task():
    from zoo.data.task import Task

    return Task("tiny", {"train": (["a b", "c"], ["x", "y"]), "test": (["d"], ["z"])}, Tokenizer(), Tokenizer(),
                max_source_length=4, max_target_length=4)


class Model:
    def count_params(self):
        return 10


def open_run(uri, **kwargs):
    return log.open_run(compose(["debug=smoke"]), tiny_task(), Model(), uri, "checkpoints", **kwargs)


def status(uri, run_id):
    return mlflow.MlflowClient(uri).get_run(run_id)


def test_a_run_ends_finished_failed_or_killed_with_a_tag(mlflow_store):
    with open_run(mlflow_store) as finished:
        log.log_epoch({"train_loss": 1.0}, 1)
    run = status(mlflow_store, finished)
    assert run.info.status == "FINISHED" and run.data.tags["zoo.checkpoint_dir"].endswith(f"checkpoints/{finished}")
    assert run.data.params["trainer.epochs"] == "2" and run.data.metrics["num_params"] == 10

    with pytest.raises(RuntimeError):
        with open_run(mlflow_store) as failed:
            raise RuntimeError("disk full\nmore detail")
    run = status(mlflow_store, failed)
    assert run.info.status == "FAILED" and run.data.tags["zoo.error"] == "RuntimeError: disk full"

    with pytest.raises(Interrupted):
        with open_run(mlflow_store) as killed:
            raise Interrupted(signal.SIGTERM)
    run = status(mlflow_store, killed)
    assert run.info.status == "KILLED" and "SIGTERM" in run.data.tags["zoo.stopped"]


def test_a_resumed_run_logs_the_unlogged_epochs_once(mlflow_store):
    with pytest.raises(Interrupted):
        with open_run(mlflow_store) as run_id:
            log.log_epoch({"train_loss": 3.0}, 1)
            raise Interrupted(signal.SIGTERM)
    killed = status(mlflow_store, run_id)
    with open_run(mlflow_store, resume_run=killed) as again:
        assert again == run_id
        log.log_unlogged_epochs(run_id, [{"train_loss": 3.0}, {"train_loss": 2.0}])
    run = status(mlflow_store, run_id)
    assert run.info.status == "FINISHED" and run.data.tags["zoo.resumes"] == "1" and "zoo.stopped" not in run.data.tags
    history = mlflow.MlflowClient(mlflow_store).get_metric_history(run_id, "train_loss")
    assert [(m.step, m.value) for m in history] == [(1, 3.0), (2, 2.0)]
