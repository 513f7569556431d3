"""zoo.compare builds its table from the MLflow store, newest run per model."""

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
    assert table(experiment="nope", uri=mlflow_store) is None
