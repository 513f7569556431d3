"""Reading manythings.org/anki sentence-pair files (Tatoeba Project data), without TensorFlow.

A pair file is ``<lang>-eng.zip`` holding ``<lang>.txt`` (at its root or in a folder) next to
``_about.txt``, or that ``.txt`` extracted. Each line is ``English<TAB>Other`` or, in newer
exports, ``English<TAB>Other<TAB>attribution``. Bad lines never stop the reading: they are
skipped and counted by reason (``no_tab``, ``bad_columns``, ``empty_side``, ``invalid_utf8``,
``blank``, ``duplicate``); a byte-order mark and CRLF line ends are repaired (and counted).

Finding the file: ``data.path`` (relative to the working directory), else ``<pair>.zip``,
``<pair>.txt`` or ``<lang>.txt`` in ``$ZOO_DATA_DIR`` or the cache directory; ``fetch_pair``
downloads into the cache (only when ``data.download=true``).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os
import random
import shutil
import tempfile
import urllib.request
import zipfile
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from zoo.catalog import MANYTHINGS_URL, PAIR_PATTERN, corpus_cache_dir, find_pair_file, pair_not_found
from zoo.errors import ConfigError, CorpusError, CorpusNotFoundError  # noqa: F401

ATTRIBUTION = ("Sentence pairs from the Tatoeba Project (tatoeba.org), packaged by manythings.org/anki; "
               "license CC-BY 2.0 (France).")
BOM = b"\xef\xbb\xbf"
DROP_REASONS = ("blank", "no_tab", "bad_columns", "empty_side", "invalid_utf8", "duplicate")
REPAIRS = ("bom", "crlf")


@dataclasses.dataclass
class PairFile:
    """The usable pairs of one file, in file order, and what happened to the other lines."""

    path: str
    member: Optional[str]  # the .txt inside the zip; None for a plain .txt
    sha256: str  # of the file as given (the .zip or the .txt)
    pairs: List[Tuple[str, str]]  # (English, other language), stripped
    lines: int = 0
    dropped: Dict[str, int] = dataclasses.field(default_factory=dict)
    repaired: Dict[str, int] = dataclasses.field(default_factory=dict)
    three_columns: int = 0  # lines with an attribution column


def check_pair(pair: str) -> str:
    if not isinstance(pair, str) or not PAIR_PATTERN.match(pair):
        raise ConfigError(f"data.pair={pair!r} is not valid: expected a manythings.org pair name like "
                          f"'fra-eng' or 'deu-eng' (the file is <pair>.zip).")
    return pair


def pair_language(pair: str) -> str:
    """``"fra-eng" -> "fra"``: the name of the ``.txt`` inside the zip."""
    return check_pair(pair).split("-")[0]


def resolve_path(path: Optional[str] = None, pair: str = "fra-eng", download: bool = False,
                 cache_dir: Optional[str] = None, url: Optional[str] = None, sha256: Optional[str] = None) -> Path:
    """Where the corpus is; raises ``CorpusNotFoundError`` with what to put where.

    ``path`` wins (relative to the working directory). Otherwise ``<pair>.zip``, ``<pair>.txt``
    or ``<lang>.txt`` in ``$ZOO_DATA_DIR`` and then in the cache directory; with ``download``,
    a missing file is fetched into the cache directory (checked against ``sha256``).
    """
    if not path and not pair:
        raise ConfigError("data=tatoeba needs data.path=<file> or data.pair=<pair name, e.g. fra-eng>.")
    source_url = url or (MANYTHINGS_URL.format(pair=check_pair(pair)) if pair else "https://www.manythings.org/anki/")
    if path:
        resolved = Path(os.path.expanduser(str(path)))
        if resolved.is_file():
            return resolved
        raise CorpusNotFoundError(
            f"data.path={path} does not exist (looked at {resolved.absolute()}; relative paths are relative to the "
            f"working directory {os.getcwd()}). Put the manythings.org file there ({source_url}, or the .txt inside "
            f"it), or point data.path at it.")
    found = find_pair_file(pair, cache_dir)
    if found is not None:
        return found
    if download:
        return fetch_pair(pair, corpus_cache_dir(cache_dir), url=source_url, sha256=sha256)
    raise CorpusNotFoundError(pair_not_found(pair, cache_dir, source_url))


def fetch_pair(pair: str, cache_dir, url: Optional[str] = None, sha256: Optional[str] = None,
               timeout: float = 60.0) -> Path:
    """Downloads ``<pair>.zip`` into ``cache_dir`` (atomically) and checks its sha256.

    With ``sha256=None`` the download is kept and its checksum printed, so it can be pinned
    (``data.sha256=...``); a mismatch deletes the download and raises ``CorpusError``.
    """
    url = url or MANYTHINGS_URL.format(pair=check_pair(pair))
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    destination = cache / f"{pair}.zip"
    request = urllib.request.Request(url, headers={"User-Agent": "attention-zoo (research; python urllib)"})
    digest = hashlib.sha256()
    fd, partial = tempfile.mkstemp(dir=cache, prefix=f".{pair}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=timeout) as response:
            while True:
                chunk = response.read(1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
                out.write(chunk)
        actual = digest.hexdigest()
        if sha256 and actual != sha256.lower():
            raise CorpusError(f"The download of {url} has sha256 {actual}, expected data.sha256={sha256}. "
                              f"Nothing was kept; check the URL or update data.sha256.")
        shutil.move(partial, destination)
    except OSError as error:
        raise CorpusError(f"Could not download {url} into {cache}: {error}. Download it by hand and pass "
                          f"data.path=<file>.") from None
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    if not sha256:
        print(f"Downloaded {url} to {destination} (sha256 {actual}; pin it with data.sha256={actual}). "
              f"{ATTRIBUTION}", flush=True)
    return destination


def file_sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _zip_member(archive: zipfile.ZipFile, language: Optional[str], path) -> str:
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
                member = _zip_member(archive, language, path)
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


def _no_pair(where: str, lines: int, dropped: Dict[str, int], first: Dict[str, Tuple[int, str]],
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


def read_pair_file(path, language: Optional[str] = None) -> PairFile:
    """Reads every line of a pair file; raises ``CorpusError`` when no line is usable."""
    data, member = read_bytes(path, language)
    where = f"{path}{':' + member if member else ''}"
    check_encoding(data, where)
    first: Dict[str, Tuple[int, str]] = {}
    pairs, lines, dropped, repaired, three = parse_lines(data, first)
    if not pairs:
        raise _no_pair(where, lines, dropped, first)
    return PairFile(str(path), member, file_sha256(path), pairs, lines, dropped, repaired, three)


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
        raise _no_pair(where, lines, dropped, first, whole)


def group_split(keys: Sequence[str], sizes: Dict[str, Optional[int]], seed: int) -> Dict[str, List[int]]:
    """Indices of ``keys`` per split, whole groups of equal keys at a time.

    ``sizes`` maps split names, in filling order, to a number of examples (``None`` = all the
    rest, ``0`` = none); the groups are shuffled with ``seed`` and each split takes groups until
    it holds at least its size. No key is in two splits. Indices are in ascending order in each split.
    """
    groups: Dict[str, List[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    order = list(groups)
    random.Random(seed).shuffle(order)
    out: Dict[str, List[int]] = {name: [] for name in sizes}
    names = list(sizes)
    current = 0

    def full(name):
        return sizes[name] is not None and len(out[name]) >= sizes[name]

    for key in order:
        while current < len(names) and full(names[current]):
            current += 1
        if current == len(names):
            break
        out[names[current]].extend(groups[key])
    return {name: sorted(indices) for name, indices in out.items()}
