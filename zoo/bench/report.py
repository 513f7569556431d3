"""The report: targets with figure and PASS/FAIL, Markdown tables, the MLflow run."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REFERENCE_OF = {"transformer": "keras_transformer", "luong": "tutorial_rnn"}
RNN_MODELS = ("bahdanau", "luong", "seq2seq")


def _target(text: str, value: Optional[float], threshold: float, at_least: bool, fmt: str = "{:.2f}",
            note: str = "") -> Dict[str, object]:
    if value is None:
        status, figure = "NOT MEASURED", note or "no figure"
    else:
        status = "PASS" if (value >= threshold if at_least else value <= threshold) else "FAIL"
        if fmt.format(value) == fmt.format(threshold) and value != threshold:
            fmt = fmt.replace(".2f", ".4f")  # 1.2968 is no 1.30: the digits that decide the result
        figure = fmt.format(value) + (f" ({note})" if note else "")
    return {"target": text, "figure": figure, "value": value, "threshold": threshold,
            "direction": ">=" if at_least else "<=", "status": status}


def paired(train: Dict[str, Dict[str, object]], numerator: str, denominator: str) -> Tuple[float, float, float]:
    """``(median, lowest, highest)`` over the rounds of ``numerator``'s round time over
    ``denominator``'s in the same round. The rounds interleave every model step by step
    (``measure.train_throughput``), so a round's two times saw the same moment of the machine: the
    median of the rounds' ratios, not the ratio of two medians taken from different rounds. Both ran
    the same batches, so it is also ``denominator``'s tokens/s over ``numerator``'s."""
    ratios = sorted(a / b for a, b in zip(train[numerator]["rounds_s"], train[denominator]["rounds_s"]))
    return statistics.median(ratios), ratios[0], ratios[-1]


def _spread(low: float, high: float, rounds: int) -> str:
    return f"{rounds} rounds: {low:.2f}-{high:.2f}x"


def _judged(results) -> str:
    return results.get("target_kernels", "fast")


def _modes(results) -> List[str]:
    return list(results.get("kernels") or [_judged(results)])


def _kernel_targets(results: Dict[str, object], limits, mode: str) -> List[Dict[str, object]]:
    """The targets measured per ``kernels`` mode (training and decoding), from ``mode``'s rows."""
    out = []
    sizes = results["sizes"]
    for size, data in sizes.items():
        train = data["train"].get(mode, {})
        for ours, reference in REFERENCE_OF.items():
            if ours in train and reference in train:
                ratio, low, high = paired(train, reference, ours)
                out.append(_target(f"[{size}] {ours} tokens/s / {reference} >= {limits.reference_ratio}", ratio,
                                   float(limits.reference_ratio), True, "{:.2f}x",
                                   _spread(low, high, len(train[ours]["rounds_s"]))))
        for model, limit in (("bahdanau", limits.bahdanau_over_seq2seq), ("luong", limits.luong_over_seq2seq)):
            if model in train and "seq2seq" in train:
                ratio, low, high = paired(train, model, "seq2seq")
                out.append(_target(f"[{size}] {model} step time / seq2seq <= {limit}", ratio, float(limit), False,
                                   "{:.2f}x", _spread(low, high, len(train[model]["rounds_s"]))))
    base = sizes.get("base", {}).get("train", {}).get(mode, {}).get("transformer")
    out.append(_target(f"[base] transformer training FLOP/s / float32 matmul FLOP/s >= {limits.transformer_utilisation:.0%}",
                       base["utilisation"] if base else None, float(limits.transformer_utilisation), True, "{:.1%}",
                       "" if base else "base size not run"))
    for size, data in sizes.items():
        for model, row in data["decode"].get(mode, {}).items():
            out.append(_target(f"[{size}] {model} full recompute / cached at 64 tokens >= {limits.cached_speedup}",
                               row["full_s"] / row["cached_s"], float(limits.cached_speedup), True, "{:.1f}x"))
            out.append(_target(f"[{size}] {model} beam-4 / greedy on 4 rows per sentence, both {row['fixed_steps']} "
                               f"steps <= {limits.beam_over_four_rows}",
                               row["beam4_fixed_ms"] / row["greedy_x4_fixed_ms"], float(limits.beam_over_four_rows),
                               False, "{:.2f}x", _beam_note(row)))
            limit = limits.savedmodel_transformer_ms if model == "transformer" else limits.savedmodel_rnn_ms
            out.append(_target(f"[{size}] {model} SavedModel translate p50, one 10-word sentence <= {limit} ms",
                               row["savedmodel_1_p50_ms"], float(limit), False, "{:.1f} ms"))
    return out


def targets(results: Dict[str, object], limits) -> List[Dict[str, object]]:
    """Every target of ``conf/bench.yaml`` ``targets`` that this run measured, and the ones it could not,
    judged in the targets' ``kernels`` mode (``fast``); a target measured per mode carries the other
    modes' figures and results beside it (``beside``: ``{mode: "figure, PASS"}``)."""
    judged = _judged(results)
    out = _kernel_targets(results, limits, judged)
    for mode in _modes(results):
        if mode != judged:
            found = {t["target"]: t for t in _kernel_targets(results, limits, mode)}
            for target in out:
                other = found.get(target["target"])
                if other is not None:
                    target.setdefault("beside", {})[mode] = f"{other['figure']}, {other['status']}"
    wait = results.get("input_wait")
    out.append(_target(f"input waiting < {limits.input_wait_share:.0%} of step time (experiment=fra_eng)",
                       wait["wait_share"] if wait else None, float(limits.input_wait_share), False, "{:.2%}",
                       "" if wait else "input_wait.overrides=null"))
    run = results.get("fra_eng_run")
    out.append(_target(f"experiment=fra_eng test BLEU >= {limits.fra_eng_bleu} within its 30-minute budget",
                       run["test_bleu"] if run else None, float(limits.fra_eng_bleu), True, "{:.1f}",
                       (f"run {run['run_id']}, train_seconds {run['train_seconds']:.0f}" if run and run.get("train_seconds")
                        else f"run {run['run_id']}" if run else
                        "no finished experiment=fra_eng run in the tracking store; run it with python train.py "
                        "experiment=fra_eng")))
    return out


def _beam_note(row) -> str:
    # beam-4 against greedy on 4 rows per sentence over one encoding (the model's own work in beam-4's
    # steps): the search's own overhead. Beside it, beam-4 over greedy on the sentences' one row each.
    ratios = row["beam4_over_greedy_x4_rounds"]
    return (f"{_spread(min(ratios), max(ratios), len(ratios))}; "
            f"over greedy on 1 row per sentence: {row['beam4_fixed_ms'] / row['greedy_fixed_ms']:.2f}x; "
            f"as decoded: {row['greedy_sent_per_s'] / row['beam4_sent_per_s']:.2f}x; "
            f"one sentence: {row['beam4_1_fixed_ms'] / row['greedy_1_fixed_ms']:.2f}x")


def _num(value, fmt="{:,.0f}"):
    return "" if value is None else fmt.format(value)


def _peers(train: Dict[str, Dict[str, object]], name: str) -> str:
    """``name``'s ratios against its peers measured in the same rounds: a zoo model's tokens/s over its
    ``keras.layers`` reference's, an RNN model's step time over seq2seq's, a variant's speed-up over
    float32."""
    found = []
    model = name.split("@")[0]
    if "@" in name:
        if model in train:
            found.append(f"{paired(train, model, name)[0]:.2f}x float32")
        return "; ".join(found)
    reference = REFERENCE_OF.get(name)
    if reference in train:
        found.append(f"{paired(train, reference, name)[0]:.2f}x {reference} tok/s")
    if name in ("bahdanau", "luong") and "seq2seq" in train:
        found.append(f"{paired(train, name, 'seq2seq')[0]:.2f}x seq2seq step time")
    return "; ".join(found)


def _names(by_mode, modes) -> List[str]:
    """The names of ``{mode: {name: row}}`` in the order first measured."""
    return list(dict.fromkeys(name for mode in modes for name in by_mode.get(mode, {})))


def _grouped(by_mode, modes) -> List[Tuple[str, str, Dict[str, object]]]:
    """``(mode, name, row)`` of ``{mode: {name: row}}``, each name's modes together."""
    return [(mode, name, by_mode[mode][name]) for name in _names(by_mode, modes) for mode in modes
            if name in by_mode.get(mode, {})]


def _side_by_side(results: Dict[str, object]) -> List[str]:
    """Training steps under every ``kernels`` mode, and what the judged mode (fast) buys over each other."""
    modes, judged = _modes(results), _judged(results)
    others = [m for m in modes if m != judged]
    lines = ["| model | size | " + " | ".join(f"{m} ms/step" for m in modes) + " | "
             + " | ".join(f"{judged} speed-up ({m} / {judged})" for m in others)
             + (" | " if others else "") + " | ".join(f"vs peers, {m}" for m in modes) + " |",
             "|" + "---|" * (2 + 2 * len(modes) + len(others))]
    for size, data in results["sizes"].items():
        train = data["train"]
        for name in _names(train, modes):
            cells = [name, size]
            cells += [f"{train[m][name]['step_ms']:.1f}" if name in train.get(m, {}) else "" for m in modes]
            for m in others:
                both = name in train.get(m, {}) and name in train.get(judged, {})
                if both:
                    ratio, low, high = paired({"other": train[m][name], "judged": train[judged][name]}, "other",
                                              "judged")
                    cells.append(f"{ratio:.2f}x ({low:.2f}-{high:.2f})")
                else:
                    cells.append("")
            cells += [_peers(train[m], name) if name in train.get(m, {}) else "" for m in modes]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(results: Dict[str, object]) -> str:
    """The whole report as Markdown (printed as is: the tables read as plain text too)."""
    peak = results["matmul_flop_per_s"]
    modes, judged = _modes(results), _judged(results)
    lines = ["# zoo.bench", "", f"Machine: {results['description']}.", "",
             f"Matmul reference, measured in this run: float32 {peak['float32'] / 1e9:.1f} GFLOP/s, "
             f"bfloat16 {peak['bfloat16'] / 1e9:.1f} GFLOP/s (the best of {len(results['matmul_measurements'])} "
             f"measurements: before the first size and after each).", "",
             f"Kernels: every model measured with {' and '.join(f'`kernels={m}`' for m in modes)} (`zoo/kernels.py`), "
             f"each mode its own traced step or search on the same batches and weights, all stepped in turn in the "
             f"same rounds (the trainer variants, `model@variant`, in `kernels={judged}` only); the targets are "
             f"judged with `kernels={judged}`.", "",
             "## Training, " + " and ".join(f"kernels={m}" for m in modes) + " (ms per step: the median round; "
             "ratios: the median of the rounds' ratios, lowest-highest round in brackets)", ""]
    lines += _side_by_side(results) + [""]
    for size, data in results["sizes"].items():
        train = data["train"]
        first = next(row for rows in train.values() for row in rows.values())
        lines += [f"## {size}: training (batch {data['batch_size']}, vocabularies {data['source_vocab_size']:,} / "
                  f"{data['target_vocab_size']:,}; median of {len(first['rounds_s'])} interleaved rounds of "
                  f"{first['steps']} steps; ratios: the median of the rounds' ratios)", "",
                  "| model | kernels | kind | params | step ms | target tok/s | vs peers | GFLOP/step | GFLOP/s | "
                  "of f32 peak |", "|---|---|---|---|---|---|---|---|---|---|"]
        for mode, name, row in _grouped(train, modes):
            lines.append(f"| {name} | {mode} | {row['kind']} | {row['params']:,} | {row['step_ms']:.1f} | "
                         f"{row['tokens_per_s']:,.0f} | {_peers(train[mode], name)} | "
                         f"{_num(row['train_flops_per_step'] and row['train_flops_per_step'] / 1e9, '{:.2f}')} | "
                         f"{_num(row['flop_per_s'] and row['flop_per_s'] / 1e9, '{:.1f}')} | "
                         f"{_num(row.get('utilisation'), '{:.1%}')} |")
        lines.append("")
        decoded = _grouped(data["decode"], modes)
        if decoded:
            fixed = decoded[0][2]["fixed_steps"]
            lines += [f"## {size}: decoding (sentences/s, batch of test sentences; ms for the batch at {fixed} "
                      f"steps, <eos> off) and SavedModel translate", "",
                      "| model | kernels | greedy | beam-4 | sampling | greedy / beam-4 / greedy on 4 rows per sentence "
                      "ms, equal length | greedy / beam-4 ms, one sentence | cached 64 tok s | full 64 tok s | "
                      "full/cached | 1 sentence p50/p95 ms | 64 sentences p50/p95 ms |",
                      "|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for mode, name, row in decoded:
                lines.append(f"| {name} | {mode} | {row['greedy_sent_per_s']:,.0f} | {row['beam4_sent_per_s']:,.0f} | "
                             f"{row['sample_sent_per_s']:,.0f} | {row['greedy_fixed_ms']:.1f} / "
                             f"{row['beam4_fixed_ms']:.1f} / {row['greedy_x4_fixed_ms']:.1f} | "
                             f"{row['greedy_1_fixed_ms']:.1f} / "
                             f"{row['beam4_1_fixed_ms']:.1f} | {row['cached_s']:.3f} | {row['full_s']:.3f} | "
                             f"{row['full_s'] / row['cached_s']:.1f}x | {row['savedmodel_1_p50_ms']:.1f} / "
                             f"{row['savedmodel_1_p95_ms']:.1f} | {row['savedmodel_64_p50_ms']:.1f} / "
                             f"{row['savedmodel_64_p95_ms']:.1f} |")
            lines.append("")
    wait = results.get("input_wait")
    if wait:
        lines += [f"Input pipeline (`python train.py {wait['overrides']}`, {wait['steps']} steps): "
                  f"{wait['wait_ms']:.2f} ms waiting per {wait['step_ms']:.1f} ms step: {wait['wait_share']:.2%}.", ""]
    others = [m for m in modes if m != judged]
    lines += [f"## Targets (judged with kernels={judged}" + "".join(f"; kernels={m} beside" for m in others) + ")",
              "", f"| target | figure, kernels={judged} | result |" + "".join(f" kernels={m} |" for m in others),
              "|---|---|---|" + "---|" * len(others)]
    for target in results["targets"]:
        beside = target.get("beside", {})
        lines.append(f"| {target['target']} | {target['figure']} | {target['status']} |"
                     + "".join(f" {beside.get(m, '')} |" for m in others))
    passed = sum(t["status"] == "PASS" for t in results["targets"])
    failed = sum(t["status"] == "FAIL" for t in results["targets"])
    lines += ["", f"{passed} PASS, {failed} FAIL, {len(results['targets']) - passed - failed} NOT MEASURED "
                  f"(kernels={judged}).", ""]
    return "\n".join(lines)


def docs_page(results: Dict[str, object], text: str) -> str:
    """``docs/benchmarks.md``: the report of this run, its first line naming the command, the date and
    the machine that wrote it."""
    machine = results["machine"]
    body = text.replace("# zoo.bench", "# Benchmarks", 1)
    return (f"_Written by `{results['command']}` on {machine['date']}, {machine['cpu']} ({machine['cores']} "
            f"cores); rerun it to update this page, do not edit it by hand._\n\n{body}")


# A page's sections that other writers own: ``<!-- name -->`` ... ``<!-- /name -->`` (``write_section``),
# kept where they are by each writer of the rest (``write_page``).
_SECTION = re.compile(r"<!-- (?!/)([^>]+?) -->\n.*?<!-- /\1 -->\n?", re.S)


def _marked(name: str, body: str) -> str:
    return f"<!-- {name} -->\n{body.rstrip()}\n<!-- /{name} -->\n"


def sections(text: str) -> Dict[str, str]:
    """The marked sections of a page's ``text``, ``{name: the section with its marks}``."""
    return {match.group(1): match.group(0) for match in _SECTION.finditer(text)}


def write_section(page: Path, name: str, body: str) -> None:
    """Writes ``body`` as ``page``'s section ``name``: in place of that section where the page has it,
    else at its end; the rest of the page as it was."""
    old = page.read_text(encoding="utf-8") if page.is_file() else ""
    found = sections(old).get(name)
    if found is not None:
        new = old.replace(found, _marked(name, body), 1)
    else:
        new = (old.rstrip() + "\n\n" if old.strip() else "") + _marked(name, body)
    page.write_text(new, encoding="utf-8")


def write_page(page: Path, text: str) -> None:
    """Writes ``text`` as ``page``, followed by the marked sections the page already has (another
    writer's, as ``python -m zoo.bench lengths=[...]``'s), each kept as it was."""
    old = page.read_text(encoding="utf-8") if page.is_file() else ""
    kept = [block for name, block in sections(old).items() if name not in sections(text)]
    page.write_text(text.rstrip() + "\n" + "".join("\n" + block for block in kept), encoding="utf-8")


def _metric_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "_-./" else "_" for c in text)


def log_to_mlflow(results: Dict[str, object], tracking_uri: str, files) -> str:
    """One run in the MLflow experiment ``bench``: machine params, every figure as a metric, the report files."""
    import mlflow

    from zoo.tracking import log_files, mlflow_run

    with mlflow_run(tracking_uri, "bench", run_name="bench") as run:
        machine = results["machine"]
        mlflow.log_params({f"machine.{k}": v for k, v in machine.items()})
        mlflow.set_tag("zoo.machine", results["description"])
        metrics = {f"matmul_{k}_gflops": v / 1e9 for k, v in results["matmul_flop_per_s"].items()}
        judged = _judged(results)
        for size, data in results["sizes"].items():
            for mode in _modes(results):  # the judged mode's as <size>.<name>.<key>, another's as <size>.<mode>.<name>.<key>
                prefix = size if mode == judged else f"{size}.{mode}"
                for name, row in data["train"].get(mode, {}).items():
                    for key in ("step_ms", "tokens_per_s", "utilisation"):
                        if row.get(key) is not None:
                            metrics[_metric_name(f"{prefix}.{name}.{key}")] = row[key]
                for name, row in data["decode"].get(mode, {}).items():
                    for key, value in row.items():
                        if isinstance(value, float):
                            metrics[_metric_name(f"{prefix}.{name}.{key}")] = value
        if results.get("input_wait"):
            metrics["input_wait_share"] = results["input_wait"]["wait_share"]
        mlflow.log_metrics(metrics)
        passed = sum(t["status"] == "PASS" for t in results["targets"])
        mlflow.log_metrics({"targets_pass": passed,
                            "targets_fail": sum(t["status"] == "FAIL" for t in results["targets"])})
        log_files([str(f) for f in files])
        return run.info.run_id
