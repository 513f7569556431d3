"""A brief real training on the shared Tatoeba English-French corpus, and each tokenizer's SavedModel:
train -> MLflow run (BLEU with one and with all references) -> SavedModel in a fresh process that
takes raw English with odd casing and spacing.

What differs per tokenizer lives in zoo/data/tokenizers (fitting on the corpus, normalizing, splitting,
joining: the ops traced into an export); the run lifecycle (fit, score, log, export the translator that
calls the tokenizers) is the same code for all. So one tokenizer (sentencepiece) goes through a whole
run whose SavedModel translates; the others (word, wordpiece) are fitted on the same real corpus by the
run's data pipeline and exported as tokenizer SavedModels; all are checked in one fresh process.
(tests/data/test_subword.py checks every kind's tokenizer SavedModel against Python on probe strings.)

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
TRAINED = "sentencepiece"  # the whole run; the others: fitted, built and exported (``built`` below)
OVERRIDES = ["model=transformer", "data=tatoeba", f"data.path={SHARED_CORPUS}", "data.max_examples=1000",
             "data.max_size=400", "data.val_size=50", "data.test_size=100", "model.embed_dim=32",
             "model.intermediate_dim=64", "model.num_layers=1", "trainer.epochs=2", "trainer.batch_size=64",
             "trainer.verbose=0", "tracking.attention_plots=0", "tracking.predictions=100",
             "tracking.log_pyfunc=false"]

# One fresh process loads the SavedModels (each an import of TensorFlow otherwise): the run's translator
# (its translations and source tokens of the given sources) and each other tokenizer's (its ids and the
# text they detokenize to), and whether anything of the zoo was imported.
FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf, tensorflow_text
out = {}
for name, (kind, saved, sources) in json.load(open(sys.argv[1], encoding="utf-8")).items():
    model = tf.saved_model.load(saved)
    if kind == "translator":
        result = model.translate(tf.constant(sources))
        out[name] = {"text": [t.decode("utf-8") for t in result["text"].numpy()],
                     "source_tokens": [[t.decode("utf-8") for t in row if t] for row in result["source_tokens"].numpy()]}
    else:
        result = model.tokenize(tf.constant(sources))
        out[name] = {"ids": [[int(i) for i in row if i] for row in result["ids"].numpy()],
                     "text": [t.decode("utf-8") for t in result["text"].numpy()]}
out["any_zoo"] = any(m == "zoo" or m.startswith("zoo.") for m in sys.modules)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The brief run of ``TRAINED``: its client, run and downloaded artifacts."""
    import mlflow

    from zoo.training import train

    workdir = tmp_path_factory.mktemp(TRAINED)
    uri = empty_store(workdir)
    mp = pytest.MonkeyPatch()
    mp.setenv("MLFLOW_TRACKING_URI", uri)
    mp.chdir(workdir)
    try:
        result = train(compose([*OVERRIDES, f"data.tokenizer={TRAINED}"]))
    finally:
        mp.undo()
    client = mlflow.MlflowClient(uri)
    artifacts = Path(mlflow.artifacts.download_artifacts(run_id=result["run_id"], dst_path=str(workdir / "art"),
                                                         tracking_uri=uri))
    return client, client.get_run(result["run_id"]), artifacts


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each other tokenizer fitted on the same real corpus (the run's data pipeline, ``load_data``) and
    saved as a SavedModel of its own (its in-graph normalization, splitting, lookup and joining: what
    differs per tokenizer in an export); its task and what it gives in memory."""
    import tensorflow as tf

    from zoo.training.data import load_data

    done = {}
    for tokenizer in TOKENIZERS:
        if tokenizer == TRAINED:
            continue
        task = load_data(compose([*OVERRIDES, f"data.tokenizer={tokenizer}"])).task
        module = _tokenizer_module()(task.source_tokenizer)
        sources = list(task.splits["test"][0][:50]) + SPELLINGS
        directory = str(tmp_path_factory.mktemp(tokenizer) / "tokenizer")
        tf.saved_model.save(module, directory)
        done[tokenizer] = {"task": task, "saved_model": directory, "sources": sources,
                           **_lists(module.tokenize(tf.constant(sources)))}
    return done


def _tokenizer_module():
    import tensorflow as tf

    class TokenizerModule(tf.Module):
        """``tokenize``: raw strings -> ids (padded) and the canonical text the ids detokenize to."""

        def __init__(self, tokenizer):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def tokenize(self, strings):
            ids = self.tokenizer.tokenize(strings).to_tensor()
            return {"ids": ids, "text": self.tokenizer.detokenize(ids)}

    return TokenizerModule


def _lists(out):
    return {"ids": [[int(i) for i in row if i] for row in out["ids"].numpy()],
            "text": [t.decode("utf-8") for t in out["text"].numpy()]}


def test_brief_training_on_fra_eng(trained):
    client, run, _ = trained
    metrics, tags, params = run.data.metrics, run.data.tags, run.data.params
    assert params["stats.tokenizer"] == TRAINED
    losses = [m.value for m in client.get_metric_history(run.info.run_id, "train_loss")]
    assert len(losses) == 2 and losses[1] < losses[0]
    for key in ("test_bleu", "test_chrf", "test_bleu_multiref", "test_chrf_multiref"):
        assert 0.0 <= metrics[key] <= 100.0, key
    # Tatoeba repeats source sentences with other translations; the split keeps them together.
    test_examples = int(params["stats.test_examples"])
    assert 0 < metrics["test_distinct_sources"] < test_examples
    assert "nrefs:1" in tags["zoo.bleu_signature"] and "nrefs:var" in tags["zoo.bleu_multiref_signature"]
    assert tags["zoo.data_sha256"] == params["stats.corpus_sha256"]


def test_every_tokenizer_is_fitted_on_the_real_corpus(trained, built):
    """The same corpus and split as the run's, the vocabulary each tokenizer learnt from it."""
    _, run, _ = trained
    params = run.data.params
    for tokenizer, made in built.items():
        stats = made["task"].stats()
        assert stats["tokenizer"] == tokenizer
        assert str(stats["corpus_sha256"]) == params["stats.corpus_sha256"], tokenizer
        assert stats["test_examples"] >= 50, tokenizer
        source = made["task"].source_tokenizer
        assert 4 < source.vocab_size <= 400, (tokenizer, source.vocab_size)  # data.max_size


def test_the_saved_models_translate_raw_english_in_a_fresh_process(trained, built, tmp_path):
    """In a process without the zoo: the run's SavedModel gives the in-memory model's translations of the
    test sources, and one tokenization and one translation for every spelling of the same sentence; each
    other tokenizer's SavedModel gives its in-memory ids and text, and one tokenization for every spelling."""
    _, _, artifacts = trained
    rows = list(csv.DictReader(open(artifacts / "predictions.csv", encoding="utf-8")))[:50]
    requests = {TRAINED: ("translator", str(artifacts / "saved_model"), [r["source"] for r in rows] + SPELLINGS)}
    for tokenizer, made in built.items():
        requests[tokenizer] = ("tokenizer", made["saved_model"], made["sources"])
    (tmp_path / "requests.json").write_text(json.dumps(requests), encoding="utf-8")
    (tmp_path / "load.py").write_text(FRESH_PROCESS, encoding="utf-8")
    proc = run_python(["-I", str(tmp_path / "load.py"), str(tmp_path / "requests.json")], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["any_zoo"]
    n = len(rows)
    assert n == 50 and out[TRAINED]["text"][:n] == [r["hypothesis"] for r in rows]  # as in memory
    spelled, tokens = out[TRAINED]["text"][n:], out[TRAINED]["source_tokens"][n:]
    assert spelled[0] and len(set(spelled)) == 1, spelled
    assert tokens[0] and all(t == tokens[0] for t in tokens), tokens
    for tokenizer, made in built.items():
        assert out[tokenizer] == {"ids": made["ids"], "text": made["text"]}, tokenizer  # as in memory
        ids = out[tokenizer]["ids"][n:]
        assert ids[0] and all(i == ids[0] for i in ids), (tokenizer, ids)
