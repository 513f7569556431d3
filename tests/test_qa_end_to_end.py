"""Story QA end to end: train.py on data=story_qa -> MLflow run -> SavedModel in a fresh process ->
evaluate (in this process) -> pyfunc -> zoo.compare. One small real run (a memory network, seconds) is shared."""

import csv
import json
import math
from pathlib import Path

import pytest

from conftest import compose, empty_store, evaluate_here, run_python

pytestmark = pytest.mark.slow

KINDS = ("single_fact", "two_facts", "yes_no", "counting", "relation")
OVERRIDES = ["model=memory_network", "data=story_qa", "data.train_size=600", "data.val_size=50",
             "data.test_size=100", "data.max_sentences=6", "trainer.epochs=3", "trainer.batch_size=32",
             "trainer.verbose=0", "tracking.attention_plots=5", "tracking.predictions=100"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    import mlflow

    from zoo.training import train

    workdir = tmp_path_factory.mktemp("qa_run")
    uri = empty_store(workdir)
    mp = pytest.MonkeyPatch()
    mp.setenv("MLFLOW_TRACKING_URI", uri)
    mp.chdir(workdir)
    try:
        result = train(compose(OVERRIDES))
    finally:
        mp.undo()
    client = mlflow.MlflowClient(uri)
    artifacts = Path(mlflow.artifacts.download_artifacts(run_id=result["run_id"], dst_path=str(workdir / "artifacts"),
                                                         tracking_uri=uri))
    return {"result": result, "uri": uri, "client": client, "artifacts": artifacts, "workdir": workdir}


def test_run_records_the_qa_contract(trained):
    client, run_id = trained["client"], trained["result"]["run_id"]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["model.name"] == "memory_network" and run.data.params["data.name"] == "story_qa"
    assert run.data.params["model.hops"] == "3" and run.data.params["stats.vocab_size"].isdigit()
    assert run.data.tags["zoo.model"] == "memory_network" and run.data.tags["zoo.data"] == "story_qa"
    epochs = int(run.data.metrics["epochs_trained"])
    for key in ("train_loss", "val_loss", "val_accuracy", "val_evidence"):
        history = client.get_metric_history(run_id, key)
        assert [m.step for m in history] == list(range(1, epochs + 1)), key
        assert all(math.isfinite(m.value) for m in history)
    losses = [m.value for m in client.get_metric_history(run_id, "train_loss")]
    assert losses[-1] < losses[0]
    metrics = run.data.metrics
    assert metrics["test_accuracy"] == pytest.approx(trained["result"]["test_accuracy"])
    for kind in KINDS:
        assert 0.0 <= metrics[f"test_accuracy_{kind}"] <= 1.0 and 0.0 <= metrics[f"test_evidence_{kind}"] <= 1.0
    hops = [metrics[f"test_evidence_hop{h}"] for h in (1, 2, 3)]
    assert metrics["test_evidence"] == pytest.approx(sum(hops) / 3)
    assert metrics["num_params"] > 0 and metrics["train_seconds"] > 0
    art = trained["artifacts"]
    assert (art / "saved_model" / "saved_model.pb").exists()
    assert (art / "saved_model" / "assets.extra" / "config.yaml").exists()
    assert (art / "vocab" / "words" / "vocab.txt").exists()
    plots = sorted(p.name for p in (art / "attention").glob("*.png"))
    assert plots == [f"test_{i:02d}_sentences.png" for i in range(5)]  # one per kind first; no word map here
    from zoo.plots.explorer import read_explorer

    explored = read_explorer(art / "attention" / "explorer.html")["examples"]
    assert len(explored) == 5 and [v["rows"] for v in explored[0]["views"]] == [["hop 1", "hop 2", "hop 3"]]
    assert all(v.get("gold") for e in explored for v in e["views"])  # each story's evidence marked
    rows = list(csv.DictReader(open(art / "predictions.csv", encoding="utf-8")))
    assert len(rows) == 100 and {r["kind"] for r in rows} == set(KINDS)
    accuracy = sum(int(r["correct"]) for r in rows) / len(rows)
    assert accuracy == pytest.approx(metrics["test_accuracy"])


FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
m = tf.saved_model.load(sys.argv[1])
pairs = json.load(open(sys.argv[2]))
out = m.answer(tf.constant([p[0] for p in pairs]), tf.constant([p[1] for p in pairs]))
serving = m.signatures["serving_default"](story=tf.constant([p[0] for p in pairs[:2]]),
                                          question=tf.constant([p[1] for p in pairs[:2]]))
print(json.dumps({
    "answer": [a.decode("utf-8") for a in out["answer"].numpy()],
    "serving": [a.decode("utf-8") for a in serving["answer"].numpy()],
    "shapes": {k: list(v.shape) for k, v in out.items()},
    "dtypes": {k: v.dtype.name for k, v in out.items()},
    "attention_sums": out["sentence_attention"].numpy().sum(-1).tolist(),
    "any_zoo": any(m == "zoo" or m.startswith("zoo.") for m in sys.modules),
}))
"""


def test_saved_model_answers_in_a_fresh_process_like_the_run(trained, tmp_path):
    rows = list(csv.DictReader(open(trained["artifacts"] / "predictions.csv", encoding="utf-8")))[:40]
    pairs = [[r["story"].replace(" | ", "\n"), r["question"]] for r in rows]
    pairs += [["", ""], ["Mary moved to the bathroom. John went to the hallway.", "Where is Mary?"],
              ["Zorro flew to Mars.\n" * 80, "Where is Zorro?"]]
    (tmp_path / "pairs.json").write_text(json.dumps(pairs), encoding="utf-8")
    script = tmp_path / "load.py"
    script.write_text(FRESH_PROCESS, encoding="utf-8")
    result = run_python(["-I", str(script), str(trained["artifacts"] / "saved_model"), str(tmp_path / "pairs.json")],
                        cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert not out["any_zoo"]
    assert out["answer"][:40] == [r["prediction"] for r in rows]  # the run's own answers
    assert out["serving"] == out["answer"][:2]
    n, (b, hops, s) = len(pairs), out["shapes"]["sentence_attention"]
    assert b == n and hops == 3 and s == 50  # the 80-sentence story is cut to the last memory_size=50
    assert out["shapes"]["answer"] == [n] and out["shapes"]["word_attention"][:2] == [n, s]
    assert out["dtypes"]["sentence_attention"] == "float32" and out["dtypes"]["answer"] == "string"
    sums = out["attention_sums"]
    assert all(abs(v - 1.0) < 1e-4 for row in sums[:40] for v in row)


def test_evaluate_reproduces_the_run_metric(trained, monkeypatch, capsys):
    """evaluate on a story-QA run, in this process (tests/test_end_to_end.py runs ``evaluate.py``)."""
    client, run_id = trained["client"], trained["result"]["run_id"]
    evaluate_here(monkeypatch, trained["uri"], trained["workdir"], [f"run_id={run_id}"])
    printed = capsys.readouterr().out
    assert "single_fact" in printed and "evidence" in printed
    history = client.get_metric_history(run_id, "test_accuracy")
    assert len(history) == 2 and history[-1].value == pytest.approx(history[0].value)
    evidence = client.get_metric_history(run_id, "test_evidence")
    assert evidence[-1].value == pytest.approx(evidence[0].value)


def test_pyfunc_answers_a_story_and_question_dataframe(trained):
    import mlflow
    import pandas as pd

    mlflow.set_tracking_uri(trained["uri"])
    model = mlflow.pyfunc.load_model(f"runs:/{trained['result']['run_id']}/model")
    rows = list(csv.DictReader(open(trained["artifacts"] / "predictions.csv", encoding="utf-8")))[:5]
    frame = pd.DataFrame({"story": [r["story"].replace(" | ", "\n") for r in rows],
                          "question": [r["question"] for r in rows]})
    assert list(model.predict(frame)) == [r["prediction"] for r in rows]
    with pytest.raises(Exception, match="question"):
        model.predict(pd.DataFrame({"story": ["Mary moved to the bathroom."]}))


def test_compare_prints_accuracy_and_evidence_per_kind(trained, monkeypatch, capsys):
    """``python -m zoo.compare --data story_qa``, its ``main`` in this process (tests/test_compare.py and
    tests/test_bad_input.py run the command line itself)."""
    from zoo.compare import main

    monkeypatch.setenv("MLFLOW_TRACKING_URI", trained["uri"])
    capsys.readouterr()
    assert main(["--data", "story_qa"]) == 0
    header, _, row = capsys.readouterr().out.strip().splitlines()[:3]
    assert header.split(" | ")[1:6] == list(KINDS)
    metrics = trained["client"].get_run(trained["result"]["run_id"]).data.metrics
    cell = row.split(" | ")[1]
    assert cell == f"{metrics['test_accuracy_single_fact']:.3f} / {metrics['test_evidence_single_fact']:.3f}"
