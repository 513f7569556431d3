"""What a config may name, known without importing TensorFlow: the allowed-value lists.

The open registries (models, attention layers, datasets, tokenizers) are keyed by file: a model or
attention or dataset is named by its ``conf/<group>/<name>.yaml``, a tokenizer by its module
``zoo/data/tokenizers/<name>.py``. Listing files costs milliseconds, so the config validator
(``zoo.config``) answers a bad command line before TensorFlow starts; tests check that each list
equals its live registry (``zoo.models.names()``, ``zoo.attention.names()``, ...).

A pair file's lines are read here too, with the standard library (``check_head``, ``parse_lines``):
the validator refuses a truncated zip, an empty file or one column from a file's first 64 KiB, and
``zoo.data.manythings`` reads whole files with the same functions.

The closed choices (decoding strategies, optimizers, learning-rate decays, the trainer's strategies,
precisions and devices) live here and only
here; the code that implements them imports them from this module.
"""

from __future__ import annotations

import collections
import functools
import os
import pkgutil
import re
import zipfile
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml

from zoo.errors import CorpusError

PACKAGE_DIR = Path(__file__).resolve().parent
CONF_DIR = PACKAGE_DIR.parent / "conf"

DECODING_STRATEGIES = ("greedy", "beam", "sample")
OPTIMIZERS = ("adam", "adamw", "sgd")
LR_DECAYS = ("none", "inverse_sqrt")
STRATEGIES = ("default", "mirrored", "multi_worker")  # trainer.strategy
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")  # trainer.precision
DEVICES = ("auto", "cpu", "gpu")  # trainer.device


def options(group: str) -> List[str]:
    """The choices of a config group: the stems of ``conf/<group>/*.yaml``."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


@functools.lru_cache(maxsize=None)
def _yaml(group: str, name: str) -> dict:
    with open(CONF_DIR / group / f"{name}.yaml", encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def attentions(kind: Optional[str] = None) -> List[str]:
    """Attention names; ``kind="alignment"`` gives the ones an RNN decoder accepts (``kind:`` in their YAML)."""
    return [n for n in options("attention") if kind is None or _yaml("attention", n).get("kind") == kind]


def attention_kind(name: str) -> Optional[str]:
    """The ``kind`` an attention's YAML declares (``alignment``, ``self``, ``position``, ...)."""
    return _yaml("attention", name).get("kind") if name in options("attention") else None


def self_attentions() -> List[str]:
    """The attentions a Transformer's self-attention takes (``model.attention``): ``multi_head`` (an
    alignment attention too) and the ``kind: self`` ones."""
    return ["multi_head", *attentions("self")]


def attention_causal(name: str) -> bool:
    """Whether attention ``name`` can attend causally (a decoder): not when its YAML says ``causal: false``."""
    return _yaml("attention", name).get("causal", True) is not False if name in options("attention") else True


def model_literal(name: str, literal: str, default=None):
    """Module-level ``literal`` of model ``name``'s module (``zoo/models/<family>/<name>.py``), read without
    importing it, or ``default``."""
    found = sorted((PACKAGE_DIR / "models").rglob(f"{name}.py"))
    if not found or literal not in _module_names(found[0]):
        return default
    return _literal(found[0], literal)


def model_attention_kind(name: str) -> str:
    """``"self"`` for a model whose ``model.attention`` is its self-attention (``ATTENTION_KIND = "self"`` in its
    module: the Transformer), else ``"alignment"`` (an RNN decoder's)."""
    return model_literal(name, "ATTENTION_KIND", "alignment")


def models(task: Optional[str] = None) -> List[str]:
    """Model names; ``task="seq2seq"``, ``"regression"`` or ``"qa"`` keeps the models of that task."""
    return [n for n in options("model") if task is None or _yaml("model", n).get("task", "seq2seq") == task]


def model_has_attention(name: str) -> bool:
    """True for the models whose attention is chosen with ``model.attention=<name>``."""
    return "attention" in _yaml("model", name)


def model_keys(name: str) -> List[str]:
    """The keys model ``name`` takes: those ``conf/model/<name>.yaml`` declares, and ``attention_options``
    where its defaults compose an attention's options there."""
    declared = _yaml("model", name)
    keys = [key for key in declared if key != "defaults"]
    groups = [next(iter(entry)) if isinstance(entry, dict) else entry for entry in declared.get("defaults", [])]
    return keys + [group.split("@", 1)[1] for group in groups if "@" in group]  # /attention@attention_options


def model_task(name: str) -> str:
    return _yaml("model", name).get("task", "seq2seq")


def data_task(name: str) -> str:
    """The ``task`` a dataset's config declares (``seq2seq`` when absent, ``regression``, ``qa``)."""
    return _yaml("data", name).get("task", "seq2seq") if name in options("data") else "seq2seq"


def datasets() -> List[str]:
    """Dataset names: the stems of ``conf/data/*.yaml``."""
    return options("data")


def tokenizers() -> List[str]:
    """Tokenizer names: the public modules of ``zoo/data/tokenizers/`` (one tokenizer per file)."""
    directory = PACKAGE_DIR / "data" / "tokenizers"
    return sorted(m.name for m in pkgutil.iter_modules([str(directory)]) if not m.name.startswith("_"))


def _module_path(module: str) -> Path:
    return PACKAGE_DIR.parent.joinpath(*module.split(".")).with_suffix(".py")


@functools.lru_cache(maxsize=None)
def _module_names(path: Path) -> dict:
    """The module-level names of a file as AST nodes: ``NAME = <expr>`` assignments, and
    ``from zoo.<module> import NAME [as ALIAS]`` as ``(module file, NAME)``."""
    import ast

    names = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node.value
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("zoo."):
            for alias in node.names:
                names[alias.asname or alias.name] = (_module_path(node.module), alias.name)
    return names


def _literal(path: Path, name: str):
    """The value of module-level ``name`` in ``path``, evaluated without importing: literals, and
    names of other literals of the module or of a ``zoo`` module it imports them from, and ``+``."""
    import ast

    found = _module_names(path).get(name)
    if found is None:
        raise ValueError(f"{path} has no module-level {name}")
    if isinstance(found, tuple):
        return _literal(*found)

    def value(node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(value(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return {value(k): value(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Name):
            return _literal(path, node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return value(node.left) + value(node.right)
        raise ValueError(f"{path}:{node.lineno}: {name} is not a literal (only literals, names of literals and +)")

    return value(found)


def _constraints(package: str, name: str) -> tuple:
    found = sorted((PACKAGE_DIR / package).rglob(f"{name}.py"))  # zoo/models/<family>/<name>.py
    path = found[0] if found else PACKAGE_DIR / package / f"{name}.py"
    if not path.is_file() or "CONSTRAINTS" not in _module_names(path):
        return ()
    return tuple(_literal(path, "CONSTRAINTS"))


@functools.lru_cache(maxsize=None)
def data_constraints(name: str) -> tuple:
    """The rules dataset ``name`` declares for its keys (``CONSTRAINTS`` in ``zoo/data/<name>.py``),
    read without importing the module; () when it declares none."""
    return _constraints("data", name)


@functools.lru_cache(maxsize=None)
def model_constraints(name: str) -> tuple:
    """The rules model ``name`` declares (``CONSTRAINTS`` in ``zoo/models/<family>/<name>.py``, checked by
    ``zoo.checks.constraint_problems``), read without importing the module; () when it declares none."""
    return _constraints("models", name)


@functools.lru_cache(maxsize=None)
def attention_constraints(name: str) -> tuple:
    """The rules attention ``name`` declares for its options (``CONSTRAINTS`` in the module of
    ``zoo/attention/`` whose class is registered as ``@register_attention("<name>")``), which the
    validator checks against ``model.attention_options.*`` before TensorFlow starts; () when it declares none.
    The files are searched as text, and only the one that registers ``name`` is parsed. An alignment
    attention whose YAML has ``BaseAttention``'s ``normalizer`` option also has its rule
    (``CONSTRAINTS`` of ``base_attention.py``), first."""
    inherited = ()
    if attention_kind(name) == "alignment" and "normalizer" in _yaml("attention", name):
        inherited = tuple(_literal(PACKAGE_DIR / "attention" / "base_attention.py", "CONSTRAINTS"))
    mark = f'@register_attention("{name}")'
    for path in sorted((PACKAGE_DIR / "attention").glob("*.py")):
        if mark in path.read_text(encoding="utf-8"):
            return inherited + (tuple(_literal(path, "CONSTRAINTS")) if "CONSTRAINTS" in _module_names(path) else ())
    return ()


@functools.lru_cache(maxsize=None)
@functools.lru_cache(maxsize=None)
def task_trainer_constraints(task: str) -> tuple:
    """The ``trainer.*`` settings the kind of ``task`` cannot train with: ``TRAINER_CONSTRAINTS`` in
    ``zoo/training/<task>.py`` (``zoo.checks`` rules: one replica in float32 for ``qa``, ``classify`` and
    ``image``, no XLA for ``image``), read without importing it; () for a kind that declares none."""
    path = PACKAGE_DIR / "training" / f"{task}.py"
    if not path.is_file() or "TRAINER_CONSTRAINTS" not in _module_names(path):
        return ()
    return tuple(_literal(path, "TRAINER_CONSTRAINTS"))


def data_literal(name: str, literal: str):
    """Module-level ``literal`` of ``zoo/data/<name>.py`` (read without importing it), or None."""
    path = PACKAGE_DIR / "data" / f"{name}.py"
    if not path.is_file() or literal not in _module_names(path):
        return None
    return _literal(path, literal)


# -- Where a manythings.org sentence-pair file is looked for (``zoo.data.manythings`` reads it; the
# config validator finds it, or says what to put where, before TensorFlow starts).
DATA_DIR_VARIABLE = "ZOO_DATA_DIR"
CACHE_DIR_VARIABLE = "ZOO_CACHE_DIR"
PAIR_PATTERN = re.compile(r"^[a-z]{2,8}-[a-z]{2,8}$")  # a manythings.org pair name: fra-eng
MANYTHINGS_URL = "https://www.manythings.org/anki/{pair}.zip"


def corpus_cache_dir(cache_dir: Optional[str] = None) -> Path:
    """``cache_dir`` (``data.cache_dir``) if given, else ``$ZOO_CACHE_DIR`` or ``~/.cache/attention-zoo``,
    its ``data/``; downloads go there."""
    if cache_dir:
        return Path(os.path.expanduser(str(cache_dir)))
    root = os.environ.get(CACHE_DIR_VARIABLE) or os.path.join(os.path.expanduser("~"), ".cache", "attention-zoo")
    return Path(root) / "data"


def pair_file_names(pair: str) -> List[str]:
    """``<pair>.zip``, ``<pair>.txt`` and ``<lang>.txt`` (the ``.txt`` inside the zip), for a valid pair name."""
    return [f"{pair}.zip", f"{pair}.txt", f"{pair.split('-')[0]}.txt"]


def find_pair_file(pair: str, cache_dir: Optional[str] = None) -> Optional[Path]:
    """The first of ``pair_file_names`` in ``$ZOO_DATA_DIR``, then in the cache directory; None if none is."""
    cache = corpus_cache_dir(cache_dir)
    folders = [Path(os.path.expanduser(os.environ[DATA_DIR_VARIABLE]))] if os.environ.get(DATA_DIR_VARIABLE) else []
    for folder in [*folders, cache]:
        for name in pair_file_names(pair):
            if (folder / name).is_file():
                return folder / name
    return None


def pair_not_found(pair: str, cache_dir: Optional[str] = None, url: Optional[str] = None) -> str:
    """What ``find_pair_file`` looked for and where, and the three ways to provide the file."""
    cache = corpus_cache_dir(cache_dir)
    data_dir = os.environ.get(DATA_DIR_VARIABLE)
    where = f"${DATA_DIR_VARIABLE} ({data_dir})" if data_dir else f"${DATA_DIR_VARIABLE} (not set)"
    names = pair_file_names(pair)
    return (f"The Tatoeba corpus '{pair}' was not found: looked for {', '.join(names)} in {where} and in "
            f"the cache {cache}. Download {url or MANYTHINGS_URL.format(pair=pair)} and put {pair}.zip in a folder "
            f"named by ${DATA_DIR_VARIABLE}, or pass data.path=<path to {pair}.zip or {names[2]}>, or pass "
            f"data.download=true to fetch it into the cache.")


# -- Reading a pair file's lines, with the standard library only: ``zoo.data.manythings`` reads whole
# files with these, and the config validator reads a file's start (``check_head``) before TensorFlow
# starts, so a truncated zip, an empty file or one column is refused in milliseconds.
BOM = b"\xef\xbb\xbf"
DROP_REASONS = ("blank", "no_tab", "bad_columns", "empty_side", "invalid_utf8", "duplicate")
REPAIRS = ("bom", "crlf")


def zip_member(archive: zipfile.ZipFile, language: Optional[str], path) -> str:
    texts = [n for n in archive.namelist()
             if n.lower().endswith(".txt") and not n.endswith("/") and not os.path.basename(n).startswith(("_", "."))
             and "__MACOSX" not in n]
    if language:
        exact = [n for n in texts if os.path.basename(n) == f"{language}.txt"]
        if exact:
            return sorted(exact, key=len)[0]
    if len(texts) == 1:
        return texts[0]
    wanted = f"{language}.txt" if language else "<lang>.txt"
    raise CorpusError(f"{path} holds no single sentence-pair file: expected {wanted} (at its root or in a folder); "
                      f"found {', '.join(texts) or 'no .txt file'}.")


def read_bytes(path, language: Optional[str] = None, limit: Optional[int] = None) -> Tuple[bytes, Optional[str]]:
    """The pair file's bytes (from the zip or the .txt) and the zip member's name; with ``limit``,
    at most ``limit`` bytes from its start (a zip's directory and the member's first block only)."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                member = zip_member(archive, language, path)
                if limit is None:
                    return archive.read(member), member
                with archive.open(member) as f:
                    return f.read(limit), member
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
            raise CorpusError(f"{path} is a damaged zip archive ({error}); is the download complete? Download it "
                              f"again, or pass data.path=<the .txt inside it>.") from None
    if path.suffix.lower() == ".zip":
        raise CorpusError(f"{path} is not a zip archive (is the download complete?). Expected a manythings.org "
                          f"pair file such as fra-eng.zip.")
    if limit is None:
        return path.read_bytes(), None
    with open(path, "rb") as f:
        return f.read(limit), None


def check_encoding(data: bytes, where) -> None:
    """Raises CorpusError for a UTF-16 or UTF-32 file: its lines would otherwise read as text with NULs."""
    head = data[:4096]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (head and head.count(b"\x00") > len(head) // 4):
        raise CorpusError(f"{where} is UTF-16 (or UTF-32) encoded, not UTF-8 (line 1 starts with "
                          f"{head[:4]!r}). Convert it: iconv -f UTF-16 -t UTF-8 <file> > <file>.utf8.txt")


def parse_lines(data: bytes, first: Optional[Dict[str, Tuple[int, str]]] = None,
                ) -> Tuple[List[Tuple[str, str]], int, Dict[str, int], Dict[str, int], int]:
    """``(pairs, lines, dropped, repaired, three_columns)`` from a pair file's bytes; ``first`` (when
    given) gets, per drop reason, the first line number (1-based) dropped for it and what it held."""
    dropped = collections.Counter({reason: 0 for reason in DROP_REASONS})
    repaired = collections.Counter({repair: 0 for repair in REPAIRS})
    pairs: List[Tuple[str, str]] = []
    seen = set()
    three_columns = 0
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the newline that ends the last line
    first = first if first is not None else {}

    def drop(reason, number, raw):
        dropped[reason] += 1
        text = raw[:40].decode("utf-8", "backslashreplace").replace("\t", "<TAB>")
        first.setdefault(reason, (number, text))

    for number, raw in enumerate(raw_lines, 1):
        if raw.endswith(b"\r"):
            raw = raw.rstrip(b"\r")
            repaired["crlf"] += 1
        if raw.startswith(BOM):
            raw = raw[len(BOM):]
            repaired["bom"] += 1
        if not raw.strip():
            drop("blank", number, raw)
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            drop("invalid_utf8", number, raw)
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            drop("no_tab", number, raw)
            continue
        if len(fields) > 3:
            drop("bad_columns", number, raw)
            continue
        english, other = fields[0].strip(), fields[1].strip()
        if not english or not other:
            drop("empty_side", number, raw)
            continue
        if (english, other) in seen:
            drop("duplicate", number, raw)
            continue
        seen.add((english, other))
        three_columns += len(fields) == 3
        pairs.append((english, other))
    return pairs, len(raw_lines), dict(dropped), dict(repaired), three_columns


_HINTS = {"invalid_utf8": " is not UTF-8 (Latin-1 or cp1252? convert it: iconv -f LATIN1 -t UTF-8)",
          "no_tab": " has one column: no TAB between the English sentence and its translation",
          "bad_columns": " has more than 3 TAB-separated columns",
          "empty_side": " has an empty side"}


def no_pair_error(where: str, lines: int, dropped: Dict[str, int], first: Dict[str, Tuple[int, str]],
             whole: bool = True) -> CorpusError:
    """The one line for a file (``whole``) or its first ``lines`` lines with no usable pair."""
    reasons = ", ".join(f"{k}={v}" for k, v in dropped.items() if v) or "the file is empty"
    example = ""
    if first:
        reason = max(first, key=lambda k: dropped[k])
        number, text = first[reason]
        example = f" Line {number} ({reason}): '{text}'{_HINTS.get(reason, '')}."
    scope = f"({lines} lines; {reasons})" if whole else f"in its first {lines} lines ({reasons})"
    return CorpusError(f"{where} has no usable sentence pair {scope}.{example} Expected UTF-8 "
                       f"lines 'English<TAB>translation[<TAB>attribution]'.")


HEAD_BYTES = 1 << 16  # what check_head reads: a zip's directory and its member's first 64 KiB


def check_head(path, language: Optional[str] = None, limit: int = HEAD_BYTES) -> None:
    """Raises ``CorpusError`` (the same line ``read_pair_file`` would) for what a file's start shows:
    a truncated or damaged zip, no pair file inside it, UTF-16 text, or no usable pair among the
    first lines (the whole file when it is that short). Reads at most ``limit`` bytes, in
    milliseconds, so the config validator refuses such a file before TensorFlow starts; a file
    that passes is read in full by ``read_pair_file`` later."""
    data, member = read_bytes(path, language, limit + 1)
    where = f"{path}{':' + member if member else ''}"
    whole = len(data) <= limit
    if not whole:  # whole lines only
        data = data[: data.rfind(b"\n") + 1] or data[:limit]
    check_encoding(data, where)
    first: Dict[str, Tuple[int, str]] = {}
    pairs, lines, dropped, _, _ = parse_lines(data, first)
    if not pairs:
        raise no_pair_error(where, lines, dropped, first, whole)


# -- ListOps files (Long Range Arena's TSV) ------------------------------------------------------
# data=listops reads LRA's files with these functions (zoo.data.listops), and the validator judges a
# file's first lines with them before TensorFlow starts (check_listops_head).
LISTOPS_SPLIT_FILES = {"train": "basic_train.tsv", "val": "basic_val.tsv", "test": "basic_test.tsv"}
LISTOPS_HEADER = ("Source", "Target")
LISTOPS_OPERATORS = ("[MAX", "[MIN", "[MED", "[SM")
LISTOPS_TOKENS = LISTOPS_OPERATORS + ("]",) + tuple("0123456789")
LISTOPS_DROPPED = ("(", ")")  # LRA writes the tree's bracketing; "[OP" and "]" already delimit it


def listops_files(path) -> Dict[str, Path]:
    """``{"all": file}`` for one TSV file, or ``{"train", "val", "test": file}`` for LRA's folder of
    ``basic_train.tsv``, ``basic_val.tsv``, ``basic_test.tsv``; ``CorpusError`` naming what is missing."""
    resolved = Path(os.path.expanduser(str(path)))
    if resolved.is_file():
        return {"all": resolved}
    if resolved.is_dir():
        files = {split: resolved / name for split, name in LISTOPS_SPLIT_FILES.items()}
        missing = [name for name, file in zip(LISTOPS_SPLIT_FILES.values(), files.values()) if not file.is_file()]
        if missing:
            raise CorpusError(f"{path} is a folder without LRA's {', '.join(missing)} (a ListOps folder holds "
                              f"{', '.join(LISTOPS_SPLIT_FILES.values())}); or point data.path at one TSV file.")
        return files
    raise CorpusError(f"{path} does not exist (looked at {resolved.absolute()}; relative paths are relative to the "
                      f"working directory). Point data.path at a ListOps TSV file or LRA's folder of "
                      f"{', '.join(LISTOPS_SPLIT_FILES.values())}.")


def listops_rows(data: bytes, where) -> List[Tuple[str, int]]:
    """``[(expression, value)]`` from a ListOps TSV file's bytes (LRA's ``Source<TAB>Target``, a header
    line first): the expression's tokens joined by single spaces without LRA's parentheses, the value
    0-9. Blank lines are skipped; anything else that does not fit is ``CorpusError``, one line naming
    ``where``, the line number and what is wrong."""
    rows: List[Tuple[str, int]] = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for number, raw in enumerate(lines, 1):
        raw = raw.rstrip(b"\r")
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM):]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CorpusError(f"{where}, line {number}: not UTF-8 ({raw[:40]!r}).") from None
        shown = line[:60].replace("\t", "<TAB>")
        if number == 1:
            if tuple(field.strip() for field in line.split("\t")) != LISTOPS_HEADER:
                raise CorpusError(f"{where}, line 1: expected LRA's header 'Source<TAB>Target', found '{shown}'. "
                                  f"A ListOps TSV file starts with that line, then 'expression<TAB>value' lines.")
            continue
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            what = "no TAB between the expression and its value" if len(fields) < 2 else \
                f"{len(fields)} TAB-separated columns, expected 2"
            raise CorpusError(f"{where}, line {number}: {what}: '{shown}'.")
        tokens = [t for t in fields[0].split() if t not in LISTOPS_DROPPED]
        target = fields[1].strip()
        if len(target) != 1 or target not in "0123456789":
            raise CorpusError(f"{where}, line {number}: the target '{target[:20]}' is not a digit 0-9 (the value "
                              f"of the expression).")
        unknown = [t for t in tokens if t not in LISTOPS_TOKENS]
        if unknown or not tokens:
            what = f"'{unknown[0][:20]}' is not a ListOps token" if unknown else "the expression is empty"
            raise CorpusError(f"{where}, line {number}: {what} (expected {' '.join(LISTOPS_TOKENS)}, "
                              f"and LRA's parentheses).")
        rows.append((" ".join(tokens), int(target)))
    return rows


def read_listops_file(path) -> List[Tuple[str, int]]:
    """The rows of a whole ListOps TSV file (``listops_rows``); ``CorpusError`` for a file without one."""
    rows = listops_rows(Path(path).read_bytes(), path)
    if not rows:
        raise CorpusError(f"{path}, line 2: no 'expression<TAB>value' line after the header.")
    return rows


def check_listops_head(path, limit: int = HEAD_BYTES) -> None:
    """Raises ``CorpusError`` (the line ``read_listops_file`` would give) for what the first ``limit``
    bytes of each file of ``path`` (a TSV file or LRA's folder) show, in milliseconds."""
    for file in listops_files(path).values():
        with open(file, "rb") as f:
            data = f.read(limit + 1)
        whole = len(data) <= limit
        if not whole:  # whole lines only
            data = data[: data.rfind(b"\n") + 1] or data[:limit]
        rows = listops_rows(data, file)
        if whole and not rows:
            raise CorpusError(f"{file}, line 2: no 'expression<TAB>value' line after the header.")


# -- The Free Spoken Digit Dataset's zip (data=spoken_digits): found as a pair file is (data.path, else
# $ZOO_DATA_DIR, else the cache), its recordings listed from the zip's directory, in milliseconds, so
# the validator refuses a missing or wrong zip before TensorFlow starts; zoo.data.spoken_digits reads it.
FSDD_FILE = "fsdd.zip"
FSDD_URL = "https://github.com/Jakobovski/free-spoken-digit-dataset"
FSDD_RECORDING = re.compile(r"(?:^|/)recordings/([0-9])_([a-z]+)_([0-9]+)\.wav$")


def find_fsdd(path: Optional[str] = None, cache_dir: Optional[str] = None) -> Optional[Path]:
    """``path`` (``data.path``) if it is a file, else ``fsdd.zip`` in ``$ZOO_DATA_DIR``, then in the cache
    directory; None if there is none."""
    if path:
        resolved = Path(os.path.expanduser(str(path)))
        return resolved if resolved.is_file() else None
    folders = [Path(os.path.expanduser(os.environ[DATA_DIR_VARIABLE]))] if os.environ.get(DATA_DIR_VARIABLE) else []
    for folder in [*folders, corpus_cache_dir(cache_dir)]:
        if (folder / FSDD_FILE).is_file():
            return folder / FSDD_FILE
    return None


def fsdd_not_found(path: Optional[str] = None, cache_dir: Optional[str] = None) -> str:
    """The one line for a zip ``find_fsdd`` did not find: where it looked and where to put it."""
    if path:
        resolved = Path(os.path.expanduser(str(path)))
        what = "is a directory, not a file" if resolved.is_dir() else "does not exist"
        return (f"data.path={path} {what} (looked at {resolved.absolute()}; relative paths are relative to the "
                f"working directory). Point data.path at the Free Spoken Digit Dataset's {FSDD_FILE} (default: "
                f"null = look for {FSDD_FILE} in ${DATA_DIR_VARIABLE} and the cache).")
    data_dir = os.environ.get(DATA_DIR_VARIABLE)
    where = f"${DATA_DIR_VARIABLE} ({data_dir})" if data_dir else f"${DATA_DIR_VARIABLE} (not set)"
    return (f"The Free Spoken Digit Dataset was not found: looked for {FSDD_FILE} in {where} and in the cache "
            f"{corpus_cache_dir(cache_dir)}. Zip the recordings of {FSDD_URL} (recordings/<digit>_<speaker>_"
            f"<index>.wav) as {FSDD_FILE} and put it in a folder named by ${DATA_DIR_VARIABLE} or in the cache, or "
            f"pass data.path=<path to {FSDD_FILE}>.")


def fsdd_recordings(path) -> Dict[str, Tuple[int, str, int]]:
    """``{zip member: (digit, speaker, index)}`` of the zip's ``recordings/<digit>_<speaker>_<index>.wav``,
    from its directory only; ``CorpusError`` (one line) for a file that is no zip or holds none."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError) as error:
        raise CorpusError(f"{path} is not a readable zip archive ({error}); expected the Free Spoken Digit "
                          f"Dataset's recordings zipped ({FSDD_FILE}).") from None
    found = {}
    for name in names:
        match = FSDD_RECORDING.search(name)
        if match and "__MACOSX" not in name:
            found[name] = (int(match.group(1)), match.group(2), int(match.group(3)))
    if not found:
        raise CorpusError(f"{path} holds no recordings/<digit>_<speaker>_<index>.wav: expected the Free Spoken "
                          f"Digit Dataset ({FSDD_URL}) zipped.")
    return found


def fsdd_speaker_problem(path, test_speakers) -> Optional[str]:
    """The line refusing ``data.test_speakers`` that are not speakers of the zip, or all of them; None if fine."""
    speakers = sorted({speaker for _, speaker, _ in fsdd_recordings(path).values()})
    held = list(test_speakers or ())
    unknown = [s for s in held if s not in speakers]
    if unknown:
        return (f"data.test_speakers={held!r} is not valid: {', '.join(map(repr, unknown))} recorded nothing in "
                f"{path}; its speakers are {', '.join(speakers)} (default: [] = hold out FSDD's test recordings).")
    if held and set(speakers) <= set(held):
        return (f"data.test_speakers={held!r} holds out every speaker of {path}, leaving none to train on; e.g. "
                f"data.test_speakers=[{speakers[-1]}].")
    return None


# -- data=digit_strings: the longest row of digits must fit the canvas (zoo.data.digit_strings composes
# the images and raises this line too; the validator gives it before TensorFlow starts).
DIGIT_SCAN_SIZE = 8  # load_digits' scans are 8x8


def digit_canvas_problem(max_digits, height, width, scale, max_gap) -> Optional[str]:
    """The line refusing a ``height x width`` canvas that cannot hold ``max_digits`` scans of ``8 * scale``
    pixels with gaps up to ``max_gap``, or None (also when a value is no integer: its own rule says so)."""
    values = (max_digits, height, width, scale, max_gap)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values) or min(values) < 0:
        return None
    side = DIGIT_SCAN_SIZE * scale
    needed = max_digits * side + max(max_digits - 1, 0) * max_gap
    if needed <= width and side <= height:
        return None
    fixes = " ".join(f for f, bad in ((f"data.width={needed}", needed > width), (f"data.height={side}", side > height))
                     if bad)
    return (f"data.width={width} and data.height={height} cannot hold {max_digits} digits of {side}x{side} pixels "
            f"(data.scale={scale}) with gaps up to data.max_gap={max_gap}: expected width >= {needed} and height "
            f">= {side}; e.g. {fixes}, or fewer data.max_digits, a smaller data.scale or data.max_gap.")
