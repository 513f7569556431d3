"""A brief real training on the shared Tatoeba English-French corpus, for each tokenizer:
train -> MLflow run (BLEU with one and with all references) -> SavedModel in a fresh process
that takes raw English with odd casing and spacing.

Needs ../shared/data/fra-eng.zip (beside the repository); skipped with the reason when absent.
"""

import csv
import json
from pathlib import Path

import pytest

from conftest import ROOT, compose, empty_store, run_python

SHARED_CORPUS = ROOT.parent / "shared" / "data" / "fra-eng.zip"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not SHARED_CORPUS.exists(), reason=f"the shared corpus is not at {SHARED_CORPUS} "
                                 f"(../shared/data/fra-eng.zip from the repository root)")]

# The same sentence written four ways: the graph normalizes case, spacing and the apostrophe.
SPELLINGS = ["i'm home.", "I'M HOME .", "  I’m   home.", "i'M hOmE ."]

FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf, tensorflow_text
model = tf.saved_model.load(sys.argv[1])
sources = json.load(open(sys.argv[2], encoding="utf-8"))
out = model.translate(tf.constant(sources))
print(json.dumps({"text": [t.decode("utf-8") for t in out["text"].numpy()],
                  "any_zoo": any(m == "zoo" or m.startswith("zoo.") for m in sys.modules)}))
"""


@pytest.mark.parametrize("tokenizer", ["word", "wordpiece", "sentencepiece"])
def test_brief_training_on_fra_eng(tokenizer, tmp_path, monkeypatch):
    import mlflow

    from zoo.training import train

    uri = empty_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    overrides = ["model=transformer", "data=tatoeba", f"data.path={SHARED_CORPUS}", f"data.tokenizer={tokenizer}",
                 "data.max_examples=3000", "data.max_size=600", "data.val_size=100", "data.test_size=200",
                 "model.embed_dim=32", "model.intermediate_dim=64", "model.num_layers=1", "trainer.epochs=2",
                 "trainer.batch_size=64", "trainer.verbose=0", "tracking.attention_plots=1",
                 "tracking.predictions=200", "tracking.log_pyfunc=false"]
    result = train(compose(overrides))

    client = mlflow.MlflowClient(uri)
    run = client.get_run(result["run_id"])
    metrics, tags, params = run.data.metrics, run.data.tags, run.data.params
    assert params["stats.tokenizer"] == tokenizer
    losses = [m.value for m in client.get_metric_history(run.info.run_id, "train_loss")]
    assert len(losses) == 2 and losses[1] < losses[0]
    for key in ("test_bleu", "test_chrf", "test_bleu_multiref", "test_chrf_multiref"):
        assert 0.0 <= metrics[key] <= 100.0, key
    # Tatoeba repeats source sentences with other translations; the split keeps them together.
    test_examples = int(params["stats.test_examples"])
    assert 0 < metrics["test_distinct_sources"] < test_examples
    assert "nrefs:1" in tags["zoo.bleu_signature"] and "nrefs:var" in tags["zoo.bleu_multiref_signature"]
    assert tags["zoo.data_sha256"] == params["stats.corpus_sha256"]

    artifacts = Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, dst_path=str(tmp_path / "art"),
                                                         tracking_uri=uri))
    rows = list(csv.DictReader(open(artifacts / "predictions.csv", encoding="utf-8")))[:50]
    sources = [r["source"] for r in rows] + SPELLINGS
    (tmp_path / "sources.json").write_text(json.dumps(sources), encoding="utf-8")
    (tmp_path / "load.py").write_text(FRESH_PROCESS, encoding="utf-8")
    proc = run_python(["-I", str(tmp_path / "load.py"), str(artifacts / "saved_model"), str(tmp_path / "sources.json")],
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["any_zoo"]
    assert out["text"][: len(rows)] == [r["hypothesis"] for r in rows]  # same as the in-memory model
    spelled = out["text"][len(rows):]
    assert spelled[0] and len(set(spelled)) == 1, spelled
