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
TOKENIZERS = ["word", "wordpiece", "sentencepiece"]

# One fresh process loads the three SavedModels (each an import of TensorFlow otherwise): for each,
# its translations of the given sources, and whether anything of the zoo was imported.
FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf, tensorflow_text
out = {}
for name, (saved, sources) in json.load(open(sys.argv[1], encoding="utf-8")).items():
    model = tf.saved_model.load(saved)
    out[name] = [t.decode("utf-8") for t in model.translate(tf.constant(sources))["text"].numpy()]
out["any_zoo"] = any(m == "zoo" or m.startswith("zoo.") for m in sys.modules)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A brief run per tokenizer, trained on first use: ``trained(name)`` -> run, its client and artifacts."""
    done = {}

    def get(tokenizer):
        if tokenizer not in done:
            done[tokenizer] = _train(tokenizer, tmp_path_factory.mktemp(tokenizer))
        return done[tokenizer]

    return get


def _train(tokenizer, workdir):
    import mlflow

    from zoo.training import train

    uri = empty_store(workdir)
    mp = pytest.MonkeyPatch()
    mp.setenv("MLFLOW_TRACKING_URI", uri)
    mp.chdir(workdir)
    overrides = ["model=transformer", "data=tatoeba", f"data.path={SHARED_CORPUS}", f"data.tokenizer={tokenizer}",
                 "data.max_examples=1000", "data.max_size=400", "data.val_size=50", "data.test_size=100",
                 "model.embed_dim=32", "model.intermediate_dim=64", "model.num_layers=1", "trainer.epochs=2",
                 "trainer.batch_size=64", "trainer.verbose=0", "tracking.attention_plots=0",
                 "tracking.predictions=100", "tracking.log_pyfunc=false"]
    try:
        result = train(compose(overrides))
    finally:
        mp.undo()
    client = mlflow.MlflowClient(uri)
    artifacts = Path(mlflow.artifacts.download_artifacts(run_id=result["run_id"], dst_path=str(workdir / "art"),
                                                         tracking_uri=uri))
    return client, client.get_run(result["run_id"]), artifacts


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_brief_training_on_fra_eng(tokenizer, trained):
    client, run, _ = trained(tokenizer)
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


def test_the_saved_models_translate_raw_english_in_a_fresh_process(trained, tmp_path):
    """Each tokenizer's SavedModel, in a process without the zoo: the in-memory model's translations
    of the test sources, and one translation for every spelling of the same sentence."""
    requests, rows = {}, {}
    for tokenizer in TOKENIZERS:
        _, _, artifacts = trained(tokenizer)
        rows[tokenizer] = list(csv.DictReader(open(artifacts / "predictions.csv", encoding="utf-8")))[:50]
        requests[tokenizer] = (str(artifacts / "saved_model"), [r["source"] for r in rows[tokenizer]] + SPELLINGS)
    (tmp_path / "requests.json").write_text(json.dumps(requests), encoding="utf-8")
    (tmp_path / "load.py").write_text(FRESH_PROCESS, encoding="utf-8")
    proc = run_python(["-I", str(tmp_path / "load.py"), str(tmp_path / "requests.json")], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["any_zoo"]
    for tokenizer in TOKENIZERS:
        n = len(rows[tokenizer])
        assert out[tokenizer][:n] == [r["hypothesis"] for r in rows[tokenizer]], tokenizer  # as in memory
        spelled = out[tokenizer][n:]
        assert spelled[0] and len(set(spelled)) == 1, (tokenizer, spelled)
