"""Benchmarks: ``python -m zoo.bench [key=value ...]`` (Hydra, ``conf/bench.yaml``).

One run measures, on this machine and side by side, for every registered sequence model at each
size of ``sizes`` (``small``: d2l's chapter sizes on 600 fra-eng pairs; ``base``: width 256, FFN
1024, 2+2 Transformer layers, 8,000-word vocabularies, sentences up to 20 tokens; ``tiny``: the
test's, on generated data):

- every training and decoding measurement below once per mode of ``kernels`` (``[fast, reference]``:
  ``zoo/kernels.py``), side by side: each mode builds (same seed) and traces its own step or search,
  and the modes take turns within every round, so what the fast path buys is a ratio taken in one
  session (the variants and the input wait run in the targets' mode, ``fast``, only);
- training target tokens/s (real tokens), step time and analytic training FLOPs per step
  (``zoo.bench.flops``) of the project's own training step (``zoo.training.fit``), interleaved
  round by round with the in-run references (``zoo.bench.references``) on the same batches; the
  share of the machine's float32 matmul FLOP/s (measured in the same run, with bfloat16's) used;
- the same step with ``trainer.precision=mixed_bfloat16`` and ``trainer.jit_compile=true``;
- greedy, beam-4 and sampling sentences/s; beam-4 against greedy on four rows per sentence over one
  encoding (the search's own overhead over the model's work); cached vs full-recompute decoding; SavedModel
  ``translate`` p50/p95 for one 10-word sentence and for 64 sentences;
- the share of step time waiting for input in ``python train.py experiment=fra_eng``'s pipeline;
- the ``experiment=fra_eng`` test BLEU of the newest finished run in the tracking store.

Every target of ``targets`` is printed with its figure and PASS/FAIL (NOT MEASURED without a
figure), judged with ``kernels=fast``, the other modes' figures beside it; the report goes to
``output_dir`` (``results.json``, ``report.md``), to ``docs_page`` (``docs/benchmarks.md``, headed by
the command line, date and machine) and to the MLflow experiment ``bench`` with the machine's
description. Speed targets live here, never in unit tests.

``python -m zoo.bench lengths=[256,1024,4096,16384]`` runs instead the cost of one self-attention
layer as the length grows (``zoo.bench.lengths``, ``length_bench`` in ``conf/bench.yaml``): time and
peak memory of every Transformer self-attention and ``keras.layers.MultiHeadAttention``, each length
in a fresh process, their growth exponents and targets, a log-log figure, its own section of
``docs_page`` (``report.write_section``; the full run keeps it, ``report.write_page``) and a run in
the MLflow experiment ``bench``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from zoo import kernels  # noqa: E402
from zoo.bench import measure  # noqa: E402
from zoo.bench import report as reports  # noqa: E402
from zoo.environ import set_onednn, set_threads  # noqa: E402


def compose(overrides: Sequence[str] = ()):
    """The config ``python -m zoo.bench <overrides>`` runs with."""
    from zoo.config import compose_train

    return compose_train(list(overrides), config_name="bench")


def _say(text: str) -> None:
    print(text, flush=True)


def modes_of(cfg) -> List[str]:
    """The ``kernels`` modes to measure, in order, each once (``[fast]`` when none are given)."""
    return list(dict.fromkeys(cfg.get("kernels") or [kernels.FAST]))


def target_mode(modes: Sequence[str]) -> str:
    """The mode the targets are judged in: ``fast`` (the default path) when measured."""
    return kernels.FAST if kernels.FAST in modes else modes[0]


def bench_size(cfg, size: str, names: List[str]) -> Dict[str, object]:
    """Everything measured at one size: training rows (ours, references, variants) and decoding rows,
    ``{mode: {name: row}}`` for each ``kernels`` mode of ``cfg.kernels``. Each model is built (same seed)
    and traced once per mode; all of them step in turn in the same rounds. The variants run in the
    targets' mode only."""
    from omegaconf import OmegaConf

    from zoo.config import bench_rounds
    from zoo.data import load_task

    spec = cfg.size[size]
    data = OmegaConf.to_container(spec.data, resolve=True)
    _say(f"[{size}] data: {data['name']}")
    task = load_task(data)
    seed = int(cfg.seed)
    batches = measure.fixed_batches(task, int(spec.batch_size), int(cfg.train.batches), seed)
    lr = float(cfg.train.learning_rate)
    modes = modes_of(cfg)
    judged = target_mode(modes)
    trainees = []
    overrides = {name: list(spec.model.get(name) or []) for name in names}
    for name in names:
        for mode in modes:
            trainees.append(measure.make_trainee(name, "ours", measure.zoo_builder(name, overrides[name], task, seed),
                                                 batches, lr, mode=mode))
    for name in cfg.references or []:
        sizes = OmegaConf.to_container(spec.reference, resolve=True)
        for mode in modes:
            trainees.append(measure.make_trainee(name, "reference",
                                                 measure.reference_builder(name, sizes, task, seed), batches, lr,
                                                 mode=mode))
    if size in (cfg.variants.sizes or []):
        padded = measure.pad_to_one_shape(batches)
        for run in cfg.variants.runs:
            for name in cfg.variants.models or []:
                if name in names:
                    trainees.append(measure.make_trainee(
                        f"{name}@{run.name}", "variant", measure.zoo_builder(name, overrides[name], task, seed),
                        padded if run.jit_compile else batches, lr, precision=str(run.precision),
                        jit_compile=bool(run.jit_compile), mode=judged))
    rounds = bench_rounds(cfg, size, "rounds")
    _say(f"[{size}] training, kernels={'/'.join(modes)}: {', '.join(dict.fromkeys(t.name for t in trainees))} "
         f"({len(batches)} batches x {rounds} interleaved rounds)")
    train = measure.train_throughput(trainees, rounds, int(cfg.train.warmup))
    decode = {mode: {} for mode in modes}
    decoded = list(cfg.decode.get("models") or names)
    if size in (cfg.decode.sizes or []):
        for trainee in trainees:
            if trainee.kind == "ours" and trainee.mode == judged and trainee.name in decoded:
                # its weights, traced in every mode
                _say(f"[{size}] decoding, kernels={'/'.join(modes)}: {trainee.name}")
                by_mode = measure.decoding(
                    trainee.model, task, int(cfg.decode.batch), int(cfg.decode.recompute_tokens),
                    int(cfg.decode.recompute_batch), int(cfg.decode.latency_calls),
                    bench_rounds(cfg, size, "fixed_rounds"), modes)
                for mode, row in by_mode.items():
                    decode[mode][trainee.name] = row
    return {"data": {k: v for k, v in data.items() if v is not None}, "batch_size": int(spec.batch_size),
            "source_vocab_size": task.source_tokenizer.vocab_size,
            "target_vocab_size": task.target_tokenizer.vocab_size, "train": train, "decode": decode}


def _matmul_peak(cfg) -> Dict[str, float]:
    peak = {dtype: measure.matmul_flops(dtype, int(cfg.matmul.n), int(cfg.matmul.repeats))
            for dtype in ("float32", "bfloat16")}
    _say(f"matmul: float32 {peak['float32'] / 1e9:.1f} GFLOP/s, bfloat16 {peak['bfloat16'] / 1e9:.1f} GFLOP/s")
    return peak


def run(cfg, command: Optional[str] = None) -> Dict[str, object]:
    """Runs the benchmark of ``cfg`` (``compose(...)``), prints and writes the report (``output_dir``, and
    ``docs_page`` unless null); returns the results. ``command``: the command line that composed ``cfg``,
    named on the docs page (``main`` passes it)."""
    set_onednn(cfg.get("onednn"), prefix="", command="python -m zoo.bench")  # before TensorFlow is imported
    set_threads(cfg.get("intra_op_threads"), cfg.get("inter_op_threads"), prefix="",
                command="python -m zoo.bench")  # before any op runs
    import keras

    import zoo.models
    from zoo.tracking import resolve_tracking_uri

    names = list(cfg.models) if cfg.models else zoo.models.names(task="seq2seq")
    keras.utils.set_random_seed(int(cfg.seed))
    machine = measure.machine()
    _say(f"machine: {measure.describe(machine)}")
    # The peak is measured before the first size and after each: a slow moment of a shared machine
    # lowers one measurement (and would raise every utilisation); the best of them is the machine's.
    peaks = [_matmul_peak(cfg)]
    modes = modes_of(cfg)
    results = {"machine": machine, "description": measure.describe(machine), "command": command or "zoo.bench.run(cfg)",
               "kernels": modes, "target_kernels": target_mode(modes), "sizes": {}, "config": _plain(cfg)}
    for size in cfg.sizes:
        results["sizes"][size] = bench_size(cfg, str(size), names)
        peaks.append(_matmul_peak(cfg))
    peak = {dtype: max(p[dtype] for p in peaks) for dtype in peaks[0]}
    results["matmul_flop_per_s"], results["matmul_measurements"] = peak, peaks
    for data in results["sizes"].values():
        for row in (row for rows in data["train"].values() for row in rows.values()):
            row["utilisation"] = row["flop_per_s"] / peak["float32"] if row.get("flop_per_s") else None
    wait = cfg.input_wait.overrides
    if wait:
        _say(f"input wait: python train.py {' '.join(wait)}")
        with kernels.using(results["target_kernels"]):  # the step as the targets' mode traces it
            results["input_wait"] = measure.input_wait(list(wait), int(cfg.input_wait.steps),
                                                       int(cfg.input_wait.warmup))
    uri = resolve_tracking_uri(cfg.tracking.uri)
    found = measure.newest_run(uri, str(cfg.bleu_run.experiment), str(cfg.bleu_run.overrides))
    results["fra_eng_run"] = ({"run_id": found[0], "test_bleu": found[1], "train_seconds": found[2]}
                              if found else None)
    results["targets"] = reports.targets(results, cfg.targets)
    text = reports.markdown(results)
    print(text, flush=True)
    out = Path(str(cfg.output_dir))
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    (out / "report.md").write_text(text, encoding="utf-8")
    results["run_id"] = reports.log_to_mlflow(results, uri, [out / "results.json", out / "report.md"])
    written = [out / "report.md", out / "results.json"]
    if cfg.get("docs_page"):
        page = Path(str(cfg.docs_page))
        page.parent.mkdir(parents=True, exist_ok=True)
        reports.write_page(page, reports.docs_page(results, text))  # the lengths section kept
        written.append(page)
    _say(f"written: {', '.join(map(str, written))}; MLflow experiment 'bench', run {results['run_id']}")
    return results


def _plain(cfg):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True)


def problems(cfg) -> List[str]:
    """The bench's own settings that ``zoo.config.bench_problems`` does not check: ``decode.models``."""
    import zoo.catalog

    measured = list(cfg.models) if cfg.get("models") else zoo.catalog.models("seq2seq")
    return [f"decode.models: '{name}' is not among the models measured. Available: {', '.join(measured)} "
            f"(default: null, all of them)" for name in cfg.decode.get("models") or [] if name not in measured]


def main(argv=None) -> Dict[str, object]:
    """``python -m zoo.bench [key=value ...]``: Hydra overrides of ``conf/bench.yaml``."""
    import shlex
    import sys

    from zoo.config import bench_problems

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = compose(args)
    except Exception as error:  # Hydra's own override errors: one line, not a traceback
        if type(error).__module__.startswith(("hydra", "omegaconf")):
            print(f"error: {str(error).splitlines()[0]}", file=sys.stderr)
            raise SystemExit(2) from None
        raise
    found = bench_problems(cfg) + ([] if cfg.get("lengths") is not None else problems(cfg))
    if found:
        for line in found:
            print(f"error: {line}", file=sys.stderr)
        raise SystemExit(2)
    command = shlex.join(["python", "-m", "zoo.bench", *args])
    if cfg.get("lengths") is not None:
        from zoo.bench import lengths

        return lengths.run(cfg, command)
    return run(cfg, command)
