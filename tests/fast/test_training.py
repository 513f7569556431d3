"""The switch end to end: ``python train.py model=transformer debug=smoke kernels=reference`` and
``kernels=fast`` train the same model on the same batches to the same losses (float32 rounding apart).

``train()`` puts ``cfg.kernels`` in force before its lifecycle starts (and the run's params, the
flattened config, record it); the losses come from the lifecycle's training loop
(``zoo.training.fit``: data, model and optimizer built from the config, the traced step, 2 epochs of
``debug=smoke``), run here in each mode without the MLflow run, the decoding and scoring around it
(tests/training/ covers those), which do not change a training loss."""

import pytest

from zoo import kernels

from conftest import compose

# One layer each side: every layer runs the same replacements (two stacked layers, fast and reference,
# with gradients: tests/fast/test_transformer.py). One validation batch: one eval trace.
OVERRIDES = ["model=transformer", "debug=smoke", "model.num_layers=1", "data.val_size=8", "data.test_size=8"]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["transformer"])  # the RNNs: tests/fast/test_rnn.py, layer by layer
def test_fast_and_reference_training_end_with_the_same_losses(model, monkeypatch):
    from training.test_fit import run_loop, setup

    from zoo.config import flatten
    from zoo.fast.optimizers import FusedAdam
    from zoo.training import job
    from zoo.training.optimizers import Adam

    monkeypatch.setitem(kernels._state, "mode", None)  # train() sets the mode for the process: put it back after
    overrides = [o.replace("transformer", model) for o in OVERRIDES]
    in_force = {}
    with monkeypatch.context() as patched:  # train() up to its lifecycle: which mode the lifecycle runs in
        patched.setattr(job.lifecycle, "run", lambda cfg, kind, on_epoch, on_model: in_force.setdefault(
            cfg.kernels, (kernels.mode(), flatten(cfg)["kernels"])))
        for mode in kernels.MODES:
            job.train(compose([*overrides, f"kernels={mode}"]))
    assert in_force == {mode: (mode, mode) for mode in kernels.MODES}

    losses = {}
    for mode in kernels.MODES:
        with kernels.using(mode):  # as train() puts cfg.kernels in force
            cfg, runtime, data, network, optimizer = setup([*overrides, f"kernels={mode}"])
            result, logged = run_loop(cfg, runtime, data, network, optimizer)
        # the mode was in force: the fast path's fused Adam, the reference's Keras Adam
        assert type(optimizer) is (FusedAdam if mode == "fast" else Adam) and result.traces == 1
        losses[mode] = [(record["train_loss"], record["val_loss"]) for _, record in logged]
    assert len(losses["fast"]) == len(losses["reference"]) == 2  # debug=smoke: 2 epochs
    for (fast_train, fast_val), (train, val) in zip(losses["fast"], losses["reference"]):
        assert fast_train == pytest.approx(train, rel=1e-4) and fast_val == pytest.approx(val, rel=1e-4), losses
