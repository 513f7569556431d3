"""The package's shape stays as docs/design.md draws it: imports point one way, no circles,
no private names across packages, importing ``zoo`` and validating a config stay TensorFlow-free.

The layers, lowest first (docs/design.md, "Import order"). A module may import modules of lower
layers and of its own package; importing a higher layer, or another package of the same layer,
is an arrow against the order and fails here with the file and line.
"""

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS = [
    ["zoo.errors"],
    ["zoo.registry", "zoo.checks", "zoo.tokens", "zoo.environ", "zoo.kernels"],
    ["zoo.catalog", "zoo.store"],
    ["zoo.config", "zoo.metrics"],
    ["zoo.data"],
    ["zoo.attention"],
    ["zoo.models", "zoo.decoding"],
    ["zoo.export", "zoo.tracking", "zoo.plots"],
    ["zoo.evaluation"],
    ["zoo.training"],
    ["zoo.fast"],  # the speed-ups; imported by name by zoo.kernels only
    ["zoo.bench", "zoo.compare", "zoo.search"],
    ["train", "evaluate"],  # the entry points beside the package
]
LAYER_OF = {unit: index for index, units in enumerate(LAYERS) for unit in units}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def sources():
    files = sorted((ROOT / "zoo").rglob("*.py")) + [ROOT / "train.py", ROOT / "evaluate.py"]
    return {module_name(p): p for p in files}


MODULES = sources()


def unit_of(module: str):
    """The layer unit (``zoo.models``, ``zoo.errors``, ``train``) a module belongs to, or None for ``zoo``."""
    for unit in sorted(LAYER_OF, key=len, reverse=True):
        if module == unit or module.startswith(unit + "."):
            return unit
    return None


def imports(module: str, path: Path):
    """``(target module, imported names, line, at module top)`` for every import of a zoo module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "zoo" or alias.name.startswith("zoo."):
                    found.append((alias.name, [], node.lineno, id(node) in top))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                (node.module == "zoo" or node.module.startswith("zoo.")):
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in MODULES:  # ``from zoo.models import rnn`` imports the module zoo.models.recurrent.rnn
                    found.append((submodule, [], node.lineno, id(node) in top))
                else:
                    found.append((node.module, [alias.name], node.lineno, id(node) in top))
    return found


EDGES = [(source, *edge) for source, path in MODULES.items() for edge in imports(source, path)]


def test_every_module_has_a_layer():
    missing = sorted({unit_of(m) is None and m for m in MODULES} - {False, "zoo"})
    assert not missing, f"modules outside every layer of LAYERS (add them to docs/design.md and here): {missing}"


def test_imports_point_down_the_layers():
    wrong = []
    for source, target, _, line, _ in EDGES:
        a, b = unit_of(source), unit_of(target)
        if a is None or b is None or a == b:
            continue
        if LAYER_OF[b] >= LAYER_OF[a]:
            wrong.append(f"{MODULES[source].relative_to(ROOT)}:{line}: {source} -> {target} "
                         f"({a} is layer {LAYER_OF[a]}, {b} is layer {LAYER_OF[b]})")
    assert not wrong, "imports against the order of docs/design.md:\n" + "\n".join(wrong)


def test_no_private_names_across_packages():
    wrong = []
    for source, target, names, line, _ in EDGES:
        if unit_of(source) == unit_of(target):
            continue
        private = [n for n in names if n.startswith("_")]
        private += [part for part in target.split(".") if part.startswith("_")]
        if private:
            wrong.append(f"{MODULES[source].relative_to(ROOT)}:{line}: {source} imports {target} {private}")
    assert not wrong, "private names imported from another package:\n" + "\n".join(wrong)


def test_no_import_circles():
    graph = defaultdict(set)
    for source, target, _, _, _ in EDGES:
        # ``import zoo.models.x`` runs zoo/models/__init__.py too, but an edge to the package itself
        # only counts where the package is the target; a package importing its own modules is how
        # registries fill themselves.
        if target in MODULES and target != source:
            graph[source].add(target)
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(MODULES):
        if node not in state:
            visit(node, [])
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("statement", [
    "import zoo",
    "import zoo.config, zoo.catalog, zoo.errors, zoo.registry, zoo.checks, zoo.tokens, zoo.store",
    "import zoo.data.tokenizers as t; t.names()",
    "from zoo.config import precheck; precheck(['model=luong', 'model.attention=dot'])",
    "from zoo.config import problems; problems(['trainer.resume=abc', 'model=transformer', 'model.num_heads=3'])",
    "from zoo.config import problems; problems(['run_id=abc', 'compare_to=x', 'split=dev'], 'evaluate')",
])
def test_cheap_imports_do_not_start_tensorflow(statement):
    code = (f"import sys; {statement}; assert 'tensorflow' not in sys.modules, "
            f"sorted(m for m in sys.modules if 'tensorflow' in m)[:5]; assert 'mlflow' not in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_lazy_subpackages():
    """``import zoo`` then ``zoo.models``/``zoo.attention`` by attribute (zoo/__init__.py's ``__getattr__``),
    in a fresh interpreter on the configured Keras backend. (Not on Keras' NumPy backend to spare
    TensorFlow's start: that backend imports JAX, which requirements.txt does not install.)"""
    code = "import zoo; print(zoo.models.names()[:1], zoo.attention.names()[:1])"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "['aoa_reader'] ['additive']" in result.stdout


def test_only_the_switch_imports_the_fast_package():
    """``zoo.fast`` holds the speed-ups; ``zoo.kernels`` (the switch) loads it by name. Nothing else
    imports it, so reading any layer, model, loss or search never needs it."""
    wrong = [f"{MODULES[source].relative_to(ROOT)}:{line}: imports {target}"
             for source, target, _, line, _ in EDGES
             if (target == "zoo.fast" or target.startswith("zoo.fast.")) and unit_of(source) != "zoo.fast"]
    assert not wrong, "only zoo/kernels.py may load zoo.fast:\n" + "\n".join(wrong)
    assert '"zoo.fast"' in (ROOT / "zoo" / "kernels.py").read_text(encoding="utf-8")


def test_custom_gradients_and_raw_ops_live_in_the_fast_package_only():
    """The reference path reads as the papers: TensorFlow's raw ops and hand-written gradients are
    speed-ups, and every speed-up is a named replacement in ``zoo/fast`` behind ``kernels=``."""
    import re

    pattern = re.compile(r"custom_gradient|raw_ops")
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for module, path in MODULES.items() if unit_of(module) != "zoo.fast"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not found, "custom gradients or raw ops outside zoo/fast (move them behind the switch):\n" + "\n".join(found)


def test_layers_and_models_do_not_use_tensorflow():
    """``zoo/attention`` and ``zoo/models`` are keras.ops only, so they run on every Keras backend."""
    found = []
    for module, path in MODULES.items():
        if unit_of(module) not in ("zoo.attention", "zoo.models"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for name in names
                      if name == "tensorflow" or name.startswith("tensorflow.") or name.startswith("tf_keras")]
    assert not found, "TensorFlow imported by a layer or model (keras.ops only there):\n" + "\n".join(found)


def _packages():
    """zoo's subpackages, as folder paths relative to zoo/ (``models``, ``models/recurrent``, ...)."""
    return {p.parent.relative_to(ROOT / "zoo").as_posix() for p in (ROOT / "zoo").rglob("__init__.py")} - {"."}


def test_tests_mirror_the_package():
    """``tests/<package>/`` holds the tests of ``zoo/<package>/``: every folder of tests/ is a package of
    zoo, every top-level package of zoo has its folder of tests, no top-level test file is named for a
    package (it belongs in that package's folder), and each file in a folder exercises that package
    (it imports or names ``zoo.<package>``; the fast path's tests reach it through its only door,
    the switch ``zoo.kernels``)."""
    tests = ROOT / "tests"
    packages = _packages()
    folders = {p.parent.relative_to(tests).as_posix() for p in tests.rglob("test_*.py")} - {"."}
    helpers = {p.parent.relative_to(tests).as_posix() for p in tests.rglob("*.py")} - {"."}
    assert not (folders | helpers) - packages, f"tests/ folders with no zoo package: {sorted((folders | helpers) - packages)}"
    top = {p for p in packages if "/" not in p}
    assert not top - folders, f"zoo packages without tests/<package>/: {sorted(top - folders)}"
    named = sorted(p.name for p in tests.glob("test_*.py") if p.stem.removeprefix("test_") in top)
    assert not named, f"top-level test files named for a package (move them to its folder): {named}"
    wrong = []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests).as_posix()
        if folder == ".":
            continue
        dotted = folder.replace("/", ".")
        text = path.read_text(encoding="utf-8")
        doors = [f"zoo.{dotted}", f"zoo/{folder}", f"from zoo import {dotted}"]
        if dotted == "fast":
            doors += ["from zoo import kernels", "zoo.kernels"]
        if not any(door in text for door in doors):
            wrong.append(path.relative_to(ROOT).as_posix())
    assert not wrong, f"test files that never touch the package their folder mirrors: {wrong}"
