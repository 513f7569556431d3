"""Text tokenizers (word, wordpiece, sentencepiece, char with text normalization).

The same tokens in Python (``python_split``), in a ``tf.data`` map and in a saved-and-reloaded
``tf.Module``; detokenization gives back the canonical text; vocabularies keep the reserved ids.
"""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytest.importorskip("tensorflow_text")

from zoo.data.tokenizers import (  # noqa: E402
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIALS,
    UNK,
    UNK_ID,
    fit_tokenizer,
    load_tokenizer,
    normalize_text,
)

NBSP, NNBSP = "\u00a0", "\u202f"
CORPUS = [
    "Je suis fatigué.", "Tu es fatiguée.", "Nous sommes fatigués.", "Je suis prêt.", "Es-tu prêt\u202f?",
    "Êtes-vous prêts ?", "Viens ici\u00a0!", "Venez ici !", "Il a dit « oui ».", "Elle a dit «non».",
    "Je ne sais pas.", "Attends, s’il te plaît.", "J'ai froid.", "Il fait froid aujourd'hui.",
    "Nous avons mangé des pommes.", "Ils ont mangé du pain.", "Je mange une pomme.", "Tu manges du pain.",
    "Où est la gare\u202f?", "La gare est là-bas.", "Je t'aime.", "Je vous aime bien.", "Il pleut; rentrons.",
    "Note : trois pommes.", "C'est incroyable!", "Quoi ?!", "Il est 10:30.", "Ça coûte 3,50 euros.",
] * 3
PROBES = ["Je suis prêt.", "Viens ici\u202f!", "Elle a dit « oui »,  tu sais.", "", "  ", "Ça\u00a0?!",
          "je mange des pommes; ils mangent du pain : ok", "Zébulon xylophone ™ ﬁn", b"bad \xff bytes",
          "\ufeffJ’ai froid.\r\n", "日本語 😀", "x" * 300]
KINDS = ["word", "wordpiece", "sentencepiece", "char"]
STRINGS = tf.TensorSpec([None], tf.string)


ENGLISH = ["I am tired.", "We are ready!", "Where is the station?", "It is cold today.", "I love you.",
           "They ate bread and apples.", "Wait, please."] * 3


@pytest.fixture(scope="module")
def english_tokenizers():
    return {kind: fit_tokenizer(kind, ENGLISH, min_freq=1, max_size=60, normalization="text") for kind in KINDS}


@pytest.fixture(scope="module")
def tokenizers():
    return {
        "word": fit_tokenizer("word", CORPUS, min_freq=1),
        "wordpiece": fit_tokenizer("wordpiece", CORPUS, min_freq=1, max_size=120),
        "sentencepiece": fit_tokenizer("sentencepiece", CORPUS, max_size=120),
        "char": fit_tokenizer("char", CORPUS, normalization="text"),
    }


def _decode(rows):
    return [[t.decode("utf-8") for t in row] for row in rows]


def _with_eos_and_junk(ids):
    """``[B, T]`` ids followed by ``<eos>`` and tokens that detokenize must ignore."""
    rows = ids.shape[0]
    eos = tf.fill([rows, 1], tf.constant(EOS_ID, tf.int64))
    junk = tf.fill([rows, 2], tf.constant(len(SPECIALS), tf.int64))
    return tf.concat([tf.cast(ids, tf.int64), eos, junk], axis=1)


class TokenizerModule(tf.Module):
    """What the Translator does with its two tokenizers, as a SavedModel."""

    def __init__(self, tokenizer, other):
        super().__init__()
        self.tokenizer = tokenizer
        self.other = other  # a second tokenizer of the same kind: resources must not get mixed up

    @tf.function(input_signature=[STRINGS])
    def split(self, strings):
        tokens = self.tokenizer.split(strings)
        return {"tokens": tokens.to_tensor(default_value=""), "lengths": tokens.row_lengths(),
                "ids": self.tokenizer.lookup(tokens).to_tensor(default_value=PAD_ID),
                "other": self.other.split(strings).to_tensor(default_value="")}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64)])
    def detokenize(self, ids):
        return {"text": self.tokenizer.detokenize(ids), "tokens": self.tokenizer.id_to_token(ids)}


def test_normalize_text_canonical_forms():
    cases = {
        f"Va{NBSP}!": "va!", f"Cours{NNBSP}!": "cours!", "Go !": "go!", "Hi, you .": "hi, you.",
        "«Oui»,dit-il": "« oui »,dit-il", "« Non  »": "« non »", "C’est l’été": "c'est l'été",
        "\ufeffTab\there\r\n": "tab here", "ﬁn\u200b": "fin", "Straße": "strasse", b"a\xffb": "a\ufffdb",
        "Quoi ?!": "quoi?!", "": "", "  ": "",
    }
    out = normalize_text(tf.constant(list(cases))).numpy()
    assert [s.decode() for s in out] == list(cases.values())
    again = normalize_text(tf.constant(out)).numpy()
    assert list(again) == list(out)  # idempotent
    assert normalize_text(tf.constant(["Je Suis"]), lowercase=False).numpy()[0].decode() == "Je Suis"


def test_word_split_separates_punctuation_like_d2l(tokenizers):
    split = tokenizers["word"].python_split(["Go.", f"Va{NBSP}!", "Hi?!", "J'ai 3,50 euros.", "« Oui », dit-il."])
    assert split == [["go", "."], ["va", "!"], ["hi", "?", "!"], ["j'ai", "3", ",50", "euros", "."],
                     ["«", "oui", "»", ",", "dit-il", "."]]


@pytest.mark.parametrize("kind", KINDS)
def test_python_tf_data_and_saved_model_tokenize_identically(tokenizers, english_tokenizers, kind, tmp_path):
    tokenizer, other = tokenizers[kind], english_tokenizers[kind]
    expected = tokenizer.python_split(PROBES)
    expected_ids = [[tokenizer.vocabulary.index(t) if t in tokenizer.vocabulary else UNK_ID for t in row]
                    for row in expected]
    assert tokenizer.tokenize(tf.constant(PROBES)).to_list() == expected_ids

    ds = tf.data.Dataset.from_tensor_slices(tf.constant(PROBES)).batch(5).map(
        lambda s: tokenizer.split(s).to_tensor(default_value=""))
    from_data = [row for batch in ds for row in _decode(batch.numpy())]
    assert [[t for t in row if t] for row in from_data] == expected

    module = TokenizerModule(tokenizer, other)
    tf.saved_model.save(module, str(tmp_path / "tokenizer"))
    loaded = tf.saved_model.load(str(tmp_path / "tokenizer"))
    out = loaded.split(tf.constant(PROBES))
    lengths = out["lengths"].numpy()
    assert [row[:n] for row, n in zip(_decode(out["tokens"].numpy()), lengths)] == expected
    assert [row[:n].tolist() for row, n in zip(out["ids"].numpy(), lengths)] == expected_ids
    assert [[t for t in row if t] for row in _decode(out["other"].numpy())] == other.python_split(PROBES)

    ids = _with_eos_and_junk(tokenizer.tokenize(tf.constant(PROBES)).to_tensor())
    in_memory = tokenizer.detokenize(ids).numpy()
    reloaded = loaded.detokenize(ids)
    assert list(reloaded["text"].numpy()) == list(in_memory)
    assert reloaded["tokens"].numpy().tolist() == tokenizer.id_to_token(ids).numpy().tolist()


@pytest.mark.parametrize("kind", KINDS)
def test_detokenize_gives_back_the_canonical_text(tokenizers, kind):
    tokenizer = tokenizers[kind]
    texts = CORPUS[:28] + ["", "Je suis prêt !"]  # in-vocabulary text
    ids = _with_eos_and_junk(tokenizer.tokenize(tf.constant(texts)).to_tensor())
    assert [t.decode() for t in tokenizer.detokenize(ids).numpy()] == tokenizer.python_normalize(texts)
    empty = tokenizer.detokenize(tf.zeros([2, 0], tf.int64)).numpy()
    assert list(empty) == [b"", b""]
    specials = tokenizer.detokenize(tf.constant([[BOS_ID, PAD_ID, UNK_ID, EOS_ID]], tf.int64)).numpy()
    assert list(specials) == [b""]


@pytest.mark.parametrize("kind", KINDS)
def test_vocabularies_start_with_the_reserved_tokens(tokenizers, kind):
    tokenizer = tokenizers[kind]
    assert tokenizer.vocabulary[:4] == SPECIALS and tokenizer.vocab_size == len(tokenizer.vocabulary)
    assert len(set(tokenizer.vocabulary)) == tokenizer.vocab_size
    assert tokenizer.lookup(tf.ragged.constant([["<pad>", "<unk>", "<bos>", "<eos>", "\u0000nope"]])).to_list() == [
        [PAD_ID, UNK_ID, BOS_ID, EOS_ID, UNK_ID]]


def test_wordpiece_cuts_rare_words_and_marks_unknown_characters(tokenizers):
    tokenizer = tokenizers["wordpiece"]
    assert tokenizer.vocab_size <= 120
    assert any(t.startswith("##") for t in tokenizer.vocabulary)
    pieces = tokenizer.python_split(["Nous mangeons.", "Je 😀."])
    assert pieces[0][-1] == "." and any(p.startswith("##") for p in pieces[0])
    assert pieces[1] == ["je", UNK, "."]


def test_sentencepiece_matches_the_sentencepiece_library(tokenizers):
    spm = pytest.importorskip("sentencepiece")
    tokenizer = tokenizers["sentencepiece"]
    processor = spm.SentencePieceProcessor(model_proto=tokenizer.model)
    texts = tokenizer.python_normalize(PROBES[:8])
    assert tokenizer.python_split(PROBES[:8]) == [processor.encode(t, out_type=str) for t in texts]
    assert [processor.piece_to_id(p) for p in SPECIALS] == [PAD_ID, UNK_ID, BOS_ID, EOS_ID]


def test_fitting_is_deterministic_and_respects_limits():
    a = fit_tokenizer("sentencepiece", CORPUS, max_size=100)
    b = fit_tokenizer("sentencepiece", CORPUS, max_size=100)
    assert a.model == b.model
    assert fit_tokenizer("wordpiece", CORPUS, max_size=90).vocabulary == fit_tokenizer(
        "wordpiece", CORPUS, max_size=90).vocabulary
    word = fit_tokenizer("word", CORPUS[:28] + ["rare"], min_freq=2)
    assert "rare" not in word.vocabulary and "je" in word.vocabulary
    assert fit_tokenizer("word", CORPUS, max_size=10).vocab_size == 10
    with pytest.raises(ValueError, match="Unknown tokenizer 'bpe'. Available: char, sentencepiece, word, wordpiece"):
        fit_tokenizer("bpe", CORPUS)


@pytest.mark.parametrize("kind", KINDS)
def test_save_artifacts_and_load_tokenizer_round_trip(tokenizers, kind, tmp_path):
    tokenizer = tokenizers[kind]
    paths = tokenizer.save_artifacts(tmp_path / kind)
    names = sorted(p.rsplit("/", 1)[-1] for p in paths)
    extra = ["sentencepiece.model"] if kind == "sentencepiece" else []
    assert names == sorted(["vocab.txt", "tokenizer.json"] + extra)
    lines = (tmp_path / kind / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert lines[:4] == list(SPECIALS) and lines[: tokenizer.vocab_size] == list(tokenizer.vocabulary)
    again = load_tokenizer(tmp_path / kind)
    assert type(again) is type(tokenizer) and again.vocabulary == tokenizer.vocabulary
    np.testing.assert_array_equal(again.tokenize(tf.constant(PROBES)).to_tensor().numpy(),
                                  tokenizer.tokenize(tf.constant(PROBES)).to_tensor().numpy())
