"""Benchmarks: ``python -m zoo.bench [--models a,b] [--quick]``. Prints tables, logs nothing.

Measured in one run on this machine, for each registered sequence model (default sizes,
the dates task's vocabularies):
- training throughput (target tokens/s) of the compiled train step;
- decoding speed in sentences/s: greedy, beam 4, sampling (batch 64, graph-compiled);
- cached incremental decoding vs full recompute of the prefix at 64 output tokens;
- SavedModel ``translate`` latency for 1 and 64 sentences;
- a reference: the machine's float32 matmul FLOP/s, and the train step's share of it.
``python -m zoo.bench --input-wait experiment=fra_eng`` instead measures the share of training
step time spent waiting for the input pipeline, for any ``train.py`` overrides.
Speed targets are read from these tables, never asserted in unit tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from zoo.config import bench_problems, print_errors

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _time(fn, repeats=3, warmup=1):
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def matmul_flops(n=1024, repeats=5):
    import tensorflow as tf

    a = tf.random.normal([n, n])
    b = tf.random.normal([n, n])
    f = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    seconds = _time(lambda: f().numpy(), repeats=repeats)
    return 2 * n ** 3 / seconds


def bench_model(name, task, batch=64, decode_steps=64, quick=False):
    import keras
    import numpy as np
    import tensorflow as tf

    import zoo.models
    from zoo.config import compose_train, model_kwargs
    from zoo.data import make_dataset
    from zoo.data.task import encode
    from zoo.decoding import beam_search, greedy_decode, sample_decode
    from zoo.decoding.full_recompute import full_recompute_greedy
    from zoo.export.translator import Translator

    kwargs = model_kwargs(compose_train([f"model={name}"]).model)  # the model's defaults, as train.py composes them
    keras.utils.set_random_seed(0)
    model = zoo.models.create(name, source_vocab_size=task.source_tokenizer.vocab_size,
                              target_vocab_size=task.target_tokenizer.vocab_size, **kwargs).ensure_built()
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    row = {"model": name, "params": model.count_params()}

    # Training throughput: a fixed set of batches, after one warm-up pass (tracing).
    ds = make_dataset(task, "train", batch, shuffle=False).take(10 if quick else 30).cache()
    tokens = sum(int(np.sum(y.numpy() != 0)) for _, y in ds)
    model.fit(ds, epochs=1, verbose=0, shuffle=False)
    seconds = _time(lambda: model.fit(ds, epochs=1, verbose=0, shuffle=False), repeats=1 if quick else 2, warmup=0)
    row["train_tokens_per_s"] = tokens / seconds
    sources = encode(task, "test")[0].to_tensor()[:batch]
    sources = tf.cast(sources, tf.int32)

    greedy = tf.function(lambda s: greedy_decode(model, s, task.max_target_length))
    beam = tf.function(lambda s: beam_search(model, s, task.max_target_length, beam_size=4)["ids"])
    sample = tf.function(lambda s: sample_decode(model, s, task.max_target_length, temperature=0.8, top_p=0.9))
    for key, fn in (("greedy", greedy), ("beam4", beam), ("sample", sample)):
        row[f"{key}_sent_per_s"] = batch / _time(lambda fn=fn: tf.nest.map_structure(lambda t: t.numpy(), fn(sources)))

    # Cached vs full recompute at a fixed number of output tokens (<eos> never ends the loop).
    cached = tf.function(lambda s: greedy_decode(model, s, decode_steps, eos_id=-1)[0])
    full = tf.function(lambda s: full_recompute_greedy(model, s, decode_steps, eos_id=-1)[0])
    small = sources[:16]
    row["cached_64_s"] = _time(lambda: cached(small).numpy(), repeats=2)
    row["full_64_s"] = _time(lambda: full(small).numpy(), repeats=1 if quick else 2)

    translator = Translator(model, task.source_tokenizer, task.target_tokenizer, task.max_source_length,
                            task.max_target_length)
    with tempfile.TemporaryDirectory() as directory:
        translator.save(directory)
        loaded = tf.saved_model.load(directory)
        texts = task.splits["test"][0][:batch]
        row["savedmodel_1_ms"] = 1000 * _time(lambda: loaded.translate(tf.constant(texts[:1]))["text"].numpy(), repeats=5)
        row["savedmodel_64_ms"] = 1000 * _time(lambda: loaded.translate(tf.constant(texts))["text"].numpy())
    return row


def input_wait(overrides, steps=300, warmup=100):
    """Share of training step time spent blocked waiting for the next batch, measured directly.

    Builds the task, the model, the optimizer and the bucketed, prefetched training pipeline of
    ``python train.py <overrides>`` and runs ``warmup + steps`` real training steps
    (``train_on_batch``), timing ``next(iterator)`` (the wait) apart from the step. The warm-up
    steps trace the step function for the bucket shapes and are not counted.
    """
    import keras
    from omegaconf import OmegaConf

    from zoo.config import compose_train, validate_train
    from zoo.data import load_task, make_dataset
    from zoo.training.losses import MaskedCrossEntropy
    from zoo.training.model import build_model, make_optimizer

    cfg = compose_train(overrides)
    validate_train(cfg)
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    keras.utils.set_random_seed(int(cfg.seed))
    task = load_task(cfg.data)
    t = cfg.trainer
    model = build_model(cfg, task)
    model.compile(optimizer=make_optimizer(cfg.optimizer, clipnorm=t.clipnorm),
                  loss=MaskedCrossEntropy(label_smoothing=float(t.get("label_smoothing") or 0.0)),
                  jit_compile=bool(t.jit_compile))
    dataset = make_dataset(task, "train", int(t.batch_size), shuffle=True, seed=int(cfg.seed),
                           bucket_boundaries=t.bucket_boundaries).repeat()
    iterator = iter(dataset)
    wait = compute = 0.0
    for step in range(warmup + steps):
        start = time.perf_counter()
        (source, target_in), target_out = next(iterator)
        fetched = time.perf_counter()
        model.train_on_batch((source, target_in), target_out)
        done = time.perf_counter()
        if step >= warmup:
            wait += fetched - start
            compute += done - fetched
    return {"overrides": " ".join(overrides) or "(defaults)", "steps": steps, "wait_s": wait, "step_s": compute,
            "wait_share": wait / (wait + compute)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=None, help="comma-separated model names (default: all sequence models)")
    parser.add_argument("--quick", action="store_true", help="fewer batches and repeats")
    parser.add_argument("--input-wait", nargs="*", metavar="OVERRIDE", default=None,
                        help="only measure the share of training time spent waiting for input, for the run "
                             "'python train.py OVERRIDE ...' would make (e.g. experiment=fra_eng)")
    parser.add_argument("--steps", type=int, default=300, help="measured steps for --input-wait")
    args = parser.parse_args(argv)
    found = bench_problems(args.models, args.steps, args.input_wait)
    if found:
        print_errors(found)
        sys.exit(2)
    if args.input_wait is not None:
        row = input_wait(args.input_wait, steps=args.steps)
        print(f"{row['overrides']}: {row['steps']} steps, {row['step_s'] / row['steps'] * 1000:.1f} ms per step, "
              f"{row['wait_s'] / row['steps'] * 1000:.2f} ms waiting for input per step: "
              f"{100 * row['wait_share']:.2f}% of step time")
        return [row]

    import zoo.models
    from zoo.data import load_task

    names = args.models.split(",") if args.models else zoo.models.names(task="seq2seq")
    task = load_task({"name": "dates", "train_size": 4000, "val_size": 100, "test_size": 200, "seed": 0})
    flops = matmul_flops()
    print(f"reference: float32 matmul {flops / 1e9:.1f} GFLOP/s on this machine")
    rows = []
    for name in names:
        print(f"... {name}", flush=True)
        rows.append(bench_model(name, task, quick=args.quick))
    columns = [("model", "{}", 12), ("params", "{:,}", 10), ("train_tokens_per_s", "{:,.0f}", 14),
               ("greedy_sent_per_s", "{:,.0f}", 10), ("beam4_sent_per_s", "{:,.0f}", 10),
               ("sample_sent_per_s", "{:,.0f}", 10), ("cached_64_s", "{:.3f}", 10), ("full_64_s", "{:.3f}", 10),
               ("savedmodel_1_ms", "{:.1f}", 10), ("savedmodel_64_ms", "{:.1f}", 10)]
    headers = ["model", "params", "train tok/s", "greedy s/s", "beam4 s/s", "sample s/s", "cached64 s",
               "full64 s", "SM 1 ms", "SM 64 ms"]
    print()
    print(" ".join(h.rjust(w) for h, (_, _, w) in zip(headers, columns)))
    for row in rows:
        print(" ".join(fmt.format(row[key]).rjust(width) for key, fmt, width in columns))
    print()
    for row in rows:
        print(f"{row['model']:<12} beam4/greedy time per sentence: {row['greedy_sent_per_s'] / row['beam4_sent_per_s']:.2f}x"
              f"   full recompute / cached at 64 tokens: {row['full_64_s'] / row['cached_64_s']:.1f}x")
    return rows


if __name__ == "__main__":
    main()
