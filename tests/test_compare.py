"""zoo.compare builds its tables from the MLflow store, newest run per model; --by-length also a figure in a run."""

import pytest

from zoo.compare import table


def _log_run(mlflow, model, attention, metric, seconds):
    with mlflow.start_run():
        mlflow.set_tags({"zoo.model": model, "zoo.data": "dates"})
        if attention:
            mlflow.log_param("model.attention", attention)
        mlflow.log_metrics({"test_exact_match": metric, "test_bleu": 100 * metric, "train_seconds": seconds,
                            "num_params": 1234})


def test_table_lists_the_newest_finished_run_per_model(mlflow_store):
    import mlflow

    mlflow.set_tracking_uri(mlflow_store)
    mlflow.set_experiment("attention-zoo")
    _log_run(mlflow, "bahdanau", "additive", 0.5, 10)
    _log_run(mlflow, "bahdanau", "additive", 0.9, 20)
    _log_run(mlflow, "seq2seq", None, 0.7, 30)
    lines = table(uri=mlflow_store).splitlines()
    assert lines[0].startswith("| model | attention | data | test_exact_match")
    rows = [line.split(" | ") for line in lines[2:]]
    assert [(r[0].strip("| "), r[1], r[3]) for r in rows] == [("bahdanau", "additive", "0.9000"), ("seq2seq", "-", "0.7000")]
    assert [(r[5], r[6]) for r in rows] == [("20", "1,234"), ("30", "1,234")]
    assert table(experiment="nope", uri=mlflow_store) is None
    # A run that logged its score but neither its training time nor its size (logged by hand, or by an
    # older zoo): a dash in those columns, not a crash on MLflow's NaN.
    with mlflow.start_run():
        mlflow.set_tags({"zoo.model": "luong", "zoo.data": "dates"})
        mlflow.log_metric("test_exact_match", 0.8)
    row = next(line.split(" | ") for line in table(uri=mlflow_store).splitlines() if line.startswith("| luong"))
    assert (row[3], row[5], row[6]) == ("0.8000", "-", "-")


def _log_scored_run(mlflow, workdir, model, attention, hypotheses, references):
    """A run logged the way training logs its test split: ``log_outputs`` on (hand-made) predictions."""
    import zoo.metrics
    from zoo.evaluation import log_outputs, text_metrics

    tokens = lambda texts: [[c.encode() for c in t] + [b"<eos>"] for t in texts]  # noqa: E731
    outputs = {"text": hypotheses, "source_tokens": tokens([r[::-1] for r in references]),
               "target_tokens": tokens(hypotheses), "attention": [None] * len(references)}
    metrics, signatures = text_metrics(hypotheses, references)
    # score_split adds the by-length metrics text_metrics does not know (a test's throwaway one)
    metrics.update(zoo.metrics.score_all(hypotheses, references, [m for m in zoo.metrics.by_length_names()
                                                                  if m not in metrics]))
    with mlflow.start_run() as run:
        mlflow.set_tags({"zoo.model": model, "zoo.data": "reverse"})
        if attention:
            mlflow.log_param("model.attention", attention)
        mlflow.log_metric("train_seconds", 5)
        workdir.mkdir()
        log_outputs("test", [r[::-1] for r in references], references, metrics, signatures, outputs, 0, 10, workdir)
    return run.info.run_id


def test_by_length_compares_the_runs_curves_and_logs_the_figure(mlflow_store, tmp_path):
    import mlflow

    from zoo.compare import by_length, main

    mlflow.set_tracking_uri(mlflow_store)
    mlflow.set_experiment("attention-zoo")
    refs = ["ab", "cd", "abcdefgh", "hgfedcba", "abcdefghijklmnop", "ponmlkjihgfedcba"]
    seq2seq = _log_scored_run(mlflow, tmp_path / "a", "seq2seq", None, ["ab", "cd", "abcdefgx", "x", "abc", "p"], refs)
    bahdanau = _log_scored_run(mlflow, tmp_path / "b", "bahdanau", "additive", list(refs), refs)
    result = by_length(data="reverse", uri=mlflow_store, out=str(tmp_path / "fig.png"))
    lines = result["table"].splitlines()
    assert lines[0] == "| model | 1-2 | 7-8 | 15-16 | all (test_exact_match) | train s | run |"
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:5] for line in lines[2:]}
    assert rows == {"bahdanau (additive)": ["1.000", "1.000", "1.000", "1.000"],
                    "seq2seq": ["1.000", "0.000", "0.000", "0.333"], "examples": ["2", "2", "2", ""]}
    assert (tmp_path / "fig.png").stat().st_size > 1000

    run = mlflow.get_run(result["run_id"])
    assert run.info.run_name == "compare-reverse" and run.data.tags["zoo.kind"] == "comparison"
    assert set(run.data.tags["zoo.compared_runs"].split(",")) == {seq2seq, bahdanau}
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(result["run_id"])}
    assert artifacts == {"by_length.png", "by_length.csv", "by_length.md", "runs.md"}
    # The comparison run is not a model: the plain table and the next comparison skip it.
    assert [r.split(" | ")[0].strip("| ") for r in table(uri=mlflow_store).splitlines()[2:]] == ["bahdanau", "seq2seq"]
    assert main(["--data", "reverse", "--by-length", "--no-log", "--metric", "test_chrf"]) == 0
    assert main(["--data", "dates", "--by-length"]) == 1
    assert main(["--by-length", "--metric", "test_perplexity"]) == 2


@pytest.mark.slow
def test_training_runs_log_scores_by_length_that_compare_reads(mlflow_store, tmp_path):
    """A training run's by-length scores, compared with another run's. One training run (what it logs is
    the lifecycle's, the same for every model); the other run is logged by hand as training logs its
    test split (``_log_scored_run``), so the comparison has two models."""
    import mlflow

    from zoo.compare import by_length
    from zoo.evaluation.by_length import read_csv
    from zoo.training import train

    from conftest import compose

    common = ["data=reverse", "debug=smoke", "data.max_length=8", "tracking.export=false", "tracking.attention_plots=0",
              "trainer.epochs=1", "tracking.predictions=0"]
    runs = [train(compose([*common, "model=seq2seq"]))["run_id"]]
    refs = ["ab", "cd", "abcdefgh", "hgfedcba"]
    mlflow.set_tracking_uri(mlflow_store)
    mlflow.set_experiment("attention-zoo")
    runs.append(_log_scored_run(mlflow, tmp_path / "b", "bahdanau", "additive", list(refs), refs))
    mlflow.MlflowClient().log_metric(runs[-1], "num_params", 1234)  # as a training run logs it
    path = mlflow.artifacts.download_artifacts(run_id=runs[0], artifact_path="by_length/test.csv",
                                               tracking_uri=mlflow_store)
    rows = read_csv(path)
    assert sum(r["count"] for r in rows) == 16 and rows[-1]["max_length"] == 8
    assert all(r["token_accuracy"] is not None for r in rows)  # the training run passes its tokenizer
    result = by_length(data="reverse", uri=mlflow_store)
    assert set(result["series"]) == {"seq2seq", "bahdanau (additive)"}
    assert set(mlflow.get_run(result["run_id"]).data.tags["zoo.compared_runs"].split(",")) == set(runs)


def test_a_registered_metric_is_compared_formatted_and_ranked_by_the_registry(mlflow_store, tmp_path, mismatch):
    import mlflow

    from zoo.compare import by_length

    mlflow.set_tracking_uri(mlflow_store)
    mlflow.set_experiment("attention-zoo")
    refs = ["ab", "cd", "abcdefgh", "hgfedcba"]
    _log_scored_run(mlflow, tmp_path / "a", "seq2seq", None, ["ab", "cd", "abcdefgh", "x"], refs)
    _log_scored_run(mlflow, tmp_path / "b", "bahdanau", "additive", ["ab", "xx", "abcdefgh", "y"], refs)
    # Lower is better: with rank=True (--rank) the model with fewer wrong translations comes first.
    result = by_length(data="reverse", metric="test_mismatch", uri=mlflow_store, log=False, rank=True)
    lines = result["table"].splitlines()
    assert lines[0] == "| model | 2 | 8 | all (test_mismatch) | train s | run |"
    assert [line.split(" | ")[:4] for line in lines[2:4]] == [["| seq2seq", "0.00", "50.00", "25.00"],
                                                               ["| bahdanau (additive)", "50.00", "50.00", "50.00"]]
    ranked = table(data="reverse", metric="test_mismatch", uri=mlflow_store, rank=True).splitlines()[2:]
    assert [(r.split(" | ")[0].strip("| "), r.split(" | ")[3]) for r in ranked] == [("seq2seq", "25.00"),
                                                                                    ("bahdanau", "50.00")]
    plain = table(data="reverse", metric="test_exact_match", uri=mlflow_store).splitlines()[2:]
    assert [(r.split(" | ")[0].strip("| "), r.split(" | ")[3]) for r in plain] == [("bahdanau", "0.5000"),
                                                                                   ("seq2seq", "0.7500")]
