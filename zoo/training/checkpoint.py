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
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

PREFIX = "ckpt-"


def _values(variables) -> Dict[str, np.ndarray]:
    return {f"v{i:05d}": np.asarray(v.numpy()) for i, v in enumerate(variables)}


def _assign(variables, arrays, what: str) -> None:
    if len(arrays.files) != len(variables):
        raise ValueError(f"The checkpoint's {what} has {len(arrays.files)} variables, the model {len(variables)}: "
                         f"it was written by another model configuration.")
    for i, variable in enumerate(variables):
        value = arrays[f"v{i:05d}"]
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(f"The checkpoint's {what} variable {i} ({variable.name}) has shape {value.shape}, "
                             f"the model's is {tuple(variable.shape)}.")
        variable.assign(value)


def _write_npz(path: Path, arrays: Dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())


def save(directory, model, optimizer, state: dict, best_weights: Optional[List[np.ndarray]] = None,
         keep: int = 2) -> Path:
    """Writes ``ckpt-<state['global_step']>`` atomically into ``directory``; keeps the newest ``keep``."""
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
        if final.exists():  # the same step again (an epoch end right on checkpoint_every_steps)
            shutil.rmtree(final)
        os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    prune(directory, keep)
    return final


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


def load(path, model, optimizer) -> Tuple[dict, Optional[List[np.ndarray]]]:
    """Restores model and optimizer variables and the Python and NumPy RNGs; returns ``(state, best_weights)``."""
    path = Path(path)
    with np.load(path / "weights.npz") as arrays:
        _assign(model.variables, arrays, "model")
    with np.load(path / "optimizer.npz") as arrays:
        _assign(optimizer.variables, arrays, "optimizer")
    best = None
    if (path / "best.npz").exists():
        with np.load(path / "best.npz") as arrays:
            best = [arrays[name] for name in sorted(arrays.files)]
    _set_python_rng_state(json.loads((path / "rng.json").read_text()))
    return json.loads((path / "state.json").read_text()), best


def _python_rng_state():
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"random": [version, list(internal), gauss],
            "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]}


def _set_python_rng_state(state) -> None:
    version, internal, gauss = state["random"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
