"""Cost as the length grows: ``python -m zoo.bench lengths=[256,1024,4096,16384]``.

One self-attention layer (``length_bench`` in ``conf/bench.yaml``: batch 1, d_model 256, 4 heads)
over ``x [B, T, D]`` as its own queries, keys and values (encoder self-attention, no mask), forward
and backward in one ``tf.function`` (``tf.GradientTape`` over ``x`` and every weight, the loss
``sum(y)``), for every Transformer self-attention of the zoo (``zoo.catalog.self_attentions()``:
``multi_head`` and the ``kind: self`` ones, built as ``model.attention=<name>`` builds them, with
``length_bench.options.<name>`` over their ``conf/attention/<name>.yaml`` defaults; an attention that
takes ``max_length``, linformer's ``n``, gets the measured length) and for
``keras.layers.MultiHeadAttention`` (``keras_mha``) at every length ``T`` of ``lengths``.

Each measurement is a fresh process, so one mechanism's memory never counts in another's: forked
from a server that has imported TensorFlow, Keras and ``zoo.attention`` and run nothing (Python's
``forkserver``; a caller's main module needs ``if __name__ == "__main__":``, as multiprocessing asks),
it builds the layer, runs the step once at a tiny length (TensorFlow's runtime, kernels and the
layer's weights in place), traces the step at ``T`` without running it, reads its peak resident
memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, the baseline), then runs the step at ``T``
and times ``repeats`` more calls (fewer once they pass ``repeat_budget_s``). The memory is the peak
less the baseline: what running the layer forward and backward at ``T`` added. The time is the
median of the timed calls. The parent watches each process: one whose resident memory passes
``memory_limit_mb``, or that TensorFlow tells it ran out of memory, is reported as out of memory; one
still running after ``time_limit_s`` as over the time limit; neither stops the run, and the longer
lengths of that mechanism are reported the same without being run.

The growth exponent of a mechanism is the slope of ``log y`` against ``log T`` between the two
longest lengths it was measured at: ``log(y_2 / y_1) / log(T_2 / T_1)`` (1 linear, 2 quadratic).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from zoo.config import LENGTH_REFERENCES
from zoo.environ import restored

REFERENCES = LENGTH_REFERENCES  # the peers a run measures beside ours: {name: what it is}
SECTION = "zoo.bench lengths"  # the docs page's section this mode writes (report.write_section)
OK, OUT_OF_MEMORY, OVER_TIME, FAILED = "ok", "out of memory", "over time limit", "error"
TINY_LENGTH = 8  # the warm-up call's length, before the baseline


# ---------------------------------------------------------------------------------------------------
# One measurement, in its own process


def _peak_rss_mib() -> float:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _mmap_threshold(kib: Optional[int]) -> None:
    """glibc's malloc in this process: blocks of ``kib`` KiB and more from their own mappings, returned
    to the system when freed (``mallopt(M_MMAP_THRESHOLD)``), so the peak resident memory counts the
    tensors alive at once. By default glibc raises the threshold up to 32 MiB as blocks are freed and
    keeps freed blocks in its heaps: measured, 92 instead of 55 MiB for multi_head at 1,024. None, or
    not glibc: left as it is."""
    if kib is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, int(kib) * 1024)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def build_layer(spec: Dict[str, object]):
    """The layer ``spec`` names: a zoo attention (``zoo.attention.create``) with the bench's heads and
    options, or a ``REFERENCES`` peer."""
    import inspect

    import keras

    heads, d_model = int(spec["num_heads"]), int(spec["d_model"])
    if spec["kind"] == "reference":
        return keras.layers.MultiHeadAttention(num_heads=heads, key_dim=d_model // heads, name=spec["name"])
    import zoo.attention
    from zoo.attention.base_attention import ATTENTIONS

    options = dict(spec.get("options") or {})
    if "max_length" in inspect.signature(ATTENTIONS.get(spec["name"])).parameters:
        options["max_length"] = int(spec["length"])  # linformer's n: E, F [k, n]
    return zoo.attention.create(spec["name"], num_heads=heads, **options, name=spec["name"])


def measure_here(spec: Dict[str, object]) -> Dict[str, object]:
    """The measurement of ``spec`` in this process (``run_child`` runs it in a fresh one):
    ``{"time_ms", "times_ms", "memory_mib", "baseline_mib", "peak_mib", "params"}``."""
    from zoo.environ import set_threads

    _mmap_threshold(spec.get("mmap_threshold_kb"))
    set_threads(spec.get("intra_op_threads"), spec.get("inter_op_threads"), prefix="",
                command="python -m zoo.bench")
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(int(spec.get("seed", 0)))
    layer = build_layer(spec)
    batch, d_model, length = int(spec["batch"]), int(spec["d_model"]), int(spec["length"])

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, x)
            loss = tf.reduce_sum(y)
        grads = tape.gradient(loss, [x] + layer.trainable_variables)
        return loss + tf.add_n([tf.reduce_sum(g) for g in grads if g is not None])

    tiny = tf.random.normal([batch, min(TINY_LENGTH, length), d_model])
    tf.function(step, autograph=False)(tiny).numpy()  # builds the weights; the runtime starts
    params = int(sum(math.prod(v.shape) for v in layer.weights))
    x = tf.random.normal([batch, length, d_model])
    traced = tf.function(step, autograph=False)
    traced.get_concrete_function(tf.TensorSpec(x.shape, x.dtype))  # traced at T, not run
    baseline = _peak_rss_mib()
    start = time.perf_counter()
    traced(x).numpy()  # the first run at T: the peak
    first = time.perf_counter() - start
    times = []
    budget = float(spec.get("repeat_budget_s", float("inf")))
    while len(times) < int(spec["repeats"]) and (not times or sum(times) < budget):
        start = time.perf_counter()
        traced(x).numpy()
        times.append(time.perf_counter() - start)
    peak = _peak_rss_mib()
    return {"time_ms": 1000 * statistics.median(times), "times_ms": [1000 * t for t in times],
            "first_call_ms": 1000 * first, "memory_mib": peak - baseline, "baseline_mib": baseline,
            "peak_mib": peak, "params": params}


def measure_to_file(spec: Dict[str, object], path: str) -> None:
    """A measuring process's work: ``measure_here(spec)`` under ``spec["kernels"]``, its row written to
    ``path`` as JSON (``status`` ``ok``, or what stopped it: TensorFlow out of memory, an error)."""
    from zoo import kernels

    try:
        with kernels.using(spec.get("kernels") or kernels.FAST):
            result = {"status": OK, **measure_here(spec)}
    except MemoryError:
        result = {"status": OUT_OF_MEMORY, "detail": "MemoryError"}
    except Exception as error:  # noqa: BLE001 - reported in the table, not a crash of the run
        name, text = type(error).__name__, str(error).strip()
        out_of_memory = name == "ResourceExhaustedError" or "OOM" in text or "bad_alloc" in text
        result = {"status": OUT_OF_MEMORY if out_of_memory else FAILED,
                  "detail": f"{name}: {text.splitlines()[0] if text else ''}"[:300]}
    Path(path).write_text(json.dumps(result), encoding="utf-8")


# ---------------------------------------------------------------------------------------------------
# The parent: one process per measurement, watched

# The measuring processes are forked from a server that has imported these and run nothing (Python's
# forkserver): each measurement still starts with no runtime, no weights and no memory of the one
# before, without paying TensorFlow's import (10-20 s on a busy 2-core machine) for each.
PRELOAD = ["tensorflow", "keras", "zoo.attention", "zoo.bench.lengths"]


def _processes():
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _rss_mib(pid: int) -> Optional[float]:
    """The resident memory of process ``pid`` now (Linux ``/proc``; None elsewhere or once it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def run_child(spec: Dict[str, object], time_limit_s: float, memory_limit_mb: Optional[float],
              poll_s: float = 0.02) -> Dict[str, object]:
    """Measures ``spec`` in a fresh process (``measure_to_file``), watched every ``poll_s``: killed and
    reported ``out of memory`` once its resident memory passes ``memory_limit_mb`` (None: no limit),
    ``over time limit`` once it has run ``time_limit_s``; the row (``status``, and the figures where it
    finished) with ``wall_s``, the process's wall time, and ``watched_peak_mib``, the most resident
    memory seen."""
    with tempfile.TemporaryDirectory(prefix="zoo_lengths_") as folder:
        result_file = Path(folder) / "result.json"
        child = _processes().Process(target=measure_to_file, args=(spec, str(result_file)),
                                     name=f"zoo.bench lengths {spec['name']} {spec['length']}")
        started = time.perf_counter()
        with restored("TF_CPP_MIN_LOG_LEVEL"):  # the server starts with the first: TensorFlow's logs off in it
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
            child.start()
        stopped, watched_peak = None, 0.0
        while child.is_alive():
            rss = _rss_mib(child.pid)
            if rss is not None:
                watched_peak = max(watched_peak, rss)
                if memory_limit_mb is not None and rss > memory_limit_mb:
                    stopped = {"status": OUT_OF_MEMORY,
                               "detail": f"resident memory passed {memory_limit_mb:,.0f} MiB"}
            if stopped is None and time.perf_counter() - started > time_limit_s:
                stopped = {"status": OVER_TIME, "detail": f"still running after {time_limit_s:g} s"}
            if stopped is not None:
                child.kill()
                break
            time.sleep(poll_s)
        child.join()
        wall = time.perf_counter() - started
        if stopped is not None:
            row = stopped
        elif result_file.is_file():
            row = json.loads(result_file.read_text(encoding="utf-8"))
        elif child.exitcode == -9:  # killed, not by us: the kernel's OOM killer
            row = {"status": OUT_OF_MEMORY, "detail": "killed (SIGKILL): the machine out of memory"}
        else:
            row = {"status": FAILED, "detail": f"the process ended with exit code {child.exitcode}"}
        child.close()
        row["wall_s"] = wall
        row["watched_peak_mib"] = watched_peak
        return row


# ---------------------------------------------------------------------------------------------------
# What is measured, the exponents, the targets


def mechanisms(cfg) -> List[Tuple[str, str]]:
    """``(name, kind)`` in the order measured: ours (``length_bench.attentions``; null: every
    Transformer self-attention, ``zoo.catalog.self_attentions()``), then the references."""
    import zoo.catalog

    bench = cfg.length_bench
    ours = list(bench.attentions) if bench.get("attentions") else zoo.catalog.self_attentions()
    return [(name, "ours") for name in ours] + [(name, "reference") for name in bench.get("references") or []]


def label(name: str, kind: str) -> str:
    return REFERENCES.get(name, name) if kind == "reference" else name


def spec_of(cfg, name: str, kind: str, length: int) -> Dict[str, object]:
    """What one process measures: ``name`` at ``length``, with the bench's sizes and settings."""
    from omegaconf import OmegaConf

    from zoo import kernels

    modes = list(dict.fromkeys(cfg.get("kernels") or [kernels.FAST]))  # as the full bench's: fast where measured
    bench = cfg.length_bench
    options = bench.get("options") or {}
    return {"name": name, "kind": kind, "length": int(length), "batch": int(bench.batch),
            "d_model": int(bench.d_model), "num_heads": int(bench.num_heads),
            "options": OmegaConf.to_container(options[name], resolve=True) if kind == "ours" and name in options
            else {}, "repeats": int(bench.repeats), "repeat_budget_s": float(bench.repeat_budget_s),
            "mmap_threshold_kb": bench.get("mmap_threshold_kb"), "seed": int(cfg.seed), "kernels": kernels.FAST if kernels.FAST in modes else modes[0],
            "intra_op_threads": cfg.get("intra_op_threads"), "inter_op_threads": cfg.get("inter_op_threads"),
            "onednn": cfg.get("onednn")}


def exponent(points: Sequence[Tuple[int, Optional[float]]]) -> Optional[Tuple[float, int, int]]:
    """``(slope, T_1, T_2)``: the slope of ``log y`` against ``log T`` between the two longest lengths
    with a positive ``y`` (None where fewer than two have one)."""
    found = sorted((int(t), float(y)) for t, y in points if y is not None and y > 0)
    if len(found) < 2 or found[-1][0] == found[-2][0]:
        return None
    (t1, y1), (t2, y2) = found[-2], found[-1]
    return math.log(y2 / y1) / math.log(t2 / t1), t1, t2


def growth(row: Dict[str, object]) -> Dict[str, Optional[Tuple[float, int, int]]]:
    """A mechanism's time and memory exponents from its measurements (``row["by_length"]``)."""
    done = [m for m in row["by_length"] if m["status"] == OK]
    return {"time": exponent([(m["length"], m["time_ms"]) for m in done]),
            "memory": exponent([(m["length"], m["memory_mib"]) for m in done])}


def _target(text, value, threshold, at_least, figure, status=None) -> Dict[str, object]:
    if status is None:
        status = "NOT MEASURED" if value is None else (
            "PASS" if (value >= threshold if at_least else value <= threshold) else "FAIL")
    return {"target": text, "figure": figure, "value": value, "threshold": threshold, "status": status}


def _at(row, length) -> Optional[Dict[str, object]]:
    return next((m for m in row["by_length"] if m["length"] == length), None) if row else None


def _exponent_figure(found) -> str:
    return f"{found[0]:.2f} ({found[1]:,} -> {found[2]:,})" if found else "fewer than two lengths measured"


def targets(results: Dict[str, object], limits) -> List[Dict[str, object]]:
    """``length_bench.targets``, each with its figure and PASS / FAIL (NOT MEASURED without one):
    ``memory_efficient``'s memory exponent at most ``linear_memory_exponent``; ``multi_head``'s at least
    ``quadratic_memory_exponent``; ``memory_efficient``'s memory at the longest length at most
    ``memory_ratio`` of ``multi_head``'s (PASS where ``multi_head`` ran out of memory there); each of
    ``linear_time``'s time exponent at most ``linear_time_exponent``."""
    rows, out = results["rows"], []
    efficient, full = rows.get("memory_efficient"), rows.get("multi_head")
    limit = float(limits.linear_memory_exponent)
    found = efficient and efficient["exponents"]["memory"]
    out.append(_target(f"memory_efficient memory exponent <= {limit}", found[0] if found else None, limit, False,
                       _exponent_figure(found)))
    limit = float(limits.quadratic_memory_exponent)
    found = full and full["exponents"]["memory"]
    out.append(_target(f"multi_head memory exponent >= {limit} (about quadratic)", found[0] if found else None,
                       limit, True, _exponent_figure(found)))
    longest = max(results["lengths"])
    ratio = float(limits.memory_ratio)
    text = f"memory_efficient memory / multi_head's at {longest:,} <= {ratio:g} (or multi_head out of memory)"
    mine, theirs = _at(efficient, longest), _at(full, longest)
    if mine and mine["status"] == OK and theirs and theirs["status"] == OK and theirs["memory_mib"] > 0:
        value = mine["memory_mib"] / theirs["memory_mib"]
        out.append(_target(text, value, ratio, False, f"{value:.3f} ({mine['memory_mib']:,.0f} / "
                                                      f"{theirs['memory_mib']:,.0f} MiB)"))
    elif mine and mine["status"] == OK and theirs and theirs["status"] == OUT_OF_MEMORY:
        out.append(_target(text, None, ratio, False, f"{mine['memory_mib']:,.0f} MiB; multi_head out of memory "
                                                     f"({theirs.get('detail', '')})", status="PASS"))
    else:
        out.append(_target(text, None, ratio, False, "not both measured at this length"))
    limit = float(limits.linear_time_exponent)
    for name in limits.linear_time or []:
        found = rows.get(name) and rows[name]["exponents"]["time"]
        out.append(_target(f"{name} time exponent <= {limit}", found[0] if found else None, limit, False,
                           _exponent_figure(found)))
    return out


# ---------------------------------------------------------------------------------------------------
# The report


def cell(measured: Optional[Dict[str, object]], key: str, fmt: str) -> str:
    """A table cell: the figure, or what stopped the measurement."""
    if measured is None:
        return ""
    if measured["status"] == OK:
        return fmt.format(measured[key])
    return {OUT_OF_MEMORY: "out of memory", OVER_TIME: "over time limit"}.get(measured["status"], "error")


def table(results: Dict[str, object], key: str, fmt: str, what: str) -> List[str]:
    """Markdown rows: one per mechanism, one column per length, then the exponent between the two
    longest lengths measured."""
    lengths = results["lengths"]
    lines = [f"| {what} | " + " | ".join(f"{t:,}" for t in lengths) + " | exponent (lengths) |",
             "|---|" + "---|" * (len(lengths) + 1)]
    quantity = "time" if key == "time_ms" else "memory"
    for row in results["rows"].values():
        cells = [cell(_at(row, t), key, fmt) for t in lengths]
        found = row["exponents"][quantity]
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " | "
                     + (f"{found[0]:.2f} ({found[1]:,} -> {found[2]:,})" if found else "") + " |")
    return lines


def markdown(results: Dict[str, object], figure: Optional[str] = None) -> str:
    """The section: settings, the time and memory tables with their exponents, the figure, the targets."""
    s = results["settings"]
    limit = s["memory_limit_mb"]
    lines = ["## Cost as the length grows", "",
             f"_Written by `{results['command']}` on {results['description']}; rerun it to update this "
             f"section, do not edit it by hand._", "",
             f"One self-attention layer, encoder (no mask), batch {s['batch']}, d_model {s['d_model']}, "
             f"{s['num_heads']} heads, float32, forward and backward in one `tf.function` (gradients of "
             f"`sum(y)` for the input and every weight), `kernels={s['kernels']}`; options over "
             f"`conf/attention/<name>.yaml`: {s['options_text']}. Each measurement is a fresh process: the "
             f"time is the median of up to {s['repeats']} calls after the traced one, the memory the "
             f"process's peak resident memory (`ru_maxrss`) less its own baseline before the call at that "
             f"length (TensorFlow started, weights built, one call at length {TINY_LENGTH})"
             + (f", malloc giving blocks of {s['mmap_threshold_kb']:,} KiB and more back when freed "
                f"(`length_bench.mmap_threshold_kb`)" if s.get("mmap_threshold_kb") else "")
             + ". Out of memory: "
             f"its resident memory passed {'no limit' if limit is None else f'{limit:,.0f} MiB'} "
             f"(`length_bench.memory_limit_mb`) or TensorFlow ran out; over time limit: still running after "
             f"{s['time_limit_s']:g} s (`length_bench.time_limit_s`). Exponent: the slope of log y against "
             f"log length between the two longest lengths measured (1 linear, 2 quadratic).", ""]
    if results.get("load"):
        lines += [f"Load average (1 min) at the start and the end of the run: {results['load'][0]:.1f} and "
                  f"{results['load'][1]:.1f}, on {results['machine'].get('cores', '?')} cores: what else ran "
                  f"on the machine shared its cores with every measurement.", ""]
    if results.get("note"):
        lines += [results["note"], ""]
    lines += ["### Time (ms per forward + backward)", ""] + table(results, "time_ms", "{:,.1f}", "mechanism")
    lines += ["", "### Peak memory (MiB above the baseline)", ""] + table(results, "memory_mib", "{:,.0f}",
                                                                           "mechanism")
    failed = [(row["label"], m) for row in results["rows"].values() for m in row["by_length"]
              if m["status"] != OK]
    if failed:
        lines += ["", "Not measured: " + "; ".join(f"{name} at {m['length']:,}: {m['status']} ({m.get('detail', '')})"
                                                   for name, m in failed) + "."]
    if figure:
        lines += ["", f"![time and memory against length, log-log]({figure})"]
    lines += ["", "### Targets (`length_bench.targets`)", "", "| target | figure | result |", "|---|---|---|"]
    lines += [f"| {t['target']} | {t['figure']} | {t['status']} |" for t in results["targets"]]
    passed = sum(t["status"] == "PASS" for t in results["targets"])
    failed_targets = sum(t["status"] == "FAIL" for t in results["targets"])
    lines += ["", f"{passed} PASS, {failed_targets} FAIL, {len(results['targets']) - passed - failed_targets} "
                  f"NOT MEASURED.", ""]
    return "\n".join(lines)


def log_to_mlflow(results: Dict[str, object], tracking_uri: str, files: Sequence[Path]) -> str:
    """One run ``bench-lengths`` in the MLflow experiment ``bench``: the settings and machine as params,
    ``lengths.<name>.time_ms`` and ``.memory_mib`` with the length as the step, the exponents, the files."""
    import mlflow

    from zoo.bench.report import _metric_name
    from zoo.tracking import log_files, mlflow_run

    with mlflow_run(tracking_uri, "bench", run_name="bench-lengths") as run:
        mlflow.log_params({f"machine.{k}": v for k, v in results["machine"].items()})
        mlflow.log_params({f"length_bench.{k}": v for k, v in results["settings"].items() if k != "options_text"})
        mlflow.set_tag("zoo.machine", results["description"])
        mlflow.set_tag("zoo.command", results["command"])
        client, run_id, stamp = mlflow.MlflowClient(), run.info.run_id, int(time.time() * 1000)
        metrics = []
        for name, row in results["rows"].items():
            for m in row["by_length"]:
                if m["status"] == OK:
                    for key in ("time_ms", "memory_mib"):
                        metrics.append(mlflow.entities.Metric(_metric_name(f"lengths.{name}.{key}"), m[key], stamp,
                                                              m["length"]))
            for quantity, found in row["exponents"].items():
                if found:
                    metrics.append(mlflow.entities.Metric(_metric_name(f"lengths.{name}.{quantity}_exponent"),
                                                          found[0], stamp, 0))
        client.log_batch(run_id, metrics=metrics)
        mlflow.log_metrics({"targets_pass": sum(t["status"] == "PASS" for t in results["targets"]),
                            "targets_fail": sum(t["status"] == "FAIL" for t in results["targets"])})
        log_files([str(f) for f in files])
        return run_id


def _said(measured: Dict[str, object]) -> str:
    """One measurement as the progress line shows it."""
    if measured["status"] == OK:
        text = f"{measured['time_ms']:,.1f} ms, {measured['memory_mib']:,.0f} MiB"
    else:
        text = f"{measured['status']} ({measured.get('detail', '')})"
    return text + (f" [{measured['wall_s']:.0f} s]" if "wall_s" in measured else "")


def run(cfg, command: Optional[str] = None) -> Dict[str, object]:
    """Measures every mechanism at every length of ``cfg.lengths`` (shortest first), prints the report,
    writes ``output_dir``'s ``lengths.json``, ``lengths.md`` and the figure, the docs page's section
    (``docs_page``, unless null; the full bench's tables kept) and the figure beside it
    (``length_bench.docs_figure``), and logs them to the MLflow experiment ``bench``."""
    from omegaconf import OmegaConf

    from zoo.bench import measure
    from zoo.bench import report as reports
    from zoo.environ import set_onednn
    from zoo.plots.cost_by_length import cost_by_length
    from zoo.tracking import resolve_tracking_uri

    set_onednn(cfg.get("onednn"), prefix="", command="python -m zoo.bench")
    bench = cfg.length_bench
    lengths = sorted(dict.fromkeys(int(t) for t in cfg.lengths))
    time_limit = float(bench.time_limit_s)
    memory_limit = None if bench.get("memory_limit_mb") is None else float(bench.memory_limit_mb)
    machine = measure.machine()
    print(f"machine: {measure.describe(machine)}", flush=True)
    options = OmegaConf.to_container(bench.get("options") or {}, resolve=True)
    settings = {"batch": int(bench.batch), "d_model": int(bench.d_model), "num_heads": int(bench.num_heads),
                "repeats": int(bench.repeats), "repeat_budget_s": float(bench.repeat_budget_s),
                "time_limit_s": time_limit, "memory_limit_mb": memory_limit,
                "mmap_threshold_kb": bench.get("mmap_threshold_kb"),
                "kernels": spec_of(cfg, "multi_head", "ours", lengths[0])["kernels"],
                "options": json.dumps(options),
                "options_text": "; ".join(f"`{n}`: " + ", ".join(f"{k}={v}" for k, v in o.items())
                                          for n, o in options.items()) + "; an attention taking `max_length` "
                                "(linformer's n) gets the measured length"}
    load_at_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    results = {"command": command or "zoo.bench.lengths.run(cfg)", "machine": machine,
               "description": measure.describe(machine), "lengths": lengths, "settings": settings,
               "note": bench.get("note"), "rows": {}}
    chosen = mechanisms(cfg)
    for name, kind in chosen:
        results["rows"][name] = {"label": label(name, kind), "kind": kind, "by_length": []}
    for length in lengths:  # each length for every mechanism in turn: a slow moment of the machine hits all
        for name, kind in chosen:
            row = results["rows"][name]
            if any(m["status"] in (OUT_OF_MEMORY, OVER_TIME) for m in row["by_length"]):
                earlier = next(m for m in row["by_length"] if m["status"] in (OUT_OF_MEMORY, OVER_TIME))
                measured = {"status": earlier["status"], "detail": f"as at {earlier['length']:,} (not run)"}
            else:
                measured = run_child(spec_of(cfg, name, kind, length), time_limit, memory_limit)
            measured["length"] = length
            row["by_length"].append(measured)
            print(f"  {row['label']} at {length:,}: {_said(measured)}", flush=True)
    for row in results["rows"].values():
        row["exponents"] = growth(row)
    if load_at_start is not None:  # other processes on the machine: they slow every figure of this run
        results["load"] = [load_at_start, os.getloadavg()[0]]
    results["targets"] = targets(results, bench.targets)
    out = Path(str(cfg.output_dir))
    out.mkdir(parents=True, exist_ok=True)
    figure = cost_by_length({row["label"]: [(m["length"], m.get("time_ms"), m.get("memory_mib"))
                                            for m in row["by_length"] if m["status"] == OK]
                             for row in results["rows"].values()},
                            str(out / "lengths.png"),
                            title=f"one self-attention layer, forward + backward: batch {settings['batch']}, "
                                  f"d_model {settings['d_model']}, {settings['num_heads']} heads",
                            footnote=f"{results['command']}\n{results['description']}")
    text = markdown(results, "lengths.png")
    print(text, flush=True)
    (out / "lengths.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    (out / "lengths.md").write_text(text, encoding="utf-8")
    written = [out / "lengths.md", out / "lengths.json", Path(figure)]
    results["run_id"] = log_to_mlflow(results, resolve_tracking_uri(cfg.tracking.uri), written)
    if cfg.get("docs_page"):
        page = Path(str(cfg.docs_page))
        page.parent.mkdir(parents=True, exist_ok=True)
        shown = Path(str(bench.docs_figure)) if bench.get("docs_figure") else None
        if shown is not None:
            shown.parent.mkdir(parents=True, exist_ok=True)
            shown.write_bytes(Path(figure).read_bytes())
            written.append(shown)
        link = os.path.relpath(shown, page.parent) if shown is not None else None
        reports.write_section(page, SECTION, markdown(results, link))
        written.append(page)
    print(f"written: {', '.join(map(str, written))}; MLflow experiment 'bench', run {results['run_id']}",
          flush=True)
    return results

