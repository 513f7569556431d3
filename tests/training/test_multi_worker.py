"""Two workers on 127.0.0.1 with MultiWorkerMirroredStrategy (real processes, TF_CONFIG): the
same weights on both, the losses of one worker with the same global batch, one MLflow run
(the chief's), and a SavedModel that translates."""

import json
import os
import re
import socket
import subprocess
import sys

import mlflow
import pytest

from conftest import ROOT, compose, empty_store

pytestmark = pytest.mark.slow

# One model: the distribution code (zoo.training: runtime's strategy and pipelines, fit's replica step
# and all-reduces, the model and optimizer built under the strategy's scope, the chief-only run,
# checkpoints and export) is the same for every sequence model; the transformer and the RNNs both take
# the loop's features path (real_token_losses). luong with input feeding runs the most inside the
# replica step: the RNN loops (the fast path's own gradients), attention and a recurrent decoder state
# over time, beside mirrored embeddings. The transformer's fast layers (their own gradients too) train
# alike in one process (tests/fast/test_training.py, tests/fast/test_transformer.py). Each model here is
# two training processes and the one-worker reference trained in the test's own process, on 2 cores.
# Tiny sizes; dropout off: each worker draws its own masks, so only then are the losses those of one worker.
TINY = {"luong": ["model.embed_dim=8", "model.hidden_size=8", "model.dropout=0.0", "model.input_feeding=true"]}
MODELS = sorted(TINY)


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def overrides(model, strategy):
    return [f"model={model}", *TINY[model], "data.val_size=16", "data.test_size=16", "trainer.verbose=0",
            "trainer.batch_size=16", "trainer.epochs=2",
            "trainer.steps_per_epoch=3", "data.train_size=96", f"trainer.strategy={strategy}",
            "trainer.bucket_boundaries=[100]",  # one bucket: no partial batch among the first steps
            "tracking.log_pyfunc=false", "tracking.attention_plots=0", "tracking.predictions=0"]


def losses(uri):
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return client, runs


@pytest.mark.parametrize("model", MODELS)
def test_two_workers_agree_match_one_worker_and_record_one_run(model, tmp_path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - the SavedModel's tokenizer ops

    from training.test_fit import run_loop, setup
    from zoo import kernels

    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    uri = empty_store(tmp_path)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", MLFLOW_TRACKING_URI=uri)
    procs = [subprocess.Popen([sys.executable, str(ROOT / "train.py"), *overrides(model, "multi_worker")],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(env, TF_CONFIG=json.dumps({"cluster": cluster,
                                                                  "task": {"type": "worker", "index": i}})))
             for i in range(2)]
    # The single-worker reference trains here meanwhile: the same data, model and loop (zoo.training.fit)
    # with the default strategy, its per-epoch losses only (no MLflow run, no decoding, no export); this
    # process has TensorFlow loaded already, a third train.py would load it again.
    with kernels.using(compose([f"model={model}"]).kernels):  # what train.py runs with
        cfg, runtime, data, reference, optimizer = setup(overrides(model, "default"))
        _, logged = run_loop(cfg, runtime, data, reference, optimizer)
    outputs = [p.communicate(timeout=600) for p in procs]
    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    digests = [re.search(r"weights sha256 (\w+)", out).group(1) for out, _ in outputs]
    assert digests[0] == digests[1]

    client, runs = losses(uri)
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"  # the chief's only
    run_id = runs[0].info.run_id
    assert not (tmp_path / "checkpoints" / run_id).exists()  # finished: removed

    for key in ("train_loss", "val_loss"):
        two = [m.value for m in client.get_metric_history(run_id, key)]
        one = [record[key] for _, record in logged]
        assert len(two) == 2 and two == pytest.approx(one, rel=1e-4), key

    # The chief's SavedModel translates (loaded here: tests/test_end_to_end.py and others load
    # SavedModels in a fresh process without the zoo).
    saved = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="saved_model",
                                                dst_path=str(tmp_path / "artifacts"), tracking_uri=uri)
    loaded = tf.saved_model.load(saved)  # held: its functions use its variables
    out = loaded.translate(tf.constant(["9 may 2018", ""]))
    assert out["text"].shape == (2,) and out["attention"].dtype == tf.float32
