"""Sweeps as one group in MLflow: a parent run per ``python train.py -m ...``, a child per job, a summary.

The statistics are checked against hand-computed values; the sweeps are real ``train.py -m`` command
lines (run in this process by ``train_py_here``; the joblib launcher's jobs in its own worker
processes) into a SQLite store, read back through the MLflow client.
"""

import math

import pytest

from zoo.evaluation import sweep

from conftest import empty_store, train_py_here


def test_mean_std_and_95_percent_interval_are_students_t_over_the_seeds():
    # [1, 2, 3, 4]: mean 2.5, sample std sqrt(5/3) = 1.29099, t(0.975, 3) = 3.18245,
    # half-width 3.18245 * 1.29099 / 2 = 2.05426.
    stats = sweep.mean_std_ci([1.0, 2.0, 3.0, 4.0])
    assert stats["n"] == 4 and stats["mean"] == 2.5
    assert stats["std"] == pytest.approx(1.29099, abs=1e-5)
    assert stats["ci_low"] == pytest.approx(2.5 - 2.05426, abs=1e-4)
    assert stats["ci_high"] == pytest.approx(2.5 + 2.05426, abs=1e-4)
    assert math.isnan(sweep.mean_std_ci([1.0])["std"])


def test_children_that_differ_only_in_the_seed_form_a_group():
    runs = [{"overrides": f"model={m} seed={s} debug=smoke", "metrics": {"test_exact_match": v}}
            for m, s, v in [("luong", 1, 0.5), ("luong", 2, 0.7), ("bahdanau", 1, 0.9), ("bahdanau", 2, 0.8),
                            ("seq2seq", 1, 0.1)]]
    groups = {g["group"]: g for g in sweep.seed_groups(runs, "test_exact_match")}
    assert set(groups) == {"model=luong debug=smoke", "model=bahdanau debug=smoke"}  # seq2seq: one seed only
    assert groups["model=luong debug=smoke"]["mean"] == pytest.approx(0.6)
    assert groups["model=bahdanau debug=smoke"]["seeds"] == "1,2"
    assert sweep.without_seed("seed=3 model=luong") == "model=luong"
    header, rows = sweep.groups_table(list(groups.values()), "test_exact_match")
    assert header[3] == "test_exact_match mean" and len(rows) == 2


def _client(uri):
    import mlflow

    return mlflow.MlflowClient(uri)


def _only_parent(client):
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.zoo.kind = 'sweep'")
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


@pytest.mark.slow
def test_a_model_sweep_is_one_parent_with_a_readable_child_per_job_and_compare_reads_it(tmp_path, capsys):
    uri = empty_store(tmp_path)
    env = {"MLFLOW_TRACKING_URI": uri}
    # No attention maps or pyfunc model: nothing here reads them (zoo.compare --paired reads the saved_model/).
    # Two models, one epoch each: seq2seq is the quickest to trace; luong, a model with attention.
    code, printed = train_py_here(["-m", "model=seq2seq,luong", "debug=smoke", "trainer.epochs=1",
                                   "tracking.attention_plots=0", "tracking.log_pyfunc=false"], tmp_path, env)
    assert code == 0, printed[-3000:]
    client = _client(uri)
    parent = _only_parent(client)
    assert parent.info.status == "FINISHED"
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert sorted(c.info.run_name for c in children) == ["luong-general-dates", "seq2seq-dates"]
    all_runs = client.search_runs([parent.info.experiment_id])
    assert len(all_runs) == 3  # the parent and its two children, nothing else

    summary = {a.path for a in client.list_artifacts(parent.info.run_id, "summary")}
    assert {"summary/summary.csv", "summary/summary.md", "summary/summary.png",
            "summary/learning_curves.png"} <= summary
    table = client.download_artifacts(parent.info.run_id, "summary/summary.md", str(tmp_path))
    text = open(table, encoding="utf-8").read()
    assert "seq2seq-dates" in text and "luong-general-dates" in text and "test_exact_match" in text

    # A readable child: name, description with the result and the command, datasets, the record.
    child = next(c for c in children if c.info.run_name.startswith("luong"))
    note = child.data.tags["mlflow.note.content"]
    assert "test_exact_match = " in note and "python train.py model=luong debug=smoke" in note
    datasets = {d.dataset.name: d for d in child.inputs.dataset_inputs}
    assert set(datasets) == {"dates-train", "dates-val", "dates-test"}
    assert '"examples": 64' in datasets["dates-train"].dataset.profile
    assert child.data.tags["zoo.objective"] == "test_exact_match"
    assert child.data.tags["zoo.git_dirty"] in ("true", "false", "none")
    artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
    assert "environment.json" in artifacts and "hydra" in artifacts
    assert {a.path for a in client.list_artifacts(child.info.run_id, "hydra")} >= {
        "hydra/config.yaml", "hydra/overrides.yaml"}

    # zoo.compare reads the sweep (here, in this process: tests/test_qa_end_to_end.py runs `python -m zoo.compare`).
    from zoo.compare import main as compare

    assert compare(["--sweep", parent.info.run_id, "--no-log", "--tracking-uri", uri]) == 0
    shown = capsys.readouterr().out
    assert "seq2seq-dates" in shown and "luong-general-dates" in shown
    assert compare(["--tracking-uri", uri]) == 0
    listed = capsys.readouterr().out
    assert "seq2seq" in listed and "luong" in listed and "sweep" not in listed

    a, b = (next(c.info.run_id for c in children if c.info.run_name.startswith(m)) for m in ("seq2seq", "luong"))
    assert compare(["--paired", a, b, "--tracking-uri", uri]) == 0
    both = capsys.readouterr().out
    assert f"BLEU({a[:8]}) - BLEU({b[:8]}) = " in both and "95% CI [" in both


@pytest.mark.slow
def test_a_seed_sweep_in_parallel_jobs_logs_mean_std_and_interval_on_the_parent(tmp_path):
    uri = empty_store(tmp_path)
    # No keras_model/ export: nothing here reads it (tests/test_credentials.py checks the regression export).
    # Hydra's joblib launcher runs the jobs in two worker processes; the sweep's parent is this process.
    code, printed = train_py_here(["-m", "experiment=nadaraya_watson", "seed=1,2,3", "trainer.verbose=0",
                                   "tracking.export=false", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
                                  tmp_path, {"MLFLOW_TRACKING_URI": uri})
    assert code == 0, printed[-3000:]
    client = _client(uri)
    parent = _only_parent(client)
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert sorted(c.info.run_name for c in children) == [f"nadaraya_watson-kernel_regression-seed{s}" for s in (1, 2, 3)]
    values = [c.data.metrics["test_mse_parametric"] for c in children]
    assert len(set(values)) == 3  # the seeds make different data
    expected = sweep.mean_std_ci(values)
    logged = parent.data.metrics
    assert logged["test_mse_parametric_mean"] == pytest.approx(expected["mean"])
    assert logged["test_mse_parametric_std"] == pytest.approx(expected["std"])
    assert logged["test_mse_parametric_ci95_low"] == pytest.approx(expected["ci_low"])
    assert logged["test_mse_parametric_ci95_high"] == pytest.approx(expected["ci_high"])
    assert logged["test_mse_parametric_ci95_low"] < logged["test_mse_parametric_mean"] < logged[
        "test_mse_parametric_ci95_high"]
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "summary")} >= {"summary/seeds.md",
                                                                                       "summary/seeds.csv"}
    best = min(children, key=lambda c: c.data.metrics["test_mse_parametric"])  # an error: lower is better
    assert parent.data.tags["zoo.best_run"] == best.info.run_id
    assert logged["best_test_mse_parametric"] == pytest.approx(min(values))
