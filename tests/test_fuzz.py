"""Fuzzing (hypothesis): every tokenizer and the exported SavedModel's ``translate`` and
``translate_nbest`` take any text: random Unicode, control characters, right-to-left marks,
combining characters, empty and whitespace-only strings, 10,000-character strings, batches of 1
and 1,000. Never an error, outputs within the configured maximum length, attention rows finite;
tokenizer round trips hold on text made of the tokenizer's own vocabulary."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytest.importorskip("tensorflow_text")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from zoo.data.tokenizers import fit_tokenizer, names  # noqa: E402

from conftest import compose  # noqa: E402

CORPUS = [
    "Je suis fatigué.", "Tu es fatiguée.", "Nous sommes prêts !", "Es-tu prêt\u202f?", "Il a dit « oui ».",
    "Je ne sais pas.", "Attends, s’il te plaît.", "J'ai froid.", "Nous avons mangé des pommes.",
    "Ils ont mangé du pain.", "I am tired.", "We are ready!", "Come here, please.", "He said yes.",
] * 3
ODD = [
    "", " ", "\t\n  \r", "\u200f\u202eright to left\u202c", "\u0645\u0631\u062d\u0628\u0627", "e\u0301\u0301\u0301",
    "\x00\x01\x1b[31m\x7f", "\ufeff", "\U0001f600\U0001f3f3\ufe0f\u200d\U0001f308", "\u0000" * 5, "a" * 10_000,
    "Je suis fatigué. " * 600, "\ud7ff\ue000\uffff", "ß İ ﬁ Ⅻ", "\u2028\u2029\u0085",
]
TEXT = st.one_of(st.text(max_size=60), st.sampled_from(ODD),
                 st.text(alphabet=st.characters(categories=["Cc", "Cf", "Mn", "Zs", "Zl", "Zp"]), max_size=20))
BATCHES = st.lists(TEXT, min_size=1, max_size=6)
FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(scope="module", params=names())
def tokenizer(request):
    return fit_tokenizer(request.param, CORPUS, min_freq=1)


@given(batch=BATCHES)
@FUZZ
def test_every_tokenizer_takes_any_text(tokenizer, batch):
    ids = tokenizer.tokenize(tf.constant(batch))
    flat = ids.flat_values.numpy()
    assert ids.shape[0] == len(batch)
    assert flat.size == 0 or (flat.min() >= 0 and flat.max() < tokenizer.vocab_size)
    text = tokenizer.detokenize(ids.to_tensor()).numpy()
    assert len(text) == len(batch)
    for value in text:
        value.decode("utf-8")  # valid UTF-8 out, whatever came in


def test_every_tokenizer_takes_a_batch_of_1000_and_long_strings(tokenizer):
    batch = [ODD[i % len(ODD)] for i in range(1000)]
    ids = tokenizer.tokenize(tf.constant(batch))
    assert ids.shape[0] == 1000
    assert tokenizer.detokenize(ids.to_tensor()).shape == (1000,)


def vocabulary_text(tokenizer):
    """Text made of the corpus's words (in their canonical form), every piece of which the tokenizer knows."""
    words = sorted({w for line in tokenizer.python_normalize(CORPUS) for w in line.split()})
    return st.lists(st.sampled_from(words), min_size=0, max_size=8).map(" ".join)


@given(data=st.data())
@FUZZ
def test_round_trips_hold_on_the_vocabulary(tokenizer, data):
    """detokenize(tokenize(x)) is x's canonical text, for text the tokenizer has every piece of."""
    texts = data.draw(st.lists(vocabulary_text(tokenizer), min_size=1, max_size=4))
    ids = tokenizer.tokenize(tf.constant(texts)).to_tensor()
    assert [t.decode() for t in tokenizer.detokenize(ids).numpy()] == tokenizer.python_normalize(texts)


# -- the SavedModel ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A tiny model (debug=smoke) exported once and loaded back as a SavedModel."""
    import tensorflow_text  # noqa: F401 - ops of the SavedModel

    from zoo.training.data import load_data
    from zoo.training.export import export, make_translator
    from zoo.training.model import build
    from zoo.training.runtime import reset_policy, setup

    cfg = compose(["debug=smoke", "decoding.max_length=12"])
    runtime = setup(cfg.trainer, 0)
    try:
        task = load_data(cfg).task
        model, _ = build(cfg, task, runtime)
        directory = tmp_path_factory.mktemp("fuzz")
        paths = export(make_translator(model, task, cfg), model, task, "seed: 0\n", str(directory))
    finally:
        reset_policy()
    return tf.saved_model.load(paths["saved_model"]), int(cfg.decoding.max_length), int(cfg.decoding.beam_size)


def check_translation(out, batch, max_length):
    size = len(batch)
    assert out["text"].shape == (size,)
    attention = out["attention"].numpy()
    assert attention.shape[0] == size and attention.shape[1] <= max_length
    assert np.all(np.isfinite(attention))
    assert out["target_tokens"].shape[0] == size and out["target_tokens"].shape[1] <= max_length
    for row in out["target_tokens"].numpy():
        assert sum(t != b"" for t in row) <= max_length


@given(batch=BATCHES)
@FUZZ
def test_the_saved_model_translates_any_text(served, batch):
    saved, max_length, beam_size = served
    check_translation(saved.translate(tf.constant(batch)), batch, max_length)
    nbest = saved.translate_nbest(tf.constant(batch))
    assert nbest["text"].shape == (len(batch), beam_size)
    assert np.all(np.isfinite(nbest["scores"].numpy()) | np.isneginf(nbest["scores"].numpy()))


def test_the_saved_model_takes_batches_of_1_and_1000(served):
    saved, max_length, beam_size = served
    for batch in (["\u202e"], [ODD[i % len(ODD)] for i in range(1000)]):
        check_translation(saved.translate(tf.constant(batch)), batch, max_length)
    nbest = saved.translate_nbest(tf.constant(["a" * 10_000]))
    assert nbest["text"].shape == (1, beam_size)
