"""Stage ``export``: the trained model as a SavedModel translator, its Keras file and vocabularies.

Files only, into a directory the log stage hands to MLflow. Weights that are not all finite are
never exported. The SavedModel's functions are traced anew for it, without the fast path's
hand-written gradients (``zoo.export.saving``), whichever ``kernels`` setting trained the model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict


def make_translator(model, task, cfg):
    """The in-graph translator (``zoo.export.Translator``) the run scores and exports."""
    from omegaconf import OmegaConf

    from zoo.export.translator import Translator

    max_target_length = int(cfg.decoding.max_length or task.max_target_length)
    return Translator(model, task.source_tokenizer, task.target_tokenizer, task.max_source_length,
                      max_target_length, decoding=OmegaConf.to_container(cfg.decoding, resolve=True))


def export(translator, model, task, config_yaml: str, workdir: str) -> Dict[str, str]:
    """Writes ``saved_model/`` (with ``assets.extra/model.keras`` and ``config.yaml``) and
    ``vocab/{source,target}``; returns their paths by name."""
    import numpy as np

    if not all(np.all(np.isfinite(w)) for w in model.get_weights()):
        raise ValueError("The model's weights hold NaN or infinite values; it is not exported.")
    saved_dir = os.path.join(workdir, "saved_model")
    translator.save(saved_dir, config_yaml=config_yaml)
    model.save(os.path.join(saved_dir, "assets.extra", "model.keras"))  # for perplexity, re-decoding
    vocab_dir = Path(workdir) / "vocab"
    for side, tokenizer in (("source", task.source_tokenizer), ("target", task.target_tokenizer)):
        tokenizer.save_artifacts(str(vocab_dir / side))
    return {"saved_model": saved_dir, "vocab": str(vocab_dir)}
