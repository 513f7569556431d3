"""The switch end to end: ``python train.py model=transformer debug=smoke kernels=reference`` and
``kernels=fast`` train the same model on the same batches to the same losses (float32 rounding apart)."""

import pytest

from zoo import kernels

from conftest import compose, empty_store


@pytest.mark.slow
@pytest.mark.parametrize("model", ["transformer"])  # the RNNs: tests/fast/test_rnn.py, layer by layer
def test_fast_and_reference_training_end_with_the_same_losses(model, tmp_path, monkeypatch):
    import mlflow

    from zoo.training import train

    monkeypatch.setitem(kernels._state, "mode", None)  # train() sets the mode for the process: put it back after
    uri = empty_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    client = mlflow.MlflowClient(uri)
    losses = {}
    for mode in ("reference", "fast"):
        result = train(compose([f"model={model}", "debug=smoke", f"kernels={mode}", "tracking.export=false",
                                "tracking.attention_plots=0", f"trainer.checkpoint_dir={tmp_path / mode}",
                                # what the losses do not depend on: one validation batch (one eval trace),
                                # a shorter test split, no predictions.csv
                                "data.val_size=8", "data.test_size=8", "tracking.predictions=0"]))
        assert client.get_run(result["run_id"]).data.params["kernels"] == mode
        losses[mode] = [m.value for m in sorted(client.get_metric_history(result["run_id"], "train_loss"),
                                                  key=lambda m: m.step)]
    assert len(losses["fast"]) == len(losses["reference"]) == 2  # debug=smoke: 2 epochs
    assert losses["fast"] == pytest.approx(losses["reference"], rel=1e-4), losses
