"""d2l's attention-pooling experiment: data, the model, and the tracked run."""

import numpy as np
import pytest

from zoo.data.kernel_regression import generate, true_function

from conftest import compose


def test_data_is_deterministic_sorted_and_follows_the_function():
    a, b = generate(seed=3), generate(seed=3)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert len(a["x_train"]) == 50 and np.all(np.diff(a["x_train"]) >= 0)
    assert a["x_train"].min() >= 0 and a["x_train"].max() < 5
    np.testing.assert_allclose(a["x_test"], np.arange(0, 5, 0.1), atol=1e-6)
    np.testing.assert_allclose(a["y_test"], true_function(a["x_test"]), rtol=1e-6)
    residual = a["y_train"] - true_function(a["x_train"])
    assert 0.3 < residual.std() < 0.7  # eps ~ N(0, 0.5)


def test_leave_one_out_excludes_each_point_from_its_own_keys():
    from zoo.training.regression import leave_one_out

    x = np.array([0.0, 1.0, 2.0], "float32")
    queries, keys, values = leave_one_out(x, x * 10)
    assert queries.shape == (3, 1) and keys.shape == (3, 2)
    assert keys.tolist() == [[1.0, 2.0], [0.0, 2.0], [0.0, 1.0]]
    assert values.tolist() == [[10.0, 20.0], [0.0, 20.0], [0.0, 10.0]]


def test_regression_model_needs_regression_data():
    from zoo.config import ConfigError, validate_train

    with pytest.raises(ConfigError, match="model=nadaraya_watson is a regression model and data=dates"):
        validate_train(compose(["model=nadaraya_watson"]))


@pytest.mark.slow
def test_experiment_logs_the_three_estimators(mlflow_store):
    import mlflow

    from zoo.training import train

    result = train(compose(["experiment=nadaraya_watson", "trainer.verbose=0"]))
    client = mlflow.MlflowClient(mlflow_store)
    run = client.get_run(result["run_id"])
    metrics = run.data.metrics
    assert run.info.status == "FINISHED"
    # The seed experiment's story: attention pooling beats the average, learning w beats a fixed kernel.
    assert metrics["test_mse_parametric"] < metrics["test_mse_non_parametric"] < metrics["test_mse_average_pooling"]
    assert len(client.get_metric_history(result["run_id"], "train_loss")) == 5
    artifacts = {a.path for a in client.list_artifacts(result["run_id"], "plots")}
    assert artifacts == {"plots/fits.png", "plots/attention_non-parametric.png", "plots/attention_parametric.png"}
    assert run.data.params["model.kernel"] == "gaussian" and run.data.params["optimizer.name"] == "sgd"
