"""zoo.bench: the FLOP counts against hand counts, bad sizes, and one tiny run end to end (no timing asserted)."""

import json
import shlex

import mlflow
import pytest

import zoo.bench
from zoo.bench import flops

from conftest import empty_store


def test_transformer_flops_match_a_hand_count():
    # D=4, F=8, one layer per side, V=10; one sentence of 2 source and 3 target tokens.
    # encoder: 2 (8*16 + 4*4*8) + 4*2*2*4 = 512 + 64 = 576
    # decoder self + FFN: 3 (8*16 + 4*4*8) + 4*3*3*4 = 768 + 144 = 912
    # cross: 4*3*16 + 4*2*16 + 4*3*2*4 = 192 + 128 + 96 = 416; output: 2*3*4*10 = 240
    forward = flops.transformer_forward([2], [3], embed_dim=4, intermediate_dim=8, num_layers=1, target_vocab_size=10)
    assert forward == 576 + 912 + 416 + 240 == 2144
    assert flops.training_flops(forward) == 6432


def test_rnn_model_flops_match_hand_counts():
    import zoo.models

    # seq2seq, GRU, E=2, H=3, V=5; s=4, t=2. encoder 4 * 6*3*(2+3) = 360;
    # decoder on [e(y); c] (2+3 wide): 2 * 6*3*(5+3) = 288; output 2*2*3*5 = 60.
    seq2seq = zoo.models.create("seq2seq", source_vocab_size=7, target_vocab_size=5, embed_dim=2, hidden_size=3,
                                cell="gru").ensure_built()
    assert flops.model_forward(seq2seq, [4], [2]) == 360 + 288 + 60
    # luong, GRU, bidirectional (2 units per direction, memory 4), general attention, E=2, H=4, V=5; s=3, t=2.
    # encoder 3 * 2 * 6*2*(2+2) = 288; decoder 2 * 6*4*(2+4) = 288; keys W_a h_s 3*2*4*4 = 96;
    # scores + context 2 * (2*3*4 + 2*3*4) = 96; W_c 2 * 2*(4+4)*4 = 128; output 2*2*4*5 = 80.
    luong = zoo.models.create("luong", source_vocab_size=7, target_vocab_size=5, embed_dim=2, hidden_size=4,
                              cell="gru", attention="general", input_feeding=False).ensure_built()
    assert flops.model_forward(luong, [3], [2]) == 288 + 288 + 96 + 96 + 128 + 80
    # Sentences add up: two sentences cost the sum of each.
    assert flops.model_forward(luong, [3, 2], [2, 4]) == flops.model_forward(luong, [3], [2]) + \
        flops.model_forward(luong, [2], [4])


@pytest.mark.parametrize("name", ["luong", "transformer"])
def test_the_beam_floor_decodes_every_sentence_four_times_over_one_encoding(name):
    """The beam target's floor (greedy on four rows per sentence): each sentence's greedy ids, four
    times, from one encoding of it."""
    import numpy as np
    import tensorflow as tf
    from decoding.test_decoding import make
    from models.test_models import SOURCE

    from zoo.bench.measure import _EncodedOnce
    from zoo.decoding import greedy_decode

    model = make(name)
    single = greedy_decode(model, SOURCE, 5, eos_id=-1)[0].numpy()
    calls = []
    encode = model.encode
    model.encode = lambda source, training=False: calls.append(source.shape[0]) or encode(source, training=training)
    fourfold = greedy_decode(_EncodedOnce(model, 4), tf.repeat(SOURCE, 4, axis=0), 5, eos_id=-1)[0].numpy()
    np.testing.assert_array_equal(fourfold, np.repeat(single, 4, axis=0))
    assert calls == [SOURCE.shape[0]]  # the sentences once, not four times


def test_a_figure_that_rounds_onto_its_threshold_shows_the_digits_that_decide():
    from zoo.bench.report import _target

    failing = _target("ratio >= 1.3", 1.29684, 1.3, True, "{:.2f}x")
    assert (failing["status"], failing["figure"]) == ("FAIL", "1.2968x")
    assert _target("ratio >= 1.3", 1.31, 1.3, True, "{:.2f}x")["figure"] == "1.31x"
    assert _target("ratio >= 1.3", 1.3, 1.3, True, "{:.2f}x")["figure"] == "1.30x"
    over = _target("time <= 2.0", 2.0031, 2.0, False, "{:.2f}x")
    assert (over["status"], over["figure"]) == ("FAIL", "2.0031x")


def _train_row(rounds, kind="ours"):
    return {"rounds_s": rounds, "kind": kind, "params": 1, "steps": 12, "step_ms": 1.0, "tokens_per_s": 1.0,
            "train_flops_per_step": None, "flop_per_s": None}


def _results(train, modes=("fast",)):
    return {"sizes": {"small": {"train": train, "decode": {mode: {} for mode in modes}, "batch_size": 64,
                                "source_vocab_size": 10, "target_vocab_size": 10}},
            "kernels": list(modes), "target_kernels": "fast", "input_wait": None, "fra_eng_run": None,
            "description": "test", "matmul_flop_per_s": {"float32": 1e9, "bfloat16": 2e9}, "matmul_measurements": [{}]}


def test_ratio_targets_are_the_median_of_each_rounds_ratio_with_their_spread():
    """A round's two times saw the same moment of the machine: the target is the median of the rounds'
    ratios (here 1.2, not 6.0 / 4.5 = 1.33 from medians of different rounds), its spread beside it."""
    from omegaconf import OmegaConf

    from zoo.bench.report import markdown, paired, targets

    train = {"luong": _train_row([6.0, 4.8, 7.0]), "seq2seq": _train_row([5.0, 4.0, 4.5]),
             "tutorial_rnn": _train_row([9.0, 7.2, 8.4], "reference")}
    assert paired(train, "luong", "seq2seq") == pytest.approx((1.2, 1.2, 1.5556), abs=1e-4)
    results = _results({"fast": train})
    limits = OmegaConf.load("conf/bench.yaml").targets
    found = {t["target"]: t for t in targets(results, limits)}
    step = found["[small] luong step time / seq2seq <= 1.3"]
    assert (step["value"], step["status"]) == (pytest.approx(1.2), "PASS")
    assert step["figure"] == "1.20x (3 rounds: 1.20-1.56x)"
    versus = found["[small] luong tokens/s / tutorial_rnn >= 1.3"]  # 9/6, 7.2/4.8, 8.4/7: 1.5, 1.5, 1.2
    assert versus["figure"] == "1.50x (3 rounds: 1.20-1.50x)" and versus["status"] == "PASS"
    results["targets"] = list(found.values())
    assert "| luong | fast | ours | 1 | 1.0 | 1 | 1.50x tutorial_rnn tok/s; 1.20x seq2seq step time |" in \
        markdown(results)


def test_targets_are_judged_with_fast_and_the_reference_figures_stand_beside_them():
    """Each model under both kernels modes: the speed-up is the median of the rounds' reference / fast
    ratios; a target's PASS/FAIL is fast's, the reference's figure and result beside it."""
    from omegaconf import OmegaConf

    from zoo.bench.report import markdown, targets

    fast = {"luong": _train_row([6.0, 4.8, 7.0]), "seq2seq": _train_row([5.0, 4.0, 4.5])}
    reference = {"luong": _train_row([12.0, 7.2, 21.0]), "seq2seq": _train_row([5.0, 4.0, 9.0])}  # 2, 1.5, 3
    results = _results({"fast": fast, "reference": reference}, modes=("fast", "reference"))
    results["targets"] = targets(results, OmegaConf.load("conf/bench.yaml").targets)
    step = next(t for t in results["targets"] if t["target"] == "[small] luong step time / seq2seq <= 1.3")
    assert (step["status"], step["beside"]) == ("PASS", {"reference": "2.33x (3 rounds: 1.80-2.40x), FAIL"})
    text = markdown(results)
    assert "| luong | small | 1.0 | 1.0 | 2.00x (1.50-3.00) | 1.20x seq2seq step time | 2.33x seq2seq step time |" in text
    assert "| seq2seq | small | 1.0 | 1.0 | 1.00x (1.00-2.00) |" in text
    assert f"| {step['target']} | {step['figure']} | PASS | 2.33x (3 rounds: 1.80-2.40x), FAIL |" in text
    assert "| luong | reference | ours |" in text  # the detailed table has a row per mode


@pytest.mark.parametrize("key, default", [("rounds", "train.rounds (5)"), ("fixed_rounds", "decode.fixed_rounds (10)")])
@pytest.mark.parametrize("value, shown", [("0", "0"), ("many", "'many'")])
def test_a_sizes_rounds_must_be_a_count(capsys, key, default, value, shown):
    with pytest.raises(SystemExit) as exit_info:
        zoo.bench.main(["sizes=[tiny]", f"size.tiny.{key}={value}", "input_wait.overrides=null"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"size.tiny.{key}={shown} is not valid" in err and default in err


def test_an_unknown_size_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        zoo.bench.main(["sizes=[huge]", "input_wait.overrides=null"])  # input_wait would need the corpus
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'huge'" in err and "tiny" in err and "base" in err


def test_a_decoded_model_must_be_measured(capsys):
    with pytest.raises(SystemExit) as exit_info:
        zoo.bench.main(["sizes=[tiny]", "models=[seq2seq]", "decode.models=[transformer]", "input_wait.overrides=null"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: decode.models: 'transformer' is not among the models measured. Available: seq2seq " \
                  "(default: null, all of them)"


@pytest.mark.slow
def test_tiny_benchmark_runs_and_writes_its_report(tmp_path):
    uri = empty_store(tmp_path)
    # decode.batch=1: the batch and the one sentence alone are one shape, so each search is traced once
    # per mode (what the test reads is which figures are made and how they are put together, not speed).
    overrides = [
        "sizes=[tiny]", "models=[transformer,seq2seq]", "references=[keras_transformer]", "variants.sizes=[tiny]",
        "variants.models=[seq2seq]", "decode.sizes=[tiny]", "decode.models=[seq2seq]", "decode.batch=1",
        "decode.recompute_tokens=6", "decode.recompute_batch=1", "decode.latency_calls=2", "decode.fixed_rounds=2", "size.tiny.fixed_rounds=3",
        "train.batches=2", "train.rounds=2", "train.warmup=1", "matmul.n=64", "matmul.repeats=2",
        "input_wait.overrides=null", f"output_dir={tmp_path / 'out'}", f"docs_page={tmp_path / 'docs' / 'bench.md'}",
        f"tracking.uri={uri}"]
    results = zoo.bench.main(overrides)  # as `python -m zoo.bench <overrides>`

    # Every model under both kernels modes, each its own traced step, stepped in the same rounds;
    # the variants in fast only.
    assert (results["kernels"], results["target_kernels"]) == (["fast", "reference"], "fast")
    train = results["sizes"]["tiny"]["train"]
    assert set(train["fast"]) == {"transformer", "seq2seq", "keras_transformer", "seq2seq@mixed_bfloat16",
                                  "seq2seq@xla"}
    assert set(train["reference"]) == {"transformer", "seq2seq", "keras_transformer"}
    for row in (row for rows in train.values() for row in rows.values()):
        assert row["tokens_per_s"] > 0 and row["step_ms"] > 0 and len(row["rounds_s"]) == 2
        assert row["train_flops_per_step"] > 0 and 0 < row["utilisation"]
        # Against the best matmul peak of the run: measured before the one size and after it.
        assert row["utilisation"] == pytest.approx(row["flop_per_s"] / results["matmul_flop_per_s"]["float32"])
    for name in ("transformer", "seq2seq"):  # the same model, the same seed, in either mode
        assert train["fast"][name]["params"] == train["reference"][name]["params"]
    measured = results["matmul_measurements"]
    assert len(measured) == 2 and all(m["float32"] > 0 for m in measured)
    assert results["matmul_flop_per_s"]["float32"] == max(m["float32"] for m in measured)
    # The transformer and its keras.layers.MultiHeadAttention reference do the same analytic work.
    assert train["fast"]["transformer"]["train_flops_per_step"] == \
        train["fast"]["keras_transformer"]["train_flops_per_step"]
    decode = results["sizes"]["tiny"]["decode"]
    assert set(decode) == {"fast", "reference"}
    assert set(decode["fast"]) == set(decode["reference"]) == {"seq2seq"}  # decode.models
    statuses = {t["target"]: t["status"] for t in results["targets"]}
    # beam-4 is judged against greedy on four rows per sentence (one encoding), at equal length (both
    # searches run fixed_steps, <eos> off); over greedy on one row, as decoded and one sentence beside it.
    for name, row in decode["fast"].items():
        assert row["fixed_steps"] > 0 and row["greedy_fixed_ms"] > 0 and row["beam4_fixed_ms"] > 0
        assert row["greedy_x4_fixed_ms"] > 0 and row["greedy_1_fixed_ms"] > 0 and row["beam4_1_fixed_ms"] > 0
        (beam,) = [t for t in results["targets"] if t["target"].startswith(f"[tiny] {name} beam-4 / greedy")]
        assert beam["target"] == f"[tiny] {name} beam-4 / greedy on 4 rows per sentence, both " \
                                 f"{row['fixed_steps']} steps <= 1.25"
        assert beam["value"] == pytest.approx(row["beam4_fixed_ms"] / row["greedy_x4_fixed_ms"])
        assert beam["status"] == ("PASS" if beam["value"] <= 1.25 else "FAIL")
        assert f"over greedy on 1 row per sentence: {row['beam4_fixed_ms'] / row['greedy_fixed_ms']:.2f}x" \
            in beam["figure"]
        assert f"as decoded: {row['greedy_sent_per_s'] / row['beam4_sent_per_s']:.2f}x" in beam["figure"]
        assert f"one sentence: {row['beam4_1_fixed_ms'] / row['greedy_1_fixed_ms']:.2f}x" in beam["figure"]
        # the spread over the rounds (each round's two calls one after the other) holds the ratio of the bests
        ratios = row["beam4_over_greedy_x4_rounds"]
        assert len(ratios) == 3 and f"3 rounds: {min(ratios):.2f}-{max(ratios):.2f}x" in beam["figure"]  # the size's
        assert min(ratios) - 1e-9 <= beam["value"] <= max(ratios) + 1e-9
        # the reference path's figure beside it, from its own searches on the same weights
        other = decode["reference"][name]
        assert beam["beside"]["reference"].startswith(f"{other['beam4_fixed_ms'] / other['greedy_x4_fixed_ms']:.2f}x")
    assert not any("beam-4 / greedy time per sentence" in t for t in statuses)  # the retired target

    assert set(statuses.values()) <= {"PASS", "FAIL", "NOT MEASURED"}
    versus = [t for t in results["targets"] if "transformer tokens/s / keras_transformer" in t["target"]]
    assert len(versus) == 1 and set(versus[0]["beside"]) == {"reference"}
    assert statuses["input waiting < 5% of step time (experiment=fra_eng)"] == "NOT MEASURED"
    bleu = [s for t, s in statuses.items() if "fra_eng test BLEU" in t]
    assert bleu == ["NOT MEASURED"]  # an empty store has no fra_eng run: never PASS without a figure
    for target in results["targets"]:
        assert (target["value"] is None) == (target["status"] == "NOT MEASURED")

    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Targets" in report and "AMX" in report
    from zoo.environ import onednn_enabled

    assert results["machine"]["onednn"] is onednn_enabled()  # what this process's TensorFlow runs
    assert ("oneDNN on" if onednn_enabled() else "oneDNN off") in report
    for target in results["targets"]:
        assert f"| {target['target']} | {target['figure']} | {target['status']} |" in report
    # the side-by-side table: each model's ms per step in both modes and what fast buys
    assert "| model | size | fast ms/step | reference ms/step | fast speed-up (reference / fast) |" in report
    for name in ("transformer", "seq2seq", "keras_transformer"):
        assert f"| {name} | tiny | {train['fast'][name]['step_ms']:.1f} | {train['reference'][name]['step_ms']:.1f} | " \
            in report
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert written["targets"] == results["targets"]
    # docs/benchmarks.md (here in tmp_path): the same tables, headed by the command, date and machine
    page = (tmp_path / "docs" / "bench.md").read_text().splitlines()
    assert page[0].startswith(f"_Written by `{shlex.join(['python', '-m', 'zoo.bench', *overrides])}` on ")
    assert results["machine"]["date"] in page[0] and results["machine"]["cpu"] in page[0]
    assert "# Benchmarks" in page and "\n".join(page[page.index("# Benchmarks") + 1:]) in report

    client = mlflow.tracking.MlflowClient(uri)
    run = client.get_run(results["run_id"])
    assert client.get_experiment(run.info.experiment_id).name == "bench"
    assert run.info.status == "FINISHED" and "zoo.machine" in run.data.tags
    assert run.data.metrics["tiny.transformer.tokens_per_s"] == pytest.approx(train["fast"]["transformer"]["tokens_per_s"])
    assert run.data.metrics["tiny.reference.transformer.tokens_per_s"] == \
        pytest.approx(train["reference"]["transformer"]["tokens_per_s"])
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"report.md", "results.json"}
