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

import dataclasses
import hashlib
import os
import random
import shutil
import tempfile
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from zoo.catalog import (  # noqa: F401 - the line reading lives in zoo.catalog (the validator reads file starts)
    BOM,
    DROP_REASONS,
    HEAD_BYTES,
    MANYTHINGS_URL,
    PAIR_PATTERN,
    REPAIRS,
    check_encoding,
    check_head,
    corpus_cache_dir,
    find_pair_file,
    no_pair_error,
    pair_not_found,
    parse_lines,
    read_bytes,
    zip_member,
)
from zoo.errors import ConfigError, CorpusError, CorpusNotFoundError  # noqa: F401

ATTRIBUTION = ("Sentence pairs from the Tatoeba Project (tatoeba.org), packaged by manythings.org/anki; "
               "license CC-BY 2.0 (France).")


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
    """The hex SHA-256 of the file at ``path``, read in 1 MiB blocks: a downloaded corpus' fingerprint."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_pair_file(path, language: Optional[str] = None) -> PairFile:
    """Reads every line of a pair file; raises ``CorpusError`` when no line is usable."""
    data, member = read_bytes(path, language)
    where = f"{path}{':' + member if member else ''}"
    check_encoding(data, where)
    first: Dict[str, Tuple[int, str]] = {}
    pairs, lines, dropped, repaired, three = parse_lines(data, first)
    if not pairs:
        raise no_pair_error(where, lines, dropped, first)
    return PairFile(str(path), member, file_sha256(path), pairs, lines, dropped, repaired, three)


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
