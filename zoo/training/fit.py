"""Stage ``fit``: one training loop for every ``tf.distribute`` strategy.

Keras 3 ``model.fit`` fails under ``MultiWorkerMirroredStrategy`` (keras-team/keras#20585), so
the step is a ``tf.function`` that takes the next batch from a distributed iterator and runs
the replica step with ``strategy.run``; the default strategy and ``MirroredStrategy`` go the
same way. What ``fit`` did is kept: the loss and its per-epoch mean, gradient clipping, a
Keras progress bar, early stopping with the best weights restored, the time budget, and the
per-epoch validation decoding. Added: checkpoints, resume, signals and a non-finite-loss stop.

The steps are traced with autograph off (as the exported ``Translator``'s functions are): the
models and decoders write their loops with ``keras.ops`` / ``tf`` control flow, so autograph's
source conversion only cost time: about a fifth of a tiny run's CPU (tracing 14.3 -> 9.1 s for
``model=transformer debug=smoke``).

Loss, with global-batch semantics: every replica divides its summed token losses by the real
target tokens of the whole global batch, so the replicas' gradients add up to the gradient of
the global batch's mean token loss (one replica: ``MaskedCrossEntropy``, as ``fit`` used).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Dict, List, Optional

from zoo.training import checkpoint as checkpoints
from zoo.training.signals import Interrupted, StopRequest


class NonFiniteLoss(RuntimeError):
    """The training loss became NaN or infinite; the message says where and what to try."""


@dataclasses.dataclass
class LoopState:
    """Everything about the loop's progress a checkpoint must hold (JSON-serializable)."""

    epoch: int = 0  # epochs completed
    step_in_epoch: int = 0  # steps done in the epoch after ``epoch``
    global_step: int = 0
    loss_sum: float = 0.0  # sum over the current epoch's steps of loss * batch rows
    rows: float = 0.0  # rows of the current epoch's steps
    epoch_train_seconds: float = 0.0  # training time of the current epoch before the last resume
    elapsed_seconds: float = 0.0  # wall time of completed epochs (validation included), for max_minutes
    train_step_seconds: float = 0.0  # training time of completed epochs, for seconds per step
    train_steps: int = 0  # steps of completed epochs
    history: List[Dict[str, float]] = dataclasses.field(default_factory=list)
    best: Optional[float] = None  # early stopping: the best val_loss, its epoch (0-based), the wait
    best_epoch: int = 0
    wait: int = 0
    stopped: str = ""  # "", "early_stopping" or "max_minutes"
    steps_per_pass: Optional[int] = None  # steps in one pass over the training split, once known
    traces: int = 0
    logged_through: int = 0  # epochs the run already holds in MLflow: a resume from an older checkpoint
    #                          (the newest could not be read) trains them again without logging them twice


@dataclasses.dataclass
class FitResult:
    state: LoopState
    train_seconds: float  # wall time of this process's loop (validation included)
    traces: int  # of the training step, this process
    shapes: int  # distinct batch shapes the step ran on (with jit_compile, XLA compiles each once)


def _train_step(model, optimizer, strategy, label_smoothing: float, clipnorm: Optional[float], replicas: int,
                counter: Dict[str, int], jit_compile: bool):
    """``step(batch, stop) -> (loss, rows, stop, source_shape)``: one optimizer step on a global
    batch (from a distributed iterator); ``loss`` is the global batch's mean token loss, ``rows`` its sentence count,
    ``stop`` the sum of the workers' stop flags (so every worker stops after the same step)."""
    import keras
    import tensorflow as tf

    own_clipping = replicas > 1 and bool(clipnorm) and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    def replica_step(batch, stop):
        x, y = batch
        ctx = tf.distribute.get_replica_context()
        with tf.GradientTape() as tape:
            nll, mask = _token_losses(model, x, y, label_smoothing, jit_compile, training=True)
            tokens = tf.reduce_sum(mask)
            if replicas > 1:
                tokens = ctx.all_reduce(tf.distribute.ReduceOp.SUM, tokens)
            loss = tf.reduce_sum(nll * mask / tf.maximum(tokens, 1.0))
            if model.losses:
                loss += tf.add_n(model.losses) / replicas
            scaled = optimizer.scale_loss(loss)
        variables = model.trainable_variables
        grads = list(tape.gradient(scaled, variables))
        if own_clipping:  # clip the global gradient, as one replica would; the optimizer sums again
            grads = _clip_global(ctx, grads, clipnorm, replicas)
        optimizer.apply_gradients(zip(grads, variables))
        rows = tf.reduce_sum(tf.cast(tf.reduce_any(tf.not_equal(y, 0), axis=1), tf.float32))
        return loss, rows, tf.identity(stop), tf.shape(x[0])

    if jit_compile:
        replica_step = tf.function(replica_step, jit_compile=True, autograph=False)

    def step(batch, stop):
        counter["traces"] += 1  # runs only while tracing
        loss, rows, stop, shape = strategy.run(replica_step, args=(batch, stop))
        reduce = tf.distribute.ReduceOp.SUM
        shape = strategy.experimental_local_results(shape)[0]
        return (strategy.reduce(reduce, loss, axis=None), strategy.reduce(reduce, rows, axis=None),
                strategy.reduce(reduce, stop, axis=None), shape)

    return step  # compiled by ``fit`` with the input signature of the first epoch's iterator


def _token_losses(model, x, y, label_smoothing: float, jit_compile: bool, training: bool):
    """``(nll, mask)`` of a batch's target tokens, as ``losses.token_losses``: the loss is
    ``sum(nll * mask) / sum(mask)`` either way.

    A model that splits its output projection off (``Seq2SeqModel.supports_features``) is run to
    its features ``[B, T, F]``; only the real tokens' rows are projected onto the vocabulary and
    scored (``losses.real_token_losses``): the padding's share of the largest matmul and of the
    softmax cross-entropy is not computed. The same loss and gradient. Under XLA (static shapes)
    and for other models every position's logits are scored, padding masked."""
    from zoo.training.losses import real_token_losses, token_losses

    if not jit_compile and getattr(model, "supports_features", False):
        features = model(x, training=training, return_features=True)
        return real_token_losses(y, features, lambda rows: model.output_logits(rows, training=training),
                                 label_smoothing)
    logits = _forward(model, x, jit_compile) if training else model(x, training=False)
    return token_losses(y, logits, label_smoothing)


def _forward(model, x, jit_compile: bool):
    """``model(x, training=True)``; under XLA an RNN decoder's teacher forcing is traced as a while
    loop with a maximum trip count (``Seq2SeqModel.time_loop = "bounded"``), which XLA can
    differentiate, unlike ``keras.ops.scan``. Only this trace sees it: validation, plots and the
    export keep the scan."""
    if not jit_compile or getattr(model, "time_loop", None) is None:
        return model(x, training=True)
    previous = model.time_loop
    model.time_loop = "bounded"
    try:
        return model(x, training=True)
    finally:
        model.time_loop = previous


def make_train_step(model, optimizer, runtime, trainer):
    """``(step, counter)``: the training step ``fit`` runs, before compilation (``counter["traces"]``
    counts its traces). ``step(batch, stop) -> (loss, rows, stop, source_shape)``; ``zoo.bench``
    times this exact step."""
    counter = {"traces": 0}
    step = _train_step(model, optimizer, runtime.strategy, float(trainer.get("label_smoothing") or 0.0),
                       trainer.clipnorm, runtime.replicas, counter, bool(trainer.jit_compile))
    return step, counter


def _clip_global(ctx, grads, clipnorm: float, replicas: int):
    """Each variable's gradient clipped to ``clipnorm`` as one replica would clip the global batch's
    (Keras' ``clipnorm``), in a form the optimizer's own all-reduce (a sum) turns into it.

    Dense gradients are summed over replicas, clipped, and divided by ``replicas``. For
    ``IndexedSlices`` (embedding gradients) Keras takes the norm of the rows, repeated indices not
    summed; the rows of all replicas together are those of the global batch, so their squared
    norms are summed and each replica scales its own rows.
    """
    import tensorflow as tf

    total = tf.distribute.ReduceOp.SUM
    dense = [i for i, g in enumerate(grads) if g is not None and not isinstance(g, tf.IndexedSlices)]
    sparse = [i for i, g in enumerate(grads) if isinstance(g, tf.IndexedSlices)]
    out = list(grads)
    if dense:
        for i, g in zip(dense, ctx.all_reduce(total, [grads[i] for i in dense])):
            out[i] = tf.clip_by_norm(g, clipnorm) / replicas
    if sparse:
        squares = ctx.all_reduce(total, [tf.reduce_sum(tf.square(grads[i].values)) for i in sparse])
        for i, square in zip(sparse, squares):
            norm = tf.sqrt(square)
            scale = clipnorm / tf.maximum(norm, clipnorm)
            g = grads[i]
            out[i] = tf.IndexedSlices(g.values * tf.cast(scale, g.values.dtype), g.indices, g.dense_shape)
    return out


def _eval_step(model, label_smoothing: float, spec):
    """``(loss, rows)`` of one validation batch, as ``fit``'s validation computed it. Traced once for
    the batches' ``spec`` (the dataset's ``element_spec``: lengths unknown), not once for the first
    batch's shape and again for the shapes that follow."""
    import tensorflow as tf

    @tf.function(input_signature=list(spec), autograph=False)
    def step(x, y):
        nll, mask = _token_losses(model, x, y, label_smoothing, jit_compile=False, training=False)
        loss = tf.reduce_sum(nll * mask / tf.maximum(tf.reduce_sum(mask), 1.0))
        if model.losses:
            loss += tf.add_n(model.losses)
        return loss, tf.cast(tf.shape(y)[0], tf.float32)

    return step


def _agree(strategy, flag: bool) -> bool:
    """True on every worker when ``flag`` is True on any (decisions from wall clocks)."""
    import tensorflow as tf

    value = strategy.run(lambda: tf.constant(1.0 if flag else 0.0))
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)) > 0


def fit(model, optimizer, data, runtime, trainer, *, metric: str, val_metrics: Callable[[], Dict[str, float]],
        on_epoch: Callable[[Dict[str, float], int], None], stop: StopRequest,
        checkpoint_dir: Optional[str] = None, state: Optional[LoopState] = None,
        best_weights: Optional[list] = None) -> FitResult:
    """Trains until ``trainer.epochs``, early stopping or the time budget; returns the loop state.

    ``on_epoch(record, epoch)`` logs an epoch's record (chief only). ``state`` and
    ``best_weights`` continue a run from a checkpoint. Raises ``Interrupted`` on a signal
    (after a checkpoint) and ``NonFiniteLoss`` when the loss becomes NaN or infinite.
    """
    import keras
    import numpy as np
    import tensorflow as tf

    state = state or LoopState()
    strategy = runtime.strategy
    counter = {"traces": 0}
    smoothing = float(trainer.get("label_smoothing") or 0.0)
    step = _train_step(model, optimizer, strategy, smoothing, trainer.clipnorm, runtime.replicas, counter,
                       bool(trainer.jit_compile))
    val_ds = data.val_batches()
    eval_step = _eval_step(model, smoothing, val_ds.element_spec)
    every = int(trainer.checkpoint_every_steps) if trainer.get("checkpoint_every_steps") else None
    keep = int(trainer.keep_checkpoints)
    patience = int(trainer.early_stopping_patience or 0)
    min_delta = float(trainer.early_stopping_min_delta or 0.0)
    budget = float(trainer.max_minutes) * 60.0 if trainer.get("max_minutes") else None
    verbose, epochs = int(trainer.verbose), int(trainer.epochs)
    shapes = set()
    traces_before = state.traces

    writer = checkpoints.Writer(checkpoint_dir, keep) if runtime.is_chief and checkpoint_dir else None

    def save():  # a checkpoint that cannot be written is a warning; training goes on (checkpoint.Writer)
        if writer is not None:
            state.traces = traces_before + counter["traces"]
            writer.save(model, optimizer, dataclasses.asdict(state), best_weights)

    def distributed(epoch, skip):
        def dataset_fn(context):
            ds = data.train_batches(epoch, skip)
            if context.num_input_pipelines > 1:
                ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
            return ds

        return strategy.distribute_datasets_from_function(dataset_fn)

    loop_started = time.perf_counter()
    no_stop = tf.constant(0.0)
    compiled = None
    for epoch in range(state.epoch + 1, epochs + 1):
        if state.stopped:
            break
        if verbose:
            print(f"Epoch {epoch}/{epochs}", flush=True)
        target = data.steps_per_epoch or state.steps_per_pass  # unknown in epoch 1 (bucketed batches)
        bar = keras.utils.Progbar(target, verbose=verbose, unit_name="step",
                                  stateful_metrics=["loss", "train_tokens_per_sec", "val_loss", f"val_{metric}"])
        epoch_started = time.perf_counter() - state.epoch_train_seconds
        iterator = iter(distributed(epoch, state.step_in_epoch))
        while True:
            flag = tf.constant(1.0) if stop.requested else no_stop
            # The batch is taken here, not inside the step: a step run past the end of the data
            # would still advance the optimizer's iteration count, which depends on no batch.
            batch = next(iterator, None)
            if batch is None:
                break
            if compiled is None:  # one trace: the signature has None for every varying length
                compiled = tf.function(step, input_signature=[iterator.element_spec, tf.TensorSpec([], tf.float32)],
                                       autograph=False)
            loss, rows, stopping, shape = compiled(batch, flag)
            loss, rows = float(loss), float(rows)
            if not math.isfinite(loss):
                raise NonFiniteLoss(
                    f"The training loss is {loss} at step {state.global_step + 1} (epoch {epoch}); training "
                    f"stopped and nothing was exported. Try a lower optimizer.learning_rate (now "
                    f"{_learning_rate(optimizer)}), trainer.precision=float32 (now {runtime.precision}) or "
                    f"gradient clipping, e.g. trainer.clipnorm=1.0 (now {trainer.clipnorm}).")
            if trainer.jit_compile:
                shapes.add(tuple(shape.numpy()))
            state.loss_sum += loss * rows
            state.rows += rows
            state.step_in_epoch += 1
            state.global_step += 1
            if verbose == 1:
                bar.update(state.step_in_epoch, [("loss", state.loss_sum / max(state.rows, 1.0))], finalize=False)
            if float(stopping) > 0:
                state.epoch_train_seconds = time.perf_counter() - epoch_started
                state.epoch = epoch - 1
                save()
                raise Interrupted(stop.signum or 15)
            if every and state.global_step % every == 0:
                state.epoch_train_seconds = time.perf_counter() - epoch_started
                state.epoch = epoch - 1
                save()
        train_seconds = time.perf_counter() - epoch_started
        if state.steps_per_pass is None and not data.steps_per_epoch and state.step_in_epoch:
            state.steps_per_pass = state.step_in_epoch  # the bar's target from now on

        val_sum, val_rows = 0.0, 0.0
        for x, y in val_ds:
            loss, rows = eval_step(x, y)
            val_sum += float(loss) * float(rows)
            val_rows += float(rows)
        record = {"train_loss": state.loss_sum / max(state.rows, 1.0),
                  "train_tokens_per_sec": data.tokens_per_epoch / max(train_seconds, 1e-9)}
        val_loss = val_sum / max(val_rows, 1.0)
        record["val_loss"] = val_loss
        if runtime.is_chief:
            for name, value in val_metrics().items():
                record[f"val_{name}"] = float(value)
        epoch_seconds = time.perf_counter() - epoch_started
        record["epoch_seconds"] = epoch_seconds

        # Early stopping on val_loss, as keras.callbacks.EarlyStopping(restore_best_weights=True).
        index = epoch - 1
        if patience:
            if best_weights is None:
                best_weights, state.best_epoch = model.get_weights(), index
            state.wait += 1
            if state.best is None or val_loss + min_delta < state.best:  # a decrease of more than min_delta
                state.best, state.best_epoch, state.wait = val_loss, index, 0
                best_weights = model.get_weights()
            elif state.wait >= patience and index > 0:
                state.stopped = "early_stopping"
        state.elapsed_seconds += epoch_seconds
        out_of_time = budget is not None and state.elapsed_seconds + epoch_seconds > budget
        requested = stop.requested
        if runtime.pipelines > 1:  # every worker decides alike, or the collectives would hang
            out_of_time, requested = _agree(strategy, out_of_time), _agree(strategy, requested)
            if _agree(strategy, bool(state.stopped)) and not state.stopped:
                state.stopped = "early_stopping"
        if out_of_time and not state.stopped:
            state.stopped = "max_minutes"
        state.train_step_seconds += train_seconds
        state.train_steps += state.step_in_epoch
        state.history.append(record)
        seen = state.step_in_epoch
        state.epoch, state.step_in_epoch = epoch, 0
        state.loss_sum = state.rows = state.epoch_train_seconds = 0.0
        save()  # before the record goes to MLflow: a resume logs what the kill left unlogged
        if runtime.is_chief and epoch > state.logged_through:
            on_epoch(record, epoch)
        if verbose:  # the epoch's line, as fit's ProgbarLogger ends it
            if bar.target is None:
                bar.target = seen
            shown = [("loss", record["train_loss"]), ("train_tokens_per_sec", record["train_tokens_per_sec"])]
            bar.update(seen, shown + [(k, v) for k, v in record.items() if k.startswith("val_")], finalize=True)
        if requested:
            raise Interrupted(stop.signum or 15)
    if best_weights is not None:
        model.set_weights(best_weights)
        if state.stopped == "early_stopping" and verbose:
            print(f"Epoch {state.epoch}: early stopping; restored the weights of epoch {state.best_epoch + 1}.",
                  flush=True)
    if not all(np.all(np.isfinite(w)) for w in model.get_weights()):
        raise NonFiniteLoss("The trained weights hold NaN or infinite values; nothing was exported. Try a lower "
                            "optimizer.learning_rate, trainer.precision=float32 or trainer.clipnorm=1.0.")
    state.traces = traces_before + counter["traces"]
    return FitResult(state=state, train_seconds=time.perf_counter() - loop_started, traces=counter["traces"],
                     shapes=len(shapes))


def _learning_rate(optimizer) -> str:
    value = getattr(optimizer, "inner_optimizer", optimizer).learning_rate
    try:
        return f"{float(value.numpy() if hasattr(value, 'numpy') else value):g}"
    except (TypeError, ValueError):
        return "a schedule"
