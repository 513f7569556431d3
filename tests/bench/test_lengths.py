"""zoo.bench lengths=[...]: the growth exponent on known numbers, the tables and targets from known rows,
the docs page's sections, bad settings, and one tiny run end to end (no timing asserted)."""

import math

import mlflow
import pytest
from omegaconf import OmegaConf

import zoo.bench
from zoo.bench import lengths
from zoo.bench.report import sections, write_page, write_section
from zoo.config import bench_problems

from conftest import empty_store


def test_the_exponent_is_the_log_log_slope_between_the_two_longest_lengths():
    # y = T^2 from 1,024 on; the short lengths, in any order, do not count
    assert lengths.exponent([(4096, 640.0), (256, 7.0), (1024, 40.0)]) == pytest.approx((2.0, 1024, 4096))
    # y = 3 T: 1; a figure that is missing or not positive (nothing on a log axis) is passed over
    assert lengths.exponent([(8, 24.0), (16, 48.0), (32, None), (64, 0.0)]) == pytest.approx((1.0, 8, 16))
    assert lengths.exponent([(100, 5.0), (1000, 5.0 * 10 ** 1.5)]) == pytest.approx((1.5, 100, 1000))
    assert lengths.exponent([(8, 1.0)]) is None and lengths.exponent([(8, 1.0), (16, None)]) is None


def _measured(length, time_ms=None, memory_mib=None, status=lengths.OK, detail=""):
    row = {"length": length, "status": status}
    if status == lengths.OK:
        row.update(time_ms=time_ms, memory_mib=memory_mib)
    else:
        row["detail"] = detail
    return row


def _results(rows):
    results = {"command": "python -m zoo.bench 'lengths=[1024,4096,16384]'", "lengths": [1024, 4096, 16384],
               "machine": {"date": "today"}, "description": "a test machine",
               "settings": {"batch": 1, "d_model": 256, "num_heads": 4, "repeats": 3, "time_limit_s": 240.0,
                            "memory_limit_mb": 8192.0, "kernels": "fast", "options_text": "none"},
               "rows": {}}
    for name, (label, by_length) in rows.items():
        row = {"label": label, "kind": "ours", "by_length": by_length}
        row["exponents"] = lengths.growth(row)
        results["rows"][name] = row
    return results


LIMITS = OmegaConf.load("conf/bench.yaml").length_bench.targets


def test_tables_and_targets_from_known_rows():
    """multi_head quadratic in memory, out of memory at the longest length; memory_efficient linear;
    linear's time linear, performer's over the limit: each row, cell and result as computed by hand."""
    oom = "resident memory passed 8,192 MiB"
    results = _results({
        "multi_head": ("multi_head", [_measured(1024, 300.0, 100.0), _measured(4096, 4800.0, 1600.0),
                                      _measured(16384, status=lengths.OUT_OF_MEMORY, detail=oom)]),
        "memory_efficient": ("memory_efficient", [_measured(1024, 500.0, 20.0), _measured(4096, 8000.0, 80.0),
                                                  _measured(16384, 128000.0, 320.0)]),
        "linear": ("linear", [_measured(1024, 10.0, 5.0), _measured(4096, 40.0, 20.0),
                              _measured(16384, 160.0, 80.0)]),
        "performer": ("performer", [_measured(1024, 10.0, 5.0), _measured(4096, 40.0, 20.0),
                                    _measured(16384, 320.0, 80.0)]),
        "linformer": ("linformer", [_measured(1024, 10.0, 5.0),
                                    _measured(4096, status=lengths.OVER_TIME, detail="still running after 240 s"),
                                    _measured(16384, status=lengths.OVER_TIME, detail="as at 4,096 (not run)")])})
    results["targets"] = lengths.targets(results, LIMITS)
    found = {t["target"]: t for t in results["targets"]}
    assert found["memory_efficient memory exponent <= 1.2"]["value"] == pytest.approx(1.0)
    assert found["memory_efficient memory exponent <= 1.2"]["status"] == "PASS"
    quadratic = found["multi_head memory exponent >= 1.6 (about quadratic)"]  # 100 -> 1600 MiB over 4x: 2
    assert (quadratic["value"], quadratic["status"], quadratic["figure"]) == (pytest.approx(2.0), "PASS",
                                                                              "2.00 (1,024 -> 4,096)")
    ratio = found["memory_efficient memory / multi_head's at 16,384 <= 0.125 (or multi_head out of memory)"]
    assert ratio["status"] == "PASS" and "multi_head out of memory" in ratio["figure"]
    assert found["linear time exponent <= 1.2"]["status"] == "PASS"
    performer = found["performer time exponent <= 1.2"]  # 40 -> 320 ms over 4x: 1.5
    assert (performer["value"], performer["status"]) == (pytest.approx(1.5), "FAIL")
    assert found["linformer time exponent <= 1.2"]["status"] == "NOT MEASURED"

    text = lengths.markdown(results, "figure.png")
    assert "| mechanism | 1,024 | 4,096 | 16,384 | exponent (lengths) |" in text
    assert "| multi_head | 300.0 | 4,800.0 | out of memory | 2.00 (1,024 -> 4,096) |" in text  # time
    assert "| multi_head | 100 | 1,600 | out of memory | 2.00 (1,024 -> 4,096) |" in text  # memory
    assert "| memory_efficient | 20 | 80 | 320 | 1.00 (4,096 -> 16,384) |" in text
    assert "| linformer | 10.0 | over time limit | over time limit |  |" in text
    assert f"multi_head at 16,384: out of memory ({oom})" in text
    assert "![time and memory against length, log-log](figure.png)" in text
    assert "| performer time exponent <= 1.2 | 1.50 (4,096 -> 16,384) | FAIL |" in text
    assert "4 PASS, 1 FAIL, 1 NOT MEASURED." in text
    # measured beside it, the ratio where both ran
    results["rows"]["multi_head"]["by_length"][2] = _measured(16384, 76800.0, 25600.0)
    both = lengths.targets(results, LIMITS)[2]
    assert (both["value"], both["status"]) == (pytest.approx(320 / 25600), "PASS")


def test_the_two_writers_of_the_docs_page_keep_each_others_sections(tmp_path):
    page = tmp_path / "benchmarks.md"
    write_page(page, "# Benchmarks\n\nfull run 1\n")
    write_section(page, lengths.SECTION, "## Cost as the length grows\n\nlengths run 1\n")
    first = page.read_text()
    assert first.startswith("# Benchmarks\n\nfull run 1\n") and "lengths run 1" in first
    write_page(page, "# Benchmarks\n\nfull run 2\n")  # the full bench rewrites its part, keeps the section
    text = page.read_text()
    assert "full run 1" not in text and "full run 2" in text and "lengths run 1" in text
    assert set(sections(text)) == {lengths.SECTION}
    write_section(page, lengths.SECTION, "## Cost as the length grows\n\nlengths run 2\n")  # replaced in place
    text = page.read_text()
    assert "lengths run 1" not in text and text.count("## Cost as the length grows") == 1
    assert text.index("full run 2") < text.index("lengths run 2")
    new = tmp_path / "new.md"
    write_section(new, lengths.SECTION, "only this")
    assert new.read_text() == f"<!-- {lengths.SECTION} -->\nonly this\n<!-- /{lengths.SECTION} -->\n"


def test_the_figure_is_written(tmp_path):
    from zoo.plots.cost_by_length import cost_by_length

    path = cost_by_length({"a": [(8, 1.0, 2.0), (16, 2.0, 8.0)], "b": [(8, 3.0, None), (16, None, 0.0)]},
                          str(tmp_path / "cost.png"), title="t", footnote="cmd\nmachine")
    assert path == str(tmp_path / "cost.png") and (tmp_path / "cost.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("override, shown", [("lengths=[0]", "lengths=[0]"), ("lengths=abc", "lengths='abc'"),
                                             ("lengths=[64]", "lengths=[64]"), ("lengths=[8,8]", "lengths=[8, 8]")])
def test_bad_lengths_are_one_line_naming_the_key(override, shown):
    found = bench_problems(zoo.bench.compose([override]))
    assert len(found) == 1 and found[0].startswith(f"{shown} is not valid: expected a list of at least two")


def test_bad_length_bench_settings_are_named():
    found = bench_problems(zoo.bench.compose(["lengths=[8,16]", "length_bench.attentions=[additive]",
                                              "length_bench.references=[torch]", "length_bench.num_heads=3",
                                              "length_bench.time_limit_s=0"]))
    assert found == [
        "length_bench.attentions: 'additive' is not valid. Available: multi_head, differential, linear, linformer, "
        "memory_efficient, performer",
        "length_bench.references: 'torch' is not valid. Available: keras_mha",
        "length_bench.d_model=256 is not valid: expected a multiple of length_bench.num_heads (3).",
        "length_bench.time_limit_s=0 is not valid: expected a number > 0."]


@pytest.mark.slow
def test_a_process_over_its_limits_is_reported_not_a_crash():
    cfg = zoo.bench.compose(["lengths=[8,16]", "length_bench.d_model=8", "length_bench.num_heads=2"])
    spec = lengths.spec_of(cfg, "linear", "ours", 16)
    over_memory = lengths.run_child(spec, time_limit_s=60, memory_limit_mb=1)
    assert over_memory["status"] == lengths.OUT_OF_MEMORY and "passed 1 MiB" in over_memory["detail"]
    over_time = lengths.run_child(spec, time_limit_s=0.05, memory_limit_mb=None)
    assert over_time["status"] == lengths.OVER_TIME and over_time["wall_s"] < 30


@pytest.mark.slow
def test_tiny_lengths_run_end_to_end(tmp_path):
    uri = empty_store(tmp_path)
    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    write_page(page, "# Benchmarks\n\nthe full bench's tables\n")
    overrides = ["lengths=[16,8]", "length_bench.d_model=8", "length_bench.num_heads=2",
                 "length_bench.attentions=[linear]", "length_bench.repeats=2", f"output_dir={tmp_path / 'out'}",
                 f"docs_page={page}", f"length_bench.docs_figure={tmp_path / 'docs' / 'lengths.png'}",
                 f"tracking.uri={uri}"]
    results = zoo.bench.main(overrides)  # as `python -m zoo.bench <overrides>`

    assert results["lengths"] == [8, 16]
    assert list(results["rows"]) == ["linear", "keras_mha"]
    assert results["rows"]["keras_mha"]["label"] == "keras.layers.MultiHeadAttention"
    for row in results["rows"].values():
        assert [m["length"] for m in row["by_length"]] == [8, 16]
        for m in row["by_length"]:
            assert m["status"] == lengths.OK and m["time_ms"] > 0 and m["memory_mib"] >= 0
            assert 1 <= len(m["times_ms"]) <= 2 and m["params"] > 0
        assert row["exponents"] == lengths.growth(row)
    assert results["rows"]["linear"]["by_length"][0]["params"] == 4 * (8 * 8 + 8)  # Q, K, V, O: 8 x 8 + 8
    text = (tmp_path / "out" / "lengths.md").read_text()
    for row in results["rows"].values():
        cells = " | ".join(f"{m['time_ms']:,.1f}" for m in row["by_length"])
        assert f"| {row['label']} | {cells} |" in text
    assert (tmp_path / "out" / "lengths.png").is_file() and (tmp_path / "docs" / "lengths.png").is_file()
    written = page.read_text()  # the full bench's part kept, the section after it, linking the figure
    assert written.startswith("# Benchmarks\n\nthe full bench's tables\n")
    assert sections(written)[lengths.SECTION].count(text.strip().splitlines()[0]) == 1
    assert "![time and memory against length, log-log](lengths.png)" in written

    client = mlflow.tracking.MlflowClient(uri)
    run = client.get_run(results["run_id"])
    assert client.get_experiment(run.info.experiment_id).name == "bench" and run.info.status == "FINISHED"
    history = client.get_metric_history(run.info.run_id, "lengths.linear.time_ms")
    assert sorted((m.step, m.value) for m in history) == [
        (m["length"], pytest.approx(m["time_ms"])) for m in results["rows"]["linear"]["by_length"]]
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"lengths.md", "lengths.json", "lengths.png"}
    assert not math.isnan(run.data.metrics["targets_pass"])
