"""The documentation site's pictures: what each attention attends to on a real run.

    nice -n 19 python scripts/heatmaps.py [--only additive,rotary] [--steps 300] [--out docs/site/heatmaps]

For every registered attention that can drive a model (the site's USAGE, ``scripts/mkdocs_hooks.py``:
an alignment attention in ``model=bahdanau`` (``model=luong`` for the plain dot products, whose query
and key must be equally wide), a self-attention kind with ``model=transformer
model.attention=<name>``, a position scheme with ``model=transformer model.positions=<name>``), one
short real run on ``data=dates`` in this process, through the project's own lifecycle
(``zoo.training.train``; tracking to a throwaway SQLite store, nothing exported), then one heatmap of
the same test example for every attention, drawn by ``zoo.plots.attention_heatmap`` into
``<out>/<name>.png``:

- ``model=bahdanau`` or ``luong``: the decoder's weights over the source as it decoded (what a run logs as
  ``attention/test_00.png``);
- ``model=transformer``: the first encoder layer's self-attention, the heads' average (the view
  ``attention/explorer.html`` shows), since the chosen attention or position scheme is the encoder's
  and decoder's self-attention (the cross-attention is always ``multi_head``); the first layer's,
  where a position scheme's pattern is plainest.

An attention with no such model (``kind: other``: a reader's or a memory network's part) gets no
picture, and the script says so. Each page of the site shows its picture when the file exists
(``scripts/mkdocs_hooks.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import mkdocs_hooks  # noqa: E402

OUT = ROOT / "docs" / "site" / "heatmaps"
STEPS = 300
EXAMPLE = 0  # the test split's first example: the same date string for every attention (same seed, same sizes)

# The run: data=dates sized so its test split is the same for every attention; widths small enough for
# a CPU run of about a minute. ``model.*`` keys per model, then the key the attention is chosen with.
COMMON = ["data=dates", "data.train_size=20000", "data.val_size=64", "data.test_size=16", "seed=42",
          "trainer.epochs=1", "trainer.batch_size=32", "trainer.verbose=0", "tracking.export=false",
          "tracking.attention_plots=0", "tracking.predictions=16", "tracking.log_pyfunc=false"]
MODELS = {
    "alignment": ("bahdanau", ["model.embed_dim=32", "model.hidden_size=64"], "model.attention"),
    "self": ("transformer", ["model.embed_dim=32", "model.intermediate_dim=64", "model.num_layers=2",
                             "model.dropout=0.0"], "model.attention"),
    "positional": ("transformer", ["model.embed_dim=32", "model.intermediate_dim=64", "model.num_layers=2",
                                   "model.dropout=0.0"], "model.positions"),
}


# Alignment attentions whose score needs the query and the key to be equally wide (a plain dot product)
# run in model=luong, whose decoder state is as wide as the encoder's memory; model=bahdanau's
# bidirectional encoder states are twice its decoder state.
SAME_WIDTH = {"dot", "scaled_dot"}
LUONG = ("luong", ["model.embed_dim=32", "model.hidden_size=64", "model.dropout=0.0"], "model.attention")


# Attentions of a USAGE kind that no seq2seq model on dates can run, and why (the script says so).
NO_MODEL = {"linformer": "it cannot be causal and model=transformer's decoder attends causally "
                         "(it runs in an encoder-only model: model=transformer_classifier data=listops)"}


def model_of(name: str, kind: str):
    """``(model, [its size overrides], the key that picks the attention)`` of ``name``'s run; None
    when no model runs with it on dates (``kind: other``, ``NO_MODEL``)."""
    if name in NO_MODEL:
        return None
    if kind == "alignment" and name in SAME_WIDTH:
        return LUONG
    return MODELS.get(kind)


def kinds():
    """``{name: kind}`` of every registered attention (its ``conf/attention/<name>.yaml`` ``kind``),
    read as the site's hook reads them."""
    names = mkdocs_hooks.registered(ROOT / "zoo" / "attention", "register_attention")
    out = {}
    for name in sorted(names):
        _, entries = mkdocs_hooks.conf_entries(mkdocs_hooks.CONF / "attention" / f"{name}.yaml")
        out[name] = next((value for key, value, _ in entries if key == "kind"), "other")
    return out


def command(name: str) -> str:
    """The command that makes ``name``'s picture (the page's caption names it)."""
    return f"python scripts/heatmaps.py --only {name}"


def overrides(name: str, kind: str, steps: int, store: str):
    """The ``train.py`` overrides of ``name``'s run: ``(model, [overrides])``."""
    model, sizes, key = model_of(name, kind)
    return model, [f"model={model}", *COMMON, *sizes, f"{key}={name}", f"trainer.steps_per_epoch={steps}",
                   f"tracking.uri=sqlite:///{store}/mlflow.db", "tracking.experiment=heatmaps",
                   f"trainer.checkpoint_dir={store}/checkpoints"]


def train_keeping_model(cfg):
    """``zoo.training.train(cfg)``, keeping the trained model and its data (the lifecycle's ``on_model``
    hook): ``(metrics, kind, data, model)``."""
    from zoo.training import train

    kept = {}
    metrics = train(cfg, on_model=lambda kind, data, model: kept.update(kind=kind, data=data, model=model))
    return metrics, kept["kind"], kept["data"], kept["model"]


def picture(kind, data, model, model_name: str):
    """``(weights, columns, rows, xlabel, ylabel, decoded)`` of the fixed test example."""
    from zoo.export.translator import translate_batched
    from zoo.training.score import layer_and_head_views

    task = data.task
    source = task.splits["test"][0][EXAMPLE]
    outputs = translate_batched(kind.translator(data, model).translate, [source])
    if model_name != "transformer":
        return (outputs["attention"][0], outputs["source_tokens"][0], outputs["target_tokens"][0],
                "source token", "output token", outputs["text"][0])
    views = layer_and_head_views(model, task, outputs, 1)[0]
    v = next(v for v in views if v["name"] == "encoder self-attention, layer 1, heads' average")
    return v["weights"], v["columns"], v["rows"], "key (source token)", "query (source token)", outputs["text"][0]


def draw(name: str, kind: str, steps: int, out: Path) -> Path:
    """Trains ``name``'s short run and writes ``<out>/<name>.png``; returns its path."""
    from zoo.config import compose_train  # what train.py composes (and tests/conftest.py's compose)
    from zoo.plots import attention_heatmap

    store = tempfile.mkdtemp(prefix="zoo-heatmaps-")
    try:
        model_name, args = overrides(name, kind, steps, store)
        metrics, run_kind, data, model = train_keeping_model(compose_train(args, "train"))
        weights, columns, rows, xlabel, ylabel, decoded = picture(run_kind, data, model, model_name)
        source, reference = (data.task.splits["test"][i][EXAMPLE] for i in (0, 1))
        what = "first encoder layer's self-attention, heads' average" if model_name == "transformer" else \
            "decoder attention over the source"
        title = (f"{name} in model={model_name}, data=dates, {steps} steps "
                 f"(test exact match {metrics['test_exact_match']:.2f})\n{what}\n"
                 f"{source!r} -> {decoded!r} (ref {reference!r})")
        out.mkdir(parents=True, exist_ok=True)
        path = Path(attention_heatmap(weights, columns, rows, str(out / f"{name}.png"), title=title,
                                      xlabel=xlabel, ylabel=ylabel))
        shrink(path)
        record(out, name, {"model": model_name, "data": "dates", "steps": steps, "example": source})
        return path
    finally:
        shutil.rmtree(store, ignore_errors=True)


def shrink(path: Path) -> None:
    """Rewrites the PNG with a 256-colour palette: a third of the bytes, the same picture to the eye
    (the repository keeps these files)."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def record(out: Path, name: str, made: dict) -> None:
    """``<out>/heatmaps.yaml``: what each picture shows (the site's caption: model, data, steps, example)."""
    import yaml

    index = out / "heatmaps.yaml"
    known = (yaml.safe_load(index.read_text(encoding="utf-8")) or {}) if index.exists() else {}
    known[name] = made
    index.write_text("# Written by scripts/heatmaps.py: what each <name>.png beside it shows (the site's captions).\n"
                     + yaml.safe_dump(dict(sorted(known.items())), sort_keys=True, allow_unicode=True),
                     encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated attention names (default: all)")
    parser.add_argument("--steps", type=int, default=STEPS, help=f"training steps of each run (default {STEPS})")
    parser.add_argument("--out", default=str(OUT), help="folder of the PNGs (default docs/site/heatmaps)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    every = kinds()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(every)
    unknown = [n for n in names if n not in every]
    if unknown:
        parser.error(f"not registered attentions: {', '.join(unknown)} (registered: {', '.join(every)})")
    failed = []
    for name in names:
        if model_of(name, every[name]) is None:
            why = NO_MODEL.get(name, f"kind {every[name]}: no model=bahdanau/luong/transformer path; the models "
                                     "built on it log their own attention")
            print(f"{name}: no picture ({why})", flush=True)
            continue
        started = time.process_time(), time.perf_counter()
        try:
            path = draw(name, every[name], args.steps, Path(args.out))
        except Exception as error:  # one attention's failure does not cost the others their pictures
            print(f"{name}: FAILED, no picture: {type(error).__name__}: {error}", flush=True)
            failed.append(name)
            continue
        cpu, wall = time.process_time() - started[0], time.perf_counter() - started[1]
        size = path.stat().st_size // 1024
        print(f"{name}: {cpu:.0f} s CPU, {wall:.0f} s wall, wrote {path} ({size} KB)", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
