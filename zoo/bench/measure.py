"""The measurements: the machine, matmul FLOP/s, training steps, decoding, SavedModel latency, input wait."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import tempfile
import time
from typing import Dict, List

from zoo import kernels
from zoo.bench import flops as flop_counts
from zoo.bench import references
from zoo.environ import onednn_enabled
from zoo.tokens import PAD_ID


def machine() -> Dict[str, object]:
    """The CPU (model name, cores, AVX2 / AVX-512 / AMX flags), TensorFlow and Keras versions, whether
    TensorFlow runs its oneDNN kernels, the threads, the date."""
    import keras
    import tensorflow as tf

    flags, model = set(), platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and model in ("", platform.machine(), platform.processor()):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags.update(line.split(":", 1)[1].split())
    except OSError:
        pass
    gpus = tf.config.list_physical_devices("GPU")
    return {"cpu": model, "cores": os.cpu_count(), "avx2": "avx2" in flags, "avx512": "avx512f" in flags,
            "avx512_bf16": "avx512_bf16" in flags, "amx": "amx_bf16" in flags and "amx_tile" in flags,
            "gpu": ", ".join(g.name for g in gpus) or "none", "tensorflow": tf.__version__,
            "keras": keras.__version__, "python": platform.python_version(),
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),  # 0: TensorFlow's default
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
            "onednn": onednn_enabled(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def describe(m: Dict[str, object]) -> str:
    isa = ", ".join(name for name, key in (("AVX2", "avx2"), ("AVX-512", "avx512"), ("AVX512-BF16", "avx512_bf16"),
                                             ("AMX", "amx")) if m[key]) or "no AVX2"
    missing = [name for name, key in (("AVX-512", "avx512"), ("AMX", "amx")) if not m[key]]
    tail = f"; no {' or '.join(missing)}" if missing else ""
    threads = "; ".join(f"{m[key]} {what} thread(s)" for key, what in (("intra_op_threads", "intra-op"),
                                                                       ("inter_op_threads", "inter-op"))
                        if m.get(key))
    onednn = {True: "; oneDNN on", False: "; oneDNN off"}.get(m.get("onednn"), "")
    return (f"{m['cpu']}, {m['cores']} cores ({isa}{tail}); GPU: {m['gpu']}; TensorFlow {m['tensorflow']}, "
            f"Keras {m['keras']}{onednn}{'; ' + threads if threads else ''}; {m['date']}")


def matmul_flops(dtype: str, n: int = 1024, repeats: int = 10) -> float:
    """The machine's matmul FLOP/s for ``dtype`` (float32 | bfloat16): best of ``repeats`` timed products."""
    import tensorflow as tf

    a = tf.cast(tf.random.normal([n, n]), dtype)
    b = tf.cast(tf.random.normal([n, n]), dtype)
    f = tf.function(lambda: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)), autograph=False)
    f().numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        f().numpy()
        best = min(best, time.perf_counter() - start)
    return 2.0 * n ** 3 / best


def fixed_batches(task, batch_size: int, count: int, seed: int):
    """``count`` full training batches (bucketed and shuffled as in training), held in memory."""
    import tensorflow as tf

    from zoo.data import make_dataset

    ds = make_dataset(task, "train", batch_size, shuffle=True, seed=seed).repeat()
    ds = ds.filter(lambda x, y: tf.shape(y)[0] == batch_size).take(count)
    return list(ds)


def pad_to_one_shape(batches):
    """Every batch padded to the longest source and target lengths of ``batches``: XLA compiles once.
    The padding's work is counted against the variant (tokens/s counts real tokens only)."""
    import tensorflow as tf

    source_to = max(int(s.shape[1]) for (s, _), _ in batches)
    target_to = max(int(t.shape[1]) for _, t in batches)

    def pad(t, to):
        return tf.pad(t, [[0, 0], [0, to - int(t.shape[1])]])

    return [((pad(s, source_to), pad(ti, target_to)), pad(to, target_to)) for (s, ti), to in batches]


def lengths(batches):
    """``(source_lengths, target_lengths)`` of the real tokens of every sentence of ``batches``."""
    import numpy as np

    src, tgt = [], []
    for (source, _), target_out in batches:
        src.append(np.sum(source.numpy() != PAD_ID, axis=1))
        tgt.append(np.sum(target_out.numpy() != PAD_ID, axis=1))
    return np.concatenate(src), np.concatenate(tgt)


class Trainee:
    """A model, its optimizer and the project's compiled training step (``zoo.training.fit``), built
    and traced under one ``kernels`` mode (``zoo.kernels``: the mode is read when the step is traced,
    so each mode has its own model, optimizer and step)."""

    def __init__(self, name, kind, model, optimizer, step, batches, forward_flops, mode=kernels.FAST):
        self.name, self.kind, self.model, self.optimizer = name, kind, model, optimizer
        self.step, self.batches, self.forward_flops, self.mode = step, batches, forward_flops, mode
        self.rounds: List[float] = []

    def run(self, batches=None):
        import tensorflow as tf

        stop = tf.constant(0.0)
        loss = None
        with kernels.using(self.mode):  # the first call traces the step: under this trainee's mode
            for batch in batches if batches is not None else self.batches:
                loss, _, _, _ = self.step(batch, stop)
                float(loss)  # as the loop does each step: the step is finished here
        return float(loss)


def make_trainee(name, kind, build, batches, learning_rate, precision="float32", jit_compile=False,
                 mode=kernels.FAST):
    """Builds ``build()`` under ``precision`` and the ``kernels`` ``mode``, and wraps it with the
    training step ``fit`` runs (traced under ``mode`` on its first run)."""
    import keras
    import tensorflow as tf
    from omegaconf import OmegaConf

    from zoo.training.fit import make_train_step
    from zoo.training.model import make_optimizer
    from zoo.training.runtime import Runtime

    keras.mixed_precision.set_global_policy(precision)
    try:
        with kernels.using(mode):  # the model, and the optimizer (its fast replacement is chosen as it is made)
            model, forward_flops = build()
            runtime = Runtime(strategy=tf.distribute.get_strategy(), device="cpu", precision=precision, replicas=1,
                              pipelines=1, is_chief=True, worker="chief")
            trainer = OmegaConf.create({"label_smoothing": 0.0, "clipnorm": 1.0, "jit_compile": bool(jit_compile)})
            optimizer = make_optimizer(OmegaConf.create({"name": "adam", "learning_rate": learning_rate}),
                                       clipnorm=1.0)
            optimizer.build(model.trainable_variables)
            step, _ = make_train_step(model, optimizer, runtime, trainer)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    spec = tf.data.Dataset.from_tensors(batches[0]).element_spec
    # As ``fit`` traces: lengths vary; with XLA the batches are padded to full rows, so the batch
    # size is static (an RNN decoder's bounded time loop needs it: its gradient under XLA keeps
    # only compile-time shapes).
    rows = {int(y.shape[0]) for _, y in batches}
    batch = rows.pop() if jit_compile and len(rows) == 1 else None
    spec = tf.nest.map_structure(lambda s: tf.TensorSpec([batch, None], s.dtype), spec)
    compiled = tf.function(step, input_signature=[spec, tf.TensorSpec([], tf.float32)], autograph=False)
    return Trainee(name, kind, model, optimizer, compiled, batches, forward_flops, mode)


def train_throughput(trainees: List[Trainee], rounds: int, warmup: int) -> Dict[str, Dict[str, Dict[str, object]]]:
    """Interleaved timing: in every round each trainee runs each of its batches once, step by step in
    turn (batch 1 for A, B, ..., then batch 2 ...), so a load that comes and goes on a shared machine
    slows every model alike within the round; a round's time per trainee is the sum of its steps, and
    the median round counts. The same model under two ``kernels`` modes is two trainees, stepped in
    turn like any other pair. Returns ``{mode: {name: row}}``."""
    for trainee in trainees:
        trainee.run(trainee.batches[:warmup])
    for _ in range(rounds):
        spent = [0.0] * len(trainees)
        for index in range(max(len(t.batches) for t in trainees)):
            for k, trainee in enumerate(trainees):
                if index < len(trainee.batches):
                    start = time.perf_counter()
                    trainee.run(trainee.batches[index:index + 1])
                    spent[k] += time.perf_counter() - start
        for trainee, seconds in zip(trainees, spent):
            trainee.rounds.append(seconds)
    out: Dict[str, Dict[str, Dict[str, object]]] = {}
    for trainee in trainees:
        src, tgt = lengths(trainee.batches)
        seconds = statistics.median(trainee.rounds)
        steps = len(trainee.batches)
        row = {"kind": trainee.kind, "params": int(trainee.model.count_params()), "steps": steps,
               "step_ms": 1000.0 * seconds / steps, "tokens_per_s": float(tgt.sum()) / seconds,
               "train_flops_per_step": flop_counts.training_flops(trainee.forward_flops(src, tgt)) / steps
               if trainee.forward_flops else None,
               "rounds_s": [round(r, 4) for r in trainee.rounds]}
        row["flop_per_s"] = row["train_flops_per_step"] / (seconds / steps) if row["train_flops_per_step"] else None
        out.setdefault(trainee.mode, {})[trainee.name] = row
    return out


def zoo_builder(name, overrides, task, seed):
    """``build() -> (model, forward_flops)`` for a zoo model, built as ``python train.py`` builds it."""
    import keras

    from zoo.config import compose_train
    from zoo.training.model import build_model

    cfg = compose_train([f"model={name}", *overrides])

    def build():
        keras.utils.set_random_seed(seed)
        model = build_model(cfg, task)
        return model, lambda s, t: flop_counts.model_forward(model, s, t)

    return build


def reference_builder(name, sizes, task, seed):
    import keras

    def build():
        keras.utils.set_random_seed(seed)
        model = references.create(name, task.source_tokenizer.vocab_size, task.target_tokenizer.vocab_size, sizes)
        v = task.target_tokenizer.vocab_size
        if name == "keras_transformer":
            def forward(s, t):
                return flop_counts.transformer_forward(s, t, sizes["embed_dim"], sizes["intermediate_dim"],
                                                       sizes["num_layers"], v)
        else:
            def forward(s, t):
                return flop_counts.tutorial_rnn_forward(s, t, sizes["embed_dim"], sizes["units"],
                                                        sizes["rnn_layers"], v)
        return model, forward

    return build


def _best_alternating(fns, rounds, times=None):
    """``{name: best seconds}`` of ``fns`` (name -> callable), each called once to warm up, then in
    turn for ``rounds`` rounds: a slow moment of the machine falls on all of them alike, so the
    ratio of two bests is steadier than that of bests taken one after the other. ``times`` (a
    dict), when given, gets every round's seconds: ``{name: [round 1, round 2, ...]}``."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            spent = time.perf_counter() - start
            best[name] = min(best[name], spent)
            if times is not None:
                times.setdefault(name, []).append(spent)
    return best


def _in_mode(mode, fn):
    """``fn`` called under the ``kernels`` ``mode``: a ``tf.function`` in it is traced under that mode on
    its first call, and keeps it."""
    def call():
        with kernels.using(mode):
            return fn()

    return call


def _searches(model, max_length: int, recompute_tokens: int):
    """The decoding functions the bench times, fresh (untraced) ``tf.function``s: one set per mode."""
    import tensorflow as tf

    from zoo.decoding import beam_search, greedy_decode, sample_decode
    from zoo.decoding.full_recompute import full_recompute_greedy

    def compiled(fn):
        return tf.function(fn, autograph=False)

    return {
        "greedy": compiled(lambda s: greedy_decode(model, s, max_length)),
        "beam4": compiled(lambda s: beam_search(model, s, max_length, beam_size=4, nbest=False)["ids"]),
        "sample": compiled(lambda s: sample_decode(model, s, max_length, temperature=0.8, top_p=0.9)),
        # The searches at equal length, <eos> off (``fixed``): what a sentence costs, apart from when
        # each search stops (the bench's briefly trained models stop early and at different steps).
        "greedy_fixed": compiled(lambda s: greedy_decode(model, s, max_length, eos_id=-1)[0]),
        "beam4_fixed": compiled(lambda s: beam_search(model, s, max_length, beam_size=4, eos_id=-1, nbest=False)["ids"]),
        # Greedy on four rows per sentence over one encoding: the model's own work in beam-4's steps,
        # with an argmax for a ranking; beam-4 over it is the search's own overhead.
        "greedy_x4_fixed": compiled(lambda s: greedy_decode(_EncodedOnce(model, 4), s, max_length, eos_id=-1)[0]),
        "cached": compiled(lambda s: greedy_decode(model, s, recompute_tokens, eos_id=-1)[0]),
        "full": compiled(lambda s: full_recompute_greedy(model, s, recompute_tokens, eos_id=-1)[0])}


def decoding(model, task, batch: int, recompute_tokens: int, recompute_batch: int, latency_calls: int,
             fixed_rounds: int, modes=(kernels.FAST,)) -> Dict[str, Dict[str, object]]:
    """``{mode: row}``: greedy / beam-4 / sampling sentences/s, the searches at equal length (beam-4
    against greedy on one row and on four rows per sentence; one sentence alone), cached vs full
    recompute, SavedModel translate p50/p95, for each ``kernels`` mode of ``modes`` on the same
    weights. Each mode traces its own functions; every measurement alternates the modes (and the
    searches) call by call, so their ratios saw the same moments of the machine."""
    import numpy as np
    import tensorflow as tf

    from zoo.data.task import encode
    from zoo.export.translator import Translator

    sources = tf.cast(encode(task, "test")[0].to_tensor()[:batch], tf.int32)
    n = int(sources.shape[0])
    steps = task.max_target_length
    fns = {mode: _searches(model, steps, recompute_tokens) for mode in modes}
    rows = {mode: {"fixed_steps": int(steps)} for mode in modes}

    def timed(calls, rounds, times=None):
        """``{(mode, key): best seconds}`` of ``calls`` (key -> (function name, input)) in every mode,
        alternating key by key and mode by mode."""
        def numpy(out):
            return tf.nest.map_structure(lambda t: t.numpy(), out)

        return _best_alternating({(mode, key): _in_mode(mode, lambda f=fns[mode][name], x=x: numpy(f(x)))
                                  for key, (name, x) in calls.items() for mode in modes}, rounds, times)

    for (mode, key), seconds in timed({k: (k, sources) for k in ("greedy", "beam4", "sample")}, 3).items():
        rows[mode][f"{key}_sent_per_s"] = n / seconds
    one = sources[:1]  # one sentence alone (interactive use): a step reads each weight for one row or four
    rounds: Dict[object, List[float]] = {}
    fixed = timed({"greedy": ("greedy_fixed", sources), "beam4": ("beam4_fixed", sources),
                   "greedy_x4": ("greedy_x4_fixed", tf.repeat(sources, 4, axis=0)),
                   "greedy_1": ("greedy_fixed", one), "beam4_1": ("beam4_fixed", one)}, fixed_rounds, rounds)
    for (mode, key), seconds in fixed.items():
        rows[mode][f"{key}_fixed_ms"] = 1000.0 * seconds
    for mode in modes:  # each round's ratio (its two calls one after the other): the spread of the bests' ratio
        for over in ("greedy", "greedy_x4"):
            rows[mode][f"beam4_over_{over}_rounds"] = [beam / other for beam, other in
                                                      zip(rounds[(mode, "beam4")], rounds[(mode, over)])]
    small = sources[:recompute_batch]
    for key, repeats in (("cached", 3), ("full", 1)):
        for (mode, _), seconds in timed({key: (key, small)}, repeats).items():
            rows[mode][f"{key}_s"] = seconds

    texts = list(task.splits["test"][0][:batch])
    ten = [t for t in task.splits["test"][0] if len(t.split()) == 10][:1] or texts[:1]
    with tempfile.TemporaryDirectory() as directory:
        loaded = {}
        for mode in modes:
            translator = Translator(model, task.source_tokenizer, task.target_tokenizer, task.max_source_length,
                                    task.max_target_length)
            with kernels.using(mode):  # traced as it is saved
                translator.save(os.path.join(directory, mode))
            loaded[mode] = tf.saved_model.load(os.path.join(directory, mode))
        for key, inputs, calls in (("savedmodel_1", ten, latency_calls),
                                   ("savedmodel_64", texts, max(3, latency_calls // 4))):
            batch_in = tf.constant(inputs)
            times = {mode: [] for mode in modes}
            for mode in modes:
                loaded[mode].translate(batch_in)["text"].numpy()
            for _ in range(calls):
                for mode in modes:
                    start = time.perf_counter()
                    loaded[mode].translate(batch_in)["text"].numpy()
                    times[mode].append(1000.0 * (time.perf_counter() - start))
            for mode in modes:
                rows[mode][f"{key}_p50_ms"] = float(np.percentile(times[mode], 50))
                rows[mode][f"{key}_p95_ms"] = float(np.percentile(times[mode], 95))
    for mode in modes:
        rows[mode]["ten_word_sentence"] = ten[0]
    return rows


class _EncodedOnce:
    """``model`` whose ``encode`` encodes every ``copies``-th source (sources given as
    ``tf.repeat(sources, copies, axis=0)``) and gives the memory beam search's steps read for
    ``copies`` hypotheses per sentence (``hypotheses_memory``), its ``initial_state`` each sentence's
    repeated: decoding through it steps the model on ``copies`` rows per sentence after one
    encoding, as beam search does."""

    def __init__(self, model, copies: int):
        self._model, self._copies = model, copies

    def __getattr__(self, name):
        return getattr(self._model, name)

    def encode(self, source, training=False):
        self._sentences = self._model.encode(source[::self._copies], training=training)
        return self._model.hypotheses_memory(self._sentences, self._copies)

    def initial_state(self, memory, max_length=None):
        import tensorflow as tf

        state = self._model.initial_state(self._sentences, max_length=max_length)
        return tf.nest.map_structure(lambda t: tf.repeat(t, self._copies, axis=0), state)


def input_wait(overrides, steps: int, warmup: int) -> Dict[str, object]:
    """Share of step time blocked on the next batch, in the pipeline and step of ``python train.py <overrides>``.

    The task, bucketed prefetched batches (``zoo.training.data``), model and optimizer
    (``zoo.training.model``) and the compiled step of ``zoo.training.fit``; ``next(iterator)`` is
    timed apart from the step. The first ``warmup`` steps (tracing) are not counted.
    """
    import keras
    import tensorflow as tf
    from omegaconf import OmegaConf

    from zoo.config import compose_train, validate_train
    from zoo.training.data import load_data
    from zoo.training.fit import make_train_step
    from zoo.training.model import build
    from zoo.training.runtime import Runtime

    cfg = compose_train(list(overrides))
    validate_train(cfg)
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    keras.utils.set_random_seed(int(cfg.seed))
    runtime = Runtime(strategy=tf.distribute.get_strategy(), device="cpu", precision="float32", replicas=1,
                      pipelines=1, is_chief=True, worker="chief")
    data = load_data(cfg)
    model, optimizer = build(cfg, data.task, runtime)
    step, _ = make_train_step(model, optimizer, runtime, cfg.trainer)
    iterator = iter(data.train_batches(1).repeat())
    compiled = tf.function(step, input_signature=[iterator.element_spec, tf.TensorSpec([], tf.float32)], autograph=False)
    stop = tf.constant(0.0)
    wait = compute = 0.0
    for index in range(warmup + steps):
        start = time.perf_counter()
        batch = next(iterator)
        fetched = time.perf_counter()
        float(compiled(batch, stop)[0])
        done = time.perf_counter()
        if index >= warmup:
            wait += fetched - start
            compute += done - fetched
    return {"overrides": " ".join(overrides), "steps": steps, "step_ms": 1000.0 * compute / steps,
            "wait_ms": 1000.0 * wait / steps, "wait_share": wait / (wait + compute)}


def newest_run(tracking_uri: str, experiment: str, overrides: str):
    """``(run id, test_bleu, train_seconds)`` of the newest FINISHED run tagged with ``overrides``, or None."""
    import mlflow

    if tracking_uri.startswith("sqlite:///") and not os.path.exists(tracking_uri[len("sqlite:///"):]):
        return None
    client = mlflow.tracking.MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return None
    runs = client.search_runs([found.experiment_id], filter_string="attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"], max_results=500)
    for run in runs:
        if overrides in run.data.tags.get("zoo.overrides", "") and "test_bleu" in run.data.metrics:
            return (run.info.run_id, run.data.metrics["test_bleu"], run.data.metrics.get("train_seconds"))
    return None
