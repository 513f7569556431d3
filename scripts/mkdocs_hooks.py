"""MkDocs hook (mkdocs.yml ``hooks:``): the site's generated pages, one per registered attention, model
and data set, plus their three index pages, written at build time from what the code and conf/ say.

Read without importing the package (no TensorFlow or Keras in a docs build): the registries from
their decorators in the source (``@register_attention("name")`` then ``class``, ``@register_model``
then the builder's ``return Class(...)``), the defaults and their comments from ``conf/``, the rest
from the docstrings through mkdocstrings (``::: module.Class``), an attention's picture on a real run
from ``docs/site/heatmaps/`` (``scripts/heatmaps.py`` makes them). ``tests/test_docs_site.py`` checks
that the pages and the registries agree and that ``mkdocs build --strict`` passes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
SITE = "site"  # the generated pages' folder under docs/

USAGE = {
    "alignment": ("An RNN decoder's attention over the encoder states (or an image's cells, a spectrogram's "
                  "frames), one decoding step at a time:",
                  ["python train.py model=bahdanau model.attention={name}",
                   "python train.py model=luong model.attention={name}"]),
    "self": ("A Transformer's attention (every layer's self- and cross-attention):",
             ["python train.py model=transformer model.attention={name}"]),
    "positional": ("A Transformer's position information:",
                   ["python train.py model=transformer model.positions={name}"]),
    "other": ("Part of the models built on it (the Models pages name their attention).", []),
}


def registered(folder: Path, decorator: str):
    """``{name: (module, class name, task or None)}`` of every ``@<decorator>("name", ...)`` under
    ``folder``: the decorated class, or the class a decorated builder function returns."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in tree.body:
            for deco in getattr(node, "decorator_list", []):
                if not (isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == decorator and deco.args):
                    continue
                name = deco.args[0].value
                task = next((k.value.value for k in deco.keywords if k.arg == "task"), None)
                target = node.name
                if isinstance(node, ast.FunctionDef):  # a builder: the class it returns
                    returned = [n.value.func.id for n in ast.walk(node) if isinstance(n, ast.Return)
                                and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)]
                    target = returned[0] if returned else target
                found[name] = (module, target, task)
    return found


def conf_entries(path: Path):
    """``(description, [(key, default, comment)])`` of a conf file: its leading comment lines and
    its top-level keys with the comment beside each (Hydra's ``defaults`` list left out)."""
    description, entries = [], []
    lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines:
        if not line.startswith("#"):
            break
        description.append(line.lstrip("# ").rstrip())
    for line in lines:
        match = re.match(r"^([A-Za-z_][\w]*):\s*(.*?)\s*(?:#\s*(.*))?$", line)
        if match and match.group(1) not in ("defaults", "name"):
            entries.append((match.group(1), match.group(2) or "", match.group(3) or ""))
    return " ".join(description), entries


def table(entries, prefix: str) -> str:
    if not entries:
        return "No keys of its own.\n"
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [f"| `{prefix}{key}` | `{value}` | {comment.replace('|', '/')} |" for key, value, comment in entries]
    return "\n".join(rows) + "\n"


def equations():
    """``{name: TeX}``: each attention's equation (docs/site/equations.yaml)."""
    import yaml

    return yaml.safe_load((ROOT / "docs" / SITE / "equations.yaml").read_text(encoding="utf-8"))


def unprojected_scores() -> tuple:
    """``zoo.config.UNPROJECTED_SCORES`` read from the source: the scores ``h_t^T h_s`` with no weights
    between query and memory, which need the two equally wide (not ``model=bahdanau``'s defaults)."""
    for node in ast.parse((ROOT / "zoo" / "config.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "UNPROJECTED_SCORES":
            return ast.literal_eval(node.value)
    return ()


def attention_page(name, module, cls, equation=None) -> str:
    description, entries = conf_entries(CONF / "attention" / f"{name}.yaml")
    kind = next((value for key, value, _ in entries if key == "kind"), "other")
    text, commands = USAGE.get(kind, USAGE["other"])
    model = "bahdanau"
    if kind == "alignment" and name in unprojected_scores():
        text = ("An RNN decoder's attention over the encoder states, one decoding step at a time. Its score has no "
                "weights between the decoder state and the memory, so the two must be equally wide: `luong`'s "
                "are, and `bahdanau`'s with a one-directional encoder:")
        commands = ["python train.py model=luong model.attention={name}",
                    "python train.py model=bahdanau model.bidirectional=false model.attention={name}"]
        model = "luong"
    causal = next((value for key, value, _ in entries if key == "causal"), True)
    if kind == "self" and str(causal).lower() == "false":
        text = ("An encoder's self-attention (it mixes positions along the whole sequence, so it cannot be a "
                "decoder's causal one):")
        commands = ["python train.py model=transformer_classifier data=listops model.attention={name}"]
    entries = [e for e in entries if e[0] != "kind"]
    prefix = "model.attention_options." if kind == "alignment" else ""
    run = "\n".join(c.format(name=name) for c in commands)
    use = f"{text}\n\n```bash\n{run}\n```\n" if commands else f"{text}\n"
    see = (f"`python train.py model={model} model.attention={name} debug=smoke` logs its weights on test examples "
           "as `attention/explorer.html` (open it from the run's artifacts in the MLflow UI)."
           if kind == "alignment" else
           f"`python train.py model=transformer model.attention={name} debug=smoke` logs every layer and head "
           "on test examples as `attention/explorer.html`." if kind == "self" and str(causal).lower() != "false" else
           "A run of a model built on it logs its weights as `attention/explorer.html`.")
    math = f"\\[\n{equation}\n\\]\n\n" if equation else ""
    return (f"# {name}\n\n{description}\n\n{math}**Kind:** {kind} · **Configuration:** `conf/attention/{name}.yaml`\n\n"
            f"## Use it\n\n{use}\n## Configuration\n\n{table(entries, prefix)}\n"
            f"## What it attends to\n\n{heatmap(name)}{see}\n\n## API\n\n::: {module}.{cls}\n")


def heatmaps():
    """``{name: {model, data, steps, example}}`` of the pictures ``scripts/heatmaps.py`` made
    (``docs/site/heatmaps/heatmaps.yaml``, beside ``<name>.png``); empty when none were made."""
    import yaml

    index = ROOT / "docs" / SITE / "heatmaps" / "heatmaps.yaml"
    return (yaml.safe_load(index.read_text(encoding="utf-8")) or {}) if index.exists() else {}


def heatmap(name) -> str:
    """The picture of ``name`` on a real run and its caption (the command that made it, the model,
    data and steps), or nothing when ``docs/site/heatmaps/<name>.png`` does not exist."""
    made = heatmaps().get(name)
    if made is None or not (ROOT / "docs" / SITE / "heatmaps" / f"{name}.png").exists():
        return ""
    what = ("the first encoder layer's self-attention, the heads' average" if made["model"] == "transformer" else
            "the decoder's weights over the source as it decoded")
    return (f"![What {name} attends to: {what}, on a test example of {made['data']}](../heatmaps/{name}.png)\n\n"
            f"*{what.capitalize()}: `model={made['model']}`, `data={made['data']}`, {made['steps']} training steps, "
            f"the test example `{made['example']}`. Made by "
            f"`python scripts/heatmaps.py --only {name} --steps {made['steps']}`.*\n\n")


def model_page(name, module, cls, task) -> str:
    description, entries = conf_entries(CONF / "model" / f"{name}.yaml")
    data = {"qa": "story_qa", "image": "digit_strings", "speech": "spoken_digits", "classify": "listops",
            "regression": "kernel_regression"}.get(task)
    command = f"python train.py model={name}" + (f" data={data}" if data else "")
    return (f"# {name}\n\n{description}\n\n**Task:** {task or 'sequence to sequence'} · **Configuration:** "
            f"`conf/model/{name}.yaml`\n\n## Train it\n\n```bash\n{command}\n{command} debug=smoke   "
            f"# seconds: a tiny run\n```\n\n## Configuration\n\n{table(entries, 'model.')}\n## API\n\n"
            f"::: {module}.{cls}\n")


def data_page(name) -> str:
    description, entries = conf_entries(CONF / "data" / f"{name}.yaml")
    return (f"# {name}\n\n{description}\n\n**Configuration:** `conf/data/{name}.yaml`\n\n## Use it\n\n```bash\n"
            f"python train.py data={name} model=<a model of its task>\n```\n\n## Configuration\n\n"
            f"{table(entries, 'data.')}")


def index_page(title, intro, names, folder) -> str:
    rows = "\n".join(f"- [{name}]({name}.md)" for name in names)
    return f"# {title}\n\n{intro}\n\n{rows}\n"


def pages():
    """``{path under docs/: markdown}`` of every generated page."""
    attentions = registered(ROOT / "zoo" / "attention", "register_attention")
    models = registered(ROOT / "zoo" / "models", "register_model")
    datasets = sorted(p.stem for p in (CONF / "data").glob("*.yaml"))
    typeset = equations()
    out = {f"{SITE}/attention/{n}.md": attention_page(n, m, c, typeset.get(n)) for n, (m, c, _) in attentions.items()}
    out.update({f"{SITE}/models/{n}.md": model_page(n, m, c, t) for n, (m, c, t) in models.items()})
    out.update({f"{SITE}/data/{n}.md": data_page(n) for n in datasets})
    out[f"{SITE}/attention/index.md"] = index_page(
        "Attention", "Every registered attention, one page each: what it computes, how to use it, its keys and "
        "defaults from `conf/attention/`, and its API.", sorted(attentions), "attention")
    out[f"{SITE}/models/index.md"] = index_page(
        "Models", "Every registered model: its task, the command that trains it, its keys from `conf/model/`.",
        sorted(models), "models")
    out[f"{SITE}/data/index.md"] = index_page(
        "Data sets", "Every data set: its keys from `conf/data/`. Nothing downloads at run time; the real corpora "
        "are read from disk (see their pages).", datasets, "data")
    return out


def on_files(files, config):
    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    return files
