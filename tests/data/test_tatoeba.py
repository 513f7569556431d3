"""data=tatoeba: reading manythings.org pair files in every shape, bad lines, splits, stats.

Every test writes its own small corpus into ``tmp_path``; one test reads the shared
``../shared/data/fra-eng.zip`` (skipped when it is absent).
"""

import hashlib
import zipfile

import pytest

tf = pytest.importorskip("tensorflow")

from zoo.data import DATASETS, load_task, make_dataset, manythings  # noqa: E402
from zoo.data.task import length_boundaries, resolve_bucket_boundaries  # noqa: E402
from zoo.data.tokenizers import EOS_ID  # noqa: E402
from zoo.errors import ConfigError  # noqa: E402

from conftest import ROOT, compose  # noqa: E402

SHARED_CORPUS = ROOT.parent / "shared" / "data" / "fra-eng.zip"
NBSP, NNBSP = "\u00a0", "\u202f"
SUBJECTS = [("I am", "Je suis"), ("You are", "Tu es"), ("We are", "Nous sommes"), ("They are", "Ils sont")]
STATES = [("tired", "fatigués"), ("happy", "heureux"), ("ready", "prêts"), ("late", "en retard"),
          ("here", "là"), ("cold", "froid")]
EXTRA = [
    ("Come here!", f"Viens ici{NNBSP}!"),
    ("Come here!", f"Venez ici{NBSP}!"),  # a second translation of the same source
    ("Are you ready?", f"Es-tu prêt{NNBSP}?"),
    ("Are you ready?", "Êtes-vous prêts ?"),
    ("He said “yes”.", "Il a dit « oui »."),
    ("I don’t know.", "Je ne sais pas."),
    ("Wait, please.", "Attends, s’il te plaît."),
    ("Stop!", f"Arrête{NBSP}!"),
]
PAIRS = [(f"{en} {sen}.", f"{fr} {sfr}.") for en, fr in SUBJECTS for sen, sfr in STATES] + EXTRA  # 32 pairs
ATTRIBUTION = "CC-BY 2.0 (France) Attribution: tatoeba.org #{} (alice) & #{} (bob)"


def lines(pairs=PAIRS, columns=2):
    if columns == 2:
        return [f"{en}\t{fr}" for en, fr in pairs]
    return [f"{en}\t{fr}\t{ATTRIBUTION.format(i, i + 1)}" for i, (en, fr) in enumerate(pairs)]


def write_corpus(tmp_path, shape, text_lines, name="fra-eng"):
    """Writes a pair file: ``zip_root``, ``zip_folder`` or ``txt``; returns its path."""
    data = ("\n".join(text_lines) + "\n").encode("utf-8")
    if shape == "txt":
        path = tmp_path / "fra.txt"
        path.write_bytes(data)
        return path
    path = tmp_path / f"{name}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        member = "fra.txt" if shape == "zip_root" else f"{name}/fra.txt"
        archive.writestr("_about.txt", "Attribution: www.manythings.org/anki and tatoeba.org\n")
        archive.writestr(member, data)
    return path


def task_for(path, **overrides):
    cfg = {"name": "tatoeba", "path": str(path), "tokenizer": "word", "min_freq": 1, "max_len": None,
           "val_size": 4, "test_size": 4, "seed": 0}
    cfg.update(overrides)
    return load_task(cfg)


@pytest.mark.parametrize("shape", ["zip_root", "zip_folder", "txt"])
@pytest.mark.parametrize("columns", [2, 3])
def test_every_file_shape_reads_the_same_pairs(tmp_path, shape, columns):
    path = write_corpus(tmp_path, shape, lines(columns=columns))
    corpus = manythings.read_pair_file(path, "fra")
    if shape == "zip_folder":  # any name: a path without a pair finds the one .txt
        assert task_for(path, pair=None).stats()["pairs_read"] == len(PAIRS)
    assert corpus.pairs == PAIRS
    assert corpus.member == (None if shape == "txt" else ("fra.txt" if shape == "zip_root" else "fra-eng/fra.txt"))
    assert corpus.three_columns == (len(PAIRS) if columns == 3 else 0)
    assert corpus.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert not any(corpus.dropped.values())


def test_bad_lines_are_skipped_counted_or_repaired(tmp_path):
    good = lines()
    raw = [manythings.BOM + good[0].encode() + b"\r"]  # BOM and CRLF: repaired, kept
    raw += [g.encode() + b"\r" for g in good[1:5]]
    raw += [b"no tab on this line", b"", b"   ", b"Empty target\t", b"\tCible seule", b"  \t  ",
            b"Bad \xff\xfe bytes\tOctets invalides", b"a\tb\tc\td", good[5].encode()]  # last one: a duplicate
    raw += [g.encode() for g in good[5:]]
    path = tmp_path / "fra.txt"
    path.write_bytes(b"\n".join(raw) + b"\n")
    corpus = manythings.read_pair_file(path)
    assert corpus.pairs == PAIRS
    assert corpus.lines == len(raw)
    assert corpus.dropped == {"blank": 3, "no_tab": 1, "bad_columns": 1, "empty_side": 2, "invalid_utf8": 1,
                              "duplicate": 1}
    assert corpus.repaired == {"bom": 1, "crlf": 5}

    task = task_for(path)
    stats = task.stats()
    assert stats["lines_read"] == len(raw) and stats["pairs_read"] == len(PAIRS)
    assert stats["dropped_no_tab"] == 1 and stats["dropped_invalid_utf8"] == 1 and stats["repaired_bom"] == 1
    dropped = sum(v for k, v in stats.items() if k.startswith("dropped_"))
    assert stats["pairs_kept"] + dropped == stats["lines_read"]
    assert stats["pairs_kept"] == sum(stats[f"{s}_examples"] for s in ("train", "val", "test"))
    sources = sum((src for src, _ in task.splits.values()), [])
    assert "I am tired." in sources and not any("\ufeff" in s or "\r" in s for s in sources)  # repaired


def test_a_corpus_without_usable_lines_is_a_clear_error(tmp_path):
    path = tmp_path / "fra.txt"
    path.write_bytes(b"only text\n\xff\xfe\t\x80\n\n")
    with pytest.raises(manythings.CorpusError, match="no usable sentence pair.*no_tab=1.*invalid_utf8=1"):
        task_for(path)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ConfigError, match="no usable sentence pair"):
        task_for(empty)
    not_zip = tmp_path / "fra-eng.zip"
    not_zip.write_bytes(b"<html>rate limited</html>")
    with pytest.raises(ConfigError, match="is not a zip archive"):
        task_for(not_zip)


def test_a_missing_file_says_which_file_to_put_where(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(manythings.CorpusNotFoundError, match=r"data.path=nowhere/fra-eng.zip does not exist.*"
                                                            r"relative to the working directory"):
        task_for("nowhere/fra-eng.zip")
    monkeypatch.setenv("ZOO_DATA_DIR", str(tmp_path / "data"))
    cfg = {"name": "tatoeba", "pair": "deu-eng", "cache_dir": str(tmp_path / "cache"), "seed": 0}
    with pytest.raises(ConfigError) as error:
        load_task(cfg)
    message = str(error.value)
    assert "deu-eng.zip" in message and "ZOO_DATA_DIR" in message and str(tmp_path / "data") in message
    assert "https://www.manythings.org/anki/deu-eng.zip" in message and "data.download=true" in message
    with pytest.raises(ConfigError, match="data.pair='french' is not valid"):
        load_task({"name": "tatoeba", "pair": "french"})
    with pytest.raises(ConfigError, match="needs data.path=<file> or data.pair="):
        load_task({"name": "tatoeba", "pair": None, "path": None})


def test_the_pair_is_found_in_zoo_data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    write_corpus(folder, "zip_folder", lines(columns=3))
    monkeypatch.setenv("ZOO_DATA_DIR", str(folder))
    task = load_task({"name": "tatoeba", "pair": "fra-eng", "min_freq": 1, "val_size": 4, "test_size": 4, "seed": 1})
    assert task.stats()["corpus_file"] == "fra-eng.zip:fra-eng/fra.txt"
    assert task.metric == "bleu" and task.attribution and "tatoeba.org" in task.attribution
    assert task.fingerprint == hashlib.sha256((folder / "fra-eng.zip").read_bytes()).hexdigest()


def test_splits_are_deterministic_and_grouped_by_source_sentence(tmp_path):
    path = write_corpus(tmp_path, "txt", lines())
    first, again, other = task_for(path, seed=3), task_for(path, seed=3), task_for(path, seed=4)
    assert first.splits == again.splits
    assert first.splits != other.splits
    for task in (first, other):
        sources = {name: set(src) for name, (src, _) in task.splits.items()}
        assert not sources["train"] & sources["val"]
        assert not sources["train"] & sources["test"]
        assert not sources["val"] & sources["test"]
        for _name, (src, _) in task.splits.items():  # both translations of a source stay together
            for repeated in ("Come here!", "Are you ready?"):
                assert src.count(repeated) in (0, 2)
        assert sum(len(s) for s, _ in task.splits.values()) == len(PAIRS)
        assert 4 <= len(task.splits["val"][0]) <= 5 and 4 <= len(task.splits["test"][0]) <= 5


def test_fractions_train_size_max_examples_and_max_len(tmp_path):
    path = write_corpus(tmp_path, "txt", lines())
    task = task_for(path, val_size=0.25, test_size=0.25, train_size=6, max_examples=24)
    stats = task.stats()
    assert stats["dropped_max_examples"] == len(PAIRS) - 24
    assert 6 <= len(task.splits["val"][0]) <= 7 and 6 <= stats["train_examples"] <= 7
    assert stats["dropped_train_size"] == 24 - stats["pairs_kept"]
    short = task_for(path, max_len=4).stats()  # "I am tired ." is 4 words; "Je suis en retard ." is 5
    assert short["dropped_too_long"] > 0 and short["target_len_max"] <= 4 and short["source_len_max"] <= 4
    with pytest.raises(ConfigError, match="data.max_len=0 is not valid"):
        task_for(path, max_len=0)
    with pytest.raises(ConfigError, match="Unknown tokenizer 'bpe'.*char, sentencepiece, word, wordpiece"):
        task_for(path, tokenizer="bpe")
    with pytest.raises(ConfigError, match="Unknown key.*vocab"):
        task_for(path, vocab=3)
    with pytest.raises(ConfigError, match="leave the train split empty"):
        task_for(path, val_size=1, test_size=40)


def test_reverse_swaps_source_and_target(tmp_path):
    path = write_corpus(tmp_path, "zip_root", lines())
    forward, backward = task_for(path, seed=5), task_for(path, seed=5, reverse=True)
    assert forward.stats()["direction"] == "eng->fra" and backward.stats()["direction"] == "fra->eng"
    assert "Je suis fatigués." in sum((s for s, _ in backward.splits.values()), [])
    assert "je suis fatigués." in sum((t for _, t in forward.splits.values()), [])


def test_references_are_canonical_text_that_detokenize_reproduces(tmp_path):
    path = write_corpus(tmp_path, "txt", lines())
    task = task_for(path)
    references = sum((t for _, t in task.splits.values()), [])
    assert "viens ici!" in references and "il a dit « oui »." in references and "attends, s'il te plaît." in references
    train_refs = task.splits["train"][1]
    ids = task.target_tokenizer.tokenize(tf.constant(train_refs)).to_tensor()
    ids = tf.concat([ids, tf.fill([len(train_refs), 1], tf.constant(EOS_ID, tf.int64))], axis=1)
    assert [t.decode() for t in task.target_tokenizer.detokenize(ids).numpy()] == train_refs


def test_bucket_boundaries_auto_follow_the_lengths_and_dates_keep_theirs(tmp_path):
    assert length_boundaries(list(range(1, 101))) == [18, 35, 51, 68, 84]
    assert length_boundaries([5, 5, 5, 5]) == [] and length_boundaries([]) == []
    assert length_boundaries([5, 5, 5, 6]) == [6]
    long = [(f"{en} {sen}" + " and {} {}".format(en.lower(), sen) * k + ".", f"{fr} {sfr}.")
            for k, (en, fr) in enumerate(SUBJECTS) for sen, sfr in STATES]
    path = write_corpus(tmp_path, "txt", lines(PAIRS + long))
    task = task_for(path)
    train_lengths = task.source_tokenizer.tokenize(tf.constant(task.splits["train"][0])).row_lengths().numpy() + 1
    assert task.bucket_boundaries == length_boundaries(train_lengths) and len(task.bucket_boundaries) >= 3
    assert resolve_bucket_boundaries(task, None) == task.bucket_boundaries
    assert resolve_bucket_boundaries(task, "auto") == task.bucket_boundaries
    assert resolve_bucket_boundaries(task, [10, 14]) == [10, 14]
    with pytest.raises(ValueError, match="expected a list of lengths, 'auto' or null"):
        resolve_bucket_boundaries(task, "often")
    dates = load_task({"name": "dates", "train_size": 40, "val_size": 8, "test_size": 8, "seed": 0,
                       "bucket_boundaries": None})
    assert resolve_bucket_boundaries(dates, None) is None
    assert resolve_bucket_boundaries(dates, [10, 14, 18]) == [10, 14, 18]
    auto = resolve_bucket_boundaries(dates, "auto", [5, 6, 7, 8, 9, 10, 11, 12])
    assert auto and auto == sorted(auto)
    batches = list(make_dataset(task, "train", batch_size=4, shuffle=True, seed=0, bucket_boundaries="auto"))
    assert sum(int(x[0].shape[0]) for x, _ in batches) == len(task.splits["train"][0])


def test_the_config_composes_and_registers(tmp_path):
    assert "tatoeba" in DATASETS.names()
    cfg = compose(["data=tatoeba", "data.tokenizer=wordpiece", "data.max_examples=100"])
    assert cfg.data.name == "tatoeba" and cfg.data.pair == "fra-eng" and cfg.data.path is None
    assert cfg.data.seed == cfg.seed and cfg.data.max_examples == 100
    smoke = compose(["data=tatoeba", "debug=smoke"])
    assert smoke.data.train_size == 64 and smoke.data.val_size == 16


@pytest.mark.skipif(not SHARED_CORPUS.exists(), reason=f"the shared corpus is not at {SHARED_CORPUS} "
                    f"(../shared/data/fra-eng.zip from the repository root)")
def test_the_shared_fra_eng_corpus():
    task = load_task({"name": "tatoeba", "path": str(SHARED_CORPUS), "max_examples": 2000, "max_len": 30,
                      "val_size": 0.05, "test_size": 0.05, "seed": 0, "tokenizer": "word", "min_freq": 2})
    stats = task.stats()
    assert stats["corpus_sha256"] == "16c4f7d0df9e7c5e6c54cdb0447f3f4a18a55052ff5e2e0b27dd4a06c0e49d04"
    assert task.fingerprint == stats["corpus_sha256"]
    assert stats["lines_read"] == 142787 and stats["corpus_file"] == "fra-eng.zip:fra.txt"
    assert stats["dropped_max_examples"] == stats["pairs_read"] - 2000
    assert stats["pairs_kept"] == 2000 - stats["dropped_too_long"] - stats["dropped_empty_side"]
    assert 90 <= stats["val_examples"] <= 120 and 90 <= stats["test_examples"] <= 120
    assert stats["source_len_max"] <= 30 and 1 <= stats["source_len_p50"] <= stats["source_len_p90"]
    assert 100 < stats["source_vocab_size"] < stats["target_vocab_size"] < 2000
    assert "va!" in sum((t for _, t in task.splits.values()), [])  # "Va !" in canonical form


def test_download_checks_the_sha256_and_caches(tmp_path, monkeypatch):
    # A file:// URL stands in for manythings.org: no network in tests.
    monkeypatch.delenv("ZOO_DATA_DIR", raising=False)
    source = write_corpus(tmp_path, "zip_root", lines())
    url = source.resolve().as_uri()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    with pytest.raises(manythings.CorpusError, match="expected data.sha256=00ff"):
        manythings.fetch_pair("fra-eng", cache, url=url, sha256="00ff")
    assert not list(cache.iterdir())  # nothing half-written is left behind
    cfg = {"name": "tatoeba", "pair": "fra-eng", "download": True, "url": url, "sha256": digest,
           "cache_dir": str(cache), "min_freq": 1, "val_size": 4, "test_size": 4, "seed": 0}
    task = load_task(cfg)
    assert (cache / "fra-eng.zip").read_bytes() == source.read_bytes() and task.fingerprint == digest
    source.unlink()  # the second load finds the cached copy
    assert load_task(cfg).splits == task.splits


def test_split_size_zero_uses_the_training_pairs(tmp_path):
    """d2l trains on all its pairs and translates training sentences: val_size/test_size=0."""
    path = write_corpus(tmp_path, "txt", lines())
    task = task_for(path, val_size=0, test_size=0)
    stats = task.stats()
    assert task.splits["val"] == task.splits["train"] == task.splits["test"]
    assert len(task.splits["train"][0]) == len(PAIRS) == stats["pairs_kept"]  # counted once
    assert stats["val_is_train"] and stats["test_is_train"] and stats["dropped_train_size"] == 0
    assert stats["pairs_kept"] + sum(v for k, v in stats.items() if k.startswith("dropped_")) == stats["lines_read"]
    assert task.source_tokenizer.vocab_size == task_for(path, val_size=0.0, test_size=0.0).source_tokenizer.vocab_size

    held_out = task_for(path, val_size=0, test_size=4)  # only val is the training pairs
    assert held_out.splits["val"] == held_out.splits["train"] and 4 <= len(held_out.splits["test"][0]) <= 5
    assert not set(held_out.splits["test"][0]) & set(held_out.splits["train"][0])
    assert held_out.stats()["val_is_train"] and not held_out.stats()["test_is_train"]
    assert held_out.stats()["pairs_kept"] == len(PAIRS)
    assert task_for(path).stats()["val_is_train"] is False

    with pytest.raises(ConfigError, match=r"data.val_size=-1 is not valid: expected a fraction in \(0, 1\) of the "
                                          r"pairs or a positive number of pairs \(0: use the training pairs\)"):
        task_for(path, val_size=-1)
    assert manythings.group_split(["a", "b", "a"], {"test": 0, "val": 0, "train": None}, 0) == {
        "test": [], "val": [], "train": [0, 1, 2]}
