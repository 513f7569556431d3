"""Stage ``fit``: the custom loop trains as Keras ``fit`` did (same losses on the same batches, same
weights), traces once for bucketed batches, stops early with the best weights, and refuses a
non-finite loss."""

import json

import numpy as np
import pytest

from conftest import compose

# seq2seq: the loop (zoo/training/fit.py) is the same for every sequence model, and seq2seq's step traces
# fastest; each test below traces a new model's step (the XLA tests further down keep their two RNN paths).
SMALL = ["debug=smoke", "model=seq2seq", "model.hidden_size=16", "data.train_size=96", "data.val_size=16",
         "trainer.batch_size=16", "trainer.steps_per_epoch=null", "trainer.epochs=2", "trainer.early_stopping_patience=0",
         "trainer.bucket_boundaries=[14,18]"]


def setup(overrides):
    from zoo.training.data import load_data
    from zoo.training.model import build
    from zoo.training.runtime import setup as runtime_setup

    cfg = compose(overrides)
    runtime = runtime_setup(cfg.trainer, int(cfg.seed))
    data = load_data(cfg, runtime.replicas)
    model, optimizer = build(cfg, data.task, runtime)
    return cfg, runtime, data, model, optimizer


def run_loop(cfg, runtime, data, model, optimizer, **kwargs):
    from zoo.training.fit import fit
    from zoo.training.signals import StopRequest

    logged = []
    result = fit(model, optimizer, data, runtime, cfg.trainer, metric="exact_match", val_metrics=lambda: {},
                 on_epoch=lambda record, epoch: logged.append((epoch, record)), stop=StopRequest(), **kwargs)
    return result, logged


# Checkpoints inside the epochs too (they change nothing the loop computes): the same run is the loop
# Keras' fit is compared with and the uninterrupted run a resume is compared with.
CHECKPOINTED = [*SMALL, "trainer.checkpoint_every_steps=2", "trainer.keep_checkpoints=100"]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The loop's run of ``CHECKPOINTED`` from its initial weights: (initial weights, result, logged
    records, model, optimizer, checkpoint directory)."""
    directory = tmp_path_factory.mktemp("checkpoints")
    cfg, runtime, data, model, optimizer = setup(CHECKPOINTED)
    initial = model.get_weights()
    result, logged = run_loop(cfg, runtime, data, model, optimizer, checkpoint_dir=str(directory))
    return initial, result, logged, model, optimizer, directory


def test_the_loop_gives_keras_fits_losses_and_weights_on_the_same_batches(straight):
    import keras
    import tensorflow as tf

    from zoo.training.losses import MaskedCrossEntropy
    from zoo.training.model import make_optimizer

    initial, result, logged, model, optimizer, _ = straight
    assert [epoch for epoch, _ in logged] == [1, 2]
    assert result.traces == 1  # bucketed batches of several shapes, one trace

    cfg, runtime, data, reference, _ = setup(SMALL)
    reference.set_weights(initial)
    reference.compile(optimizer=make_optimizer(cfg.optimizer, clipnorm=cfg.trainer.clipnorm),
                      loss=MaskedCrossEntropy())
    losses, val_losses = [], []
    for epoch in (1, 2):  # the loop's batches: epoch e shuffled with seed + 1000 (e - 1)
        # With a known length: on a bucketed dataset of unknown length, fit runs a step past the end,
        # which still advances the optimizer's iteration count (Adam's bias correction) by one.
        count = sum(1 for _ in data.train_batches(epoch))
        batches = data.train_batches(epoch).apply(tf.data.experimental.assert_cardinality(count))
        history = reference.fit(batches, validation_data=data.val_batches(), epochs=1, verbose=0, shuffle=False)
        losses.append(history.history["loss"][0])
        val_losses.append(history.history["val_loss"][0])
    assert [r["train_loss"] for _, r in logged] == pytest.approx(losses, rel=1e-5)
    assert [r["val_loss"] for _, r in logged] == pytest.approx(val_losses, rel=1e-5)
    assert int(optimizer.iterations.numpy()) == int(reference.optimizer.iterations.numpy()) == result.state.global_step
    for got, want in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert keras.mixed_precision.global_policy().name == "float32"


def test_early_stopping_restores_the_best_epochs_weights():
    cfg, runtime, data, model, optimizer = setup([*SMALL[:-2], "trainer.epochs=6", "trainer.early_stopping_patience=1",
                                                  "trainer.early_stopping_min_delta=100.0"])
    result, logged = run_loop(cfg, runtime, data, model, optimizer)
    # No decrease of 100 ever counts: epoch 1 stays the best, patience 1 stops after epoch 2.
    assert len(logged) == 2 and result.state.stopped == "early_stopping" and result.state.best_epoch == 0


def test_a_non_finite_loss_stops_with_the_step_and_advice():
    from zoo.training.fit import NonFiniteLoss

    # The default model, bahdanau: seq2seq's saturating GRUs stay finite at this learning rate.
    cfg, runtime, data, model, optimizer = setup([*[o for o in SMALL if o != "model=seq2seq"], "optimizer=sgd",
                                                  "optimizer.learning_rate=1e12", "trainer.clipnorm=null"])
    with pytest.raises(NonFiniteLoss, match=r"at step \d+ \(epoch \d\).*optimizer.learning_rate.*"
                                            r"trainer.precision=float32.*trainer.clipnorm"):
        run_loop(cfg, runtime, data, model, optimizer)


def test_a_loop_state_resumed_mid_epoch_ends_like_an_uninterrupted_one(straight):
    from zoo.training import checkpoint
    from zoo.training.fit import LoopState

    _, straight_result, _, straight_model, _, directory = straight
    weights = straight_model.get_weights()
    middle = [p for p in checkpoint.checkpoints(directory)
              if json.loads((p / "state.json").read_text())["step_in_epoch"] > 0]
    assert middle, "a checkpoint inside an epoch"
    cfg, runtime, data, model, optimizer = setup(CHECKPOINTED)
    saved, best = checkpoint.load(middle[0], model, optimizer)
    resumed, logged = run_loop(cfg, runtime, data, model, optimizer, state=LoopState(**saved), best_weights=best)
    assert [r["train_loss"] for r in resumed.state.history] == \
        [r["train_loss"] for r in straight_result.state.history]
    for got, want in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(got, want)


# The RNN decoders under XLA: teacher forcing runs over time in a while loop (luong's input feeding
# here; bahdanau's decoder takes the same loop), or in Keras' RNN layers (seq2seq). Tiny sizes, no
# dropout (XLA draws other random numbers), one source shape (no buckets): one XLA compilation per model.
# Each model is a path of its own (zoo's bounded time loop; Keras' RNN layers), so both stay; luong's
# encoder is one-directional (the decoder's loop is the claim; a second encoder RNN only made XLA's
# compilation longer).
XLA = ["debug=smoke", "trainer.bucket_boundaries=[]", "model.hidden_size=12", "model.dropout=0.0"]


@pytest.mark.slow  # an XLA compilation of the training step each: about 10-15 s of CPU on 2 cores
@pytest.mark.parametrize("name, extra", [("seq2seq", []), ("luong", ["model.input_feeding=true", "model.bidirectional=false"])])
def test_xla_trains_the_rnn_models_as_without_it_tracing_once(name, extra):
    runs = {}
    for jit in (False, True):
        cfg, runtime, data, model, optimizer = setup([*XLA, f"model={name}", *extra, f"trainer.jit_compile={str(jit).lower()}"])
        if jit:
            model.set_weights(runs[False][1])
        initial = model.get_weights()
        result, logged = run_loop(cfg, runtime, data, model, optimizer)
        runs[jit] = (result, initial, [r["train_loss"] for _, r in logged], [r["val_loss"] for _, r in logged],
                     model.get_weights())
    (plain, _, losses, val_losses, weights), (xla, _, xla_losses, xla_val_losses, xla_weights) = runs[False], runs[True]
    assert len(losses) == 2 and xla.state.global_step == plain.state.global_step == 4
    assert xla_losses == pytest.approx(losses, rel=1e-5)
    assert xla_val_losses == pytest.approx(val_losses, rel=1e-5)
    for got, want in zip(xla_weights, weights):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert xla.traces == plain.traces == 1
    assert xla.shapes == 1  # every batch padded to one shape: XLA compiled the step once
