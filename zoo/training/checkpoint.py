"""Checkpoints: everything a resumed run needs to continue as if never stopped.

A checkpoint is a directory ``ckpt-<global step>`` holding
  - ``weights.npz``: every model variable, the dropout seed generators' state included;
  - ``optimizer.npz``: every optimizer variable (iterations, moments, loss scale);
  - ``best.npz``: the best-so-far weights of early stopping, when there are any;
  - ``state.json``: epoch, step, the loop's counters and early-stopping state, and the
    epoch records already logged;
  - ``rng.json``: the state of Python's ``random`` and NumPy's global generator (TensorFlow's ops take their seeds from the seed
    generators above; the data order is a function of seed and epoch, ``zoo.training.data``).
It is written into a temporary directory and renamed into place, so a kill at any moment
leaves either the previous checkpoints or the new one, never half of one.

Neither a damaged checkpoint nor a full disk loses the run. ``load`` reads and checks every file
before it changes a variable, so a checkpoint that cannot be read (cut short, corrupt, or written by
another model configuration) raises ``Unreadable`` and leaves the model as it was; ``newest_readable``
then names it in one line and takes the one before it. A checkpoint that cannot be written (no
space, the folder gone) is one warning line from ``Writer``, naming the folder and the space it
needs; training goes on, the previous checkpoints stay, and the next one is tried at its time.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

PREFIX = "ckpt-"
FILES = ("weights.npz", "optimizer.npz", "best.npz", "rng.json", "state.json")


class Unreadable(ValueError):
    """A checkpoint that cannot be restored; the message says which file and why, in one line."""


def _values(variables) -> Dict[str, np.ndarray]:
    return {f"v{i:05d}": np.asarray(v.numpy()) for i, v in enumerate(variables)}


def _check_fits(variables, values: List[np.ndarray], what: str) -> None:
    """Raises ``Unreadable`` when ``values`` are not one array per variable, of its shape."""
    if len(values) != len(variables):
        raise Unreadable(f"its {what} has {len(values)} variables, the model {len(variables)}: it was written by "
                         f"another model configuration")
    for i, (variable, value) in enumerate(zip(variables, values)):
        if tuple(value.shape) != tuple(variable.shape):
            raise Unreadable(f"its {what} variable {i} ({variable.name}) has shape {value.shape}, the model's is "
                             f"{tuple(variable.shape)}: it was written by another model configuration")


def _read_npz(path: Path) -> List[np.ndarray]:
    """Every array of ``path`` in memory, in order (reading checks each member's CRC)."""
    try:
        with np.load(path) as arrays:
            return [np.array(arrays[name]) for name in sorted(arrays.files)]
    except FileNotFoundError:
        raise Unreadable(f"{path.name} is missing") from None
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as error:
        raise Unreadable(f"{path.name} cannot be read ({_reason(error)}; cut short or corrupt)") from None


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise Unreadable(f"{path.name} is missing") from None
    except (OSError, ValueError) as error:
        raise Unreadable(f"{path.name} cannot be read ({_reason(error)})") from None


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:160] if text else type(error).__name__


def _write_npz(path: Path, arrays: Dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())


def save(directory, model, optimizer, state: dict, best_weights: Optional[List[np.ndarray]] = None,
         keep: int = 2) -> Path:
    """Writes ``ckpt-<state['global_step']>`` atomically into ``directory``; keeps the newest ``keep``.

    Raises ``OSError`` when it cannot be written (no space, no folder); what was half written is
    removed and the previous checkpoints are untouched (``Writer`` turns that into one warning)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{PREFIX}{int(state['global_step']):09d}"
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=directory))
    try:
        _write_npz(tmp / "weights.npz", _values(model.variables))
        _write_npz(tmp / "optimizer.npz", _values(optimizer.variables))
        if best_weights is not None:
            _write_npz(tmp / "best.npz", {f"v{i:05d}": np.asarray(w) for i, w in enumerate(best_weights)})
        (tmp / "rng.json").write_text(json.dumps(_python_rng_state()))
        (tmp / "state.json").write_text(json.dumps(state, indent=1, sort_keys=True))
        if final.exists():  # the same step again (an epoch end right on checkpoint_every_steps):
            os.rename(final, Path(tempfile.mkdtemp(prefix=".tmp-", dir=directory)) / "replaced")  # pruned below
        os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    prune(directory, keep)
    return final


def size(model, optimizer, best_weights: Optional[List[np.ndarray]] = None) -> int:
    """Bytes a checkpoint of these variables takes on disk, about (the arrays; the JSON is small)."""
    arrays = [v.numpy() for v in model.variables] + [v.numpy() for v in optimizer.variables] + list(best_weights or [])
    return sum(int(np.asarray(a).nbytes) + 256 for a in arrays) + (1 << 14)


def _free_bytes(directory: Path) -> Optional[int]:
    """Free space on the file system of ``directory`` (or of its nearest existing parent)."""
    for folder in [directory, *directory.parents]:
        if folder.is_dir():
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                return None
    return None


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


class Writer:
    """``save`` for a training loop: a checkpoint that cannot be written is one warning line (naming
    the folder, the error, and the space a checkpoint needs), not the end of the run; the next one
    is tried at its time, and a line says when they are written again."""

    def __init__(self, directory, keep: int = 2):
        self.directory, self.keep = Path(directory), keep
        self.warned = False

    def save(self, model, optimizer, state: dict, best_weights: Optional[List[np.ndarray]] = None) -> Optional[Path]:
        try:
            path = save(self.directory, model, optimizer, state, best_weights, self.keep)
        except OSError as error:
            if not self.warned:
                needed = size(model, optimizer, best_weights)
                free = _free_bytes(self.directory)
                there = f", {_megabytes(free)} free there" if free is not None else ""
                print(f"warning: checkpoint at step {state.get('global_step')} not written to "
                      f"{self.directory.absolute()} ({error.strerror or _reason(error)}; a checkpoint needs about "
                      f"{_megabytes(needed)}{there}); training goes on, the previous checkpoints are kept, and the "
                      f"next one is tried at its time.", file=sys.stderr, flush=True)
                self.warned = True
            return None
        if self.warned:
            print(f"Checkpoints are written to {self.directory.absolute()} again ({path.name}).", file=sys.stderr,
                  flush=True)
            self.warned = False
        return path


def checkpoints(directory) -> List[Path]:
    """Complete checkpoints in ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith(PREFIX) and (p / "state.json").exists())


def latest(directory) -> Optional[Path]:
    found = checkpoints(directory)
    return found[-1] if found else None


def prune(directory, keep: int) -> None:
    for path in checkpoints(directory)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)
    for path in Path(directory).glob(".tmp-*"):  # left by a kill during a write
        shutil.rmtree(path, ignore_errors=True)


def load(path, model, optimizer, set_rng: bool = True) -> Tuple[dict, Optional[List[np.ndarray]]]:
    """Restores model and optimizer variables and (``set_rng``) the Python and NumPy RNGs; returns
    ``(state, best_weights)``. Every file is read and checked against the model first: a checkpoint
    that cannot be restored raises ``Unreadable`` and changes nothing."""
    path = Path(path)
    weights = _read_npz(path / "weights.npz")
    _check_fits(model.variables, weights, "model")
    moments = _read_npz(path / "optimizer.npz")
    _check_fits(optimizer.variables, moments, "optimizer")
    best = _read_npz(path / "best.npz") if (path / "best.npz").exists() else None
    rng, state = _read_json(path / "rng.json"), _read_json(path / "state.json")
    if not isinstance(state, dict) or "global_step" not in state or "epoch" not in state:
        raise Unreadable("state.json holds no loop state (no epoch, global_step)")
    for variable, value in zip(model.variables, weights):
        variable.assign(value)
    for variable, value in zip(optimizer.variables, moments):
        variable.assign(value)
    if set_rng:
        _set_python_rng_state(rng)
    return state, best


def rng_state(path) -> dict:
    """The Python and NumPy RNG states a checkpoint holds (``set_rng_state`` applies them)."""
    return _read_json(Path(path) / "rng.json")


def newest_readable(directory, model, optimizer, set_rng: bool = True, set_aside: bool = True):
    """``(path, state, best_weights)`` of the newest checkpoint in ``directory`` that can be restored,
    restored into ``model`` and ``optimizer``; None when ``directory`` holds no checkpoint.

    Each newer one that cannot be restored is named in one line on stderr and (``set_aside``: the
    chief) renamed ``unreadable-ckpt-...``, kept for a look but out of the resume's and the pruning's
    way. Raises ``Unreadable`` (one line naming each and why) when there are checkpoints and none can
    be restored; then nothing is renamed or deleted."""
    found = checkpoints(directory)
    damaged = []
    for path in reversed(found):
        try:
            state, best = load(path, model, optimizer, set_rng=set_rng)
        except Unreadable as error:
            damaged.append((path, error))
            continue
        for bad, error in damaged:
            aside = bad.with_name(f"unreadable-{bad.name}")
            for n in range(2, 1000):  # one set aside before under the same name (a second damaged resume)
                if not aside.exists():
                    break
                aside = bad.with_name(f"unreadable-{bad.name}-{n}")
            if set_aside:
                os.rename(bad, aside)
            print(f"warning: checkpoint {bad} cannot be restored ({error}); "
                  f"{'set aside as ' + aside.name + ', ' if set_aside else ''}resuming from {path.name}.",
                  file=sys.stderr, flush=True)
        return path, state, best
    if found:
        reasons = "; ".join(f"{bad.name}: {error}" for bad, error in damaged)
        raise Unreadable(f"none of the {len(found)} checkpoints in {Path(directory).absolute()} can be restored "
                         f"({reasons})")
    return None


def _python_rng_state():
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"random": [version, list(internal), gauss],
            "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]}


def set_rng_state(state) -> None:
    """Applies ``rng_state``'s Python and NumPy RNG states."""
    _set_python_rng_state(state)


def _set_python_rng_state(state) -> None:
    version, internal, gauss = state["random"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
