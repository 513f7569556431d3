"""Corrupt corpus files give one line that says what is wrong with the file and where (the line
number where it applies), never a traceback; a run never starts on them, so nothing in the store is
marked FINISHED. Each test writes its own small file into ``tmp_path``."""

import sqlite3
import zipfile

import pytest

from zoo.data import load_task
from zoo.errors import CorpusError

from conftest import run_python

PAIRS = [(f"I am tired {i}.", f"Je suis fatigué {i}.") for i in range(40)]


def text(pairs=PAIRS):
    return "".join(f"{en}\t{fr}\n" for en, fr in pairs)


def zipped(path, data: bytes):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("fra.txt", data)
    return path


def truncated_zip(tmp_path):
    whole = zipped(tmp_path / "whole.zip", text().encode("utf-8") * 20).read_bytes()
    path = tmp_path / "fra-eng.zip"
    path.write_bytes(whole[: len(whole) // 2])
    return path


def damaged_zip(tmp_path):
    """The central directory is intact; the compressed member is not."""
    path = zipped(tmp_path / "fra-eng.zip", text().encode("utf-8") * 20)
    data = bytearray(path.read_bytes())
    data[60:90] = b"\x00" * 30
    path.write_bytes(bytes(data))
    return path


def write(name, data: bytes):
    def make(tmp_path):
        path = tmp_path / name
        path.write_bytes(data)
        return path
    return make


CORRUPT = [  # (id, how to make the file, what the message must say)
    ("truncated zip", truncated_zip, ["fra-eng.zip", "is not a zip archive", "download complete"]),
    ("damaged zip member", damaged_zip, ["fra-eng.zip", "damaged zip archive"]),
    ("Latin-1", write("fra.txt", text().encode("latin-1")), ["fra.txt", "Line 1 (invalid_utf8)", "not UTF-8",
                                                             "iconv -f LATIN1"]),
    ("UTF-16", write("fra.txt", text().encode("utf-16")), ["fra.txt", "UTF-16", "iconv -f UTF-16"]),
    ("UTF-16 without BOM", write("fra.txt", text().encode("utf-16-le")), ["fra.txt", "UTF-16"]),
    ("one column", write("fra.txt", "".join(f"{en}\n" for en, _ in PAIRS).encode()),
     ["fra.txt", "Line 1 (no_tab)", "one column"]),
    ("empty", write("fra.txt", b""), ["fra.txt", "the file is empty"]),
    ("only blank lines", write("fra.txt", b"\n\n  \n"), ["fra.txt", "blank=3"]),
    ("every pair too long", write("fra.txt", text([(f"{'word ' * 40}{i}", f"mot {i}") for i in range(30)]).encode()),
     ["fra.txt", "none of the 30 pairs is usable", "data.max_len=30"]),
    ("four columns", write("fra.txt", "".join(f"{en}\t{fr}\tx\ty\n" for en, fr in PAIRS).encode()),
     ["fra.txt", "Line 1 (bad_columns)"]),
]


@pytest.mark.parametrize("make, expected", [c[1:] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_a_corrupt_file_is_one_line_naming_the_file_and_the_problem(make, expected, tmp_path):
    path = make(tmp_path)
    with pytest.raises(CorpusError) as caught:
        load_task({"name": "tatoeba", "path": str(path), "max_len": 30, "seed": 0})
    message = str(caught.value)
    assert "\n" not in message, message
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


def test_some_bad_lines_are_skipped_and_the_rest_is_used(tmp_path):
    """Latin-1 lines in a UTF-8 file are dropped and counted, not fatal."""
    data = text().encode("utf-8") + "Café.\tCafé !\n".encode("latin-1")
    path = write("fra.txt", data)(tmp_path)
    task = load_task({"name": "tatoeba", "path": str(path), "min_freq": 1, "val_size": 4, "test_size": 4, "seed": 0})
    assert task.info["dropped_invalid_utf8"] == 1 and task.info["pairs_read"] == len(PAIRS)


@pytest.mark.slow
def test_train_py_on_a_corrupt_file_exits_2_and_marks_nothing_finished(tmp_path):
    path = write("fra.txt", text().encode("latin-1"))(tmp_path)
    store = tmp_path / "mlflow.db"
    result = run_python(["train.py", "data=tatoeba", f"data.path={path}", "trainer.epochs=1"],
                        env_extra={"MLFLOW_TRACKING_URI": f"sqlite:///{store}"}, timeout=300)
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error: ")]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr
    assert len(lines) == 1 and "Line 1 (invalid_utf8)" in lines[0] and str(path) in lines[0], result.stderr
    if store.exists():
        with sqlite3.connect(store) as db:
            statuses = [row[0] for row in db.execute("SELECT status FROM runs")]
        assert "FINISHED" not in statuses and "RUNNING" not in statuses, statuses


@pytest.mark.parametrize("make, expected", [c[1:] for c in CORRUPT if c[0] != "every pair too long"],
                         ids=[c[0] for c in CORRUPT if c[0] != "every pair too long"])
def test_the_start_of_a_corrupt_file_gives_the_same_line_as_reading_it_all(make, expected, tmp_path):
    """``check_head`` (what the config validator runs before TensorFlow) reads a zip's directory and
    the first 64 KiB; on these small files its line is the full read's, word for word."""
    from zoo.data import manythings

    path = make(tmp_path)
    with pytest.raises(CorpusError) as whole:
        manythings.read_pair_file(path, "fra")
    with pytest.raises(CorpusError) as head:
        manythings.check_head(path, "fra")
    assert str(head.value) == str(whole.value)


def test_the_start_of_a_large_file_is_judged_by_its_first_lines_only(tmp_path):
    """A file larger than what ``check_head`` reads: one usable pair in its first lines passes (the
    rest is the full read's business); none there is refused, naming how many lines were read."""
    from zoo.data import manythings

    good = tmp_path / "good.txt"
    good.write_bytes(text().encode() + b"no tab here\n" * 20000)
    manythings.check_head(good, "fra", limit=4096)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"no tab here\n" * 20000 + text().encode())
    with pytest.raises(CorpusError, match=r"no usable sentence pair in its first 341 lines \(no_tab=341\)"):
        manythings.check_head(bad, "fra", limit=4096)
    assert manythings.read_pair_file(bad, "fra").pairs  # the full read still finds the pairs at the end


def test_a_damaged_zip_member_is_caught_from_its_first_block(tmp_path):
    from zoo.data import manythings

    with pytest.raises(CorpusError, match="damaged zip archive"):
        manythings.check_head(damaged_zip(tmp_path), "fra")
