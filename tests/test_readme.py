"""The README stays a user guide (issue 45): short, no commit hashes, a Quickstart of exactly two
commands whose test command is the one CI runs, links that lead somewhere, and model and attention
tables that list exactly the registered names (one ``conf/model/<name>.yaml`` or
``conf/attention/<name>.yaml`` each). Plain text checks: no TensorFlow, no Hydra."""

import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 300
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _text():
    return README.read_text(encoding="utf-8")


def _section(title):
    """The lines of the ``## title`` section, up to the next ``## ``."""
    lines = _text().splitlines()
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start + 1:end]


def _code_blocks(lines, language):
    """The lines of every fenced block opened with ```<language>, in order."""
    blocks, block, inside, wanted = [], [], False, False
    for line in lines:
        if line.startswith("```"):
            if inside and wanted:
                blocks.append(block)
            inside, wanted, block = not inside, line[3:].strip() == language, []
        elif inside:
            block.append(line)
    return blocks


def _commands(block):
    """Shell commands of a block: continuation lines joined, comments and blank lines dropped."""
    text = "\n".join(block).replace("\\\n", " ")
    commands = [line.split(" #")[0].strip() for line in text.splitlines()]
    return [command for command in commands if command and not command.startswith("#")]


def _table(header_first_cell):
    """First-column names (inside backticks) of the README table whose header starts with that cell."""
    lines = _text().splitlines()
    header = next(i for i, line in enumerate(lines) if re.match(rf"\|\s*{header_first_cell}\s*\|", line))
    names = []
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        names += re.findall(r"`([a-z0-9_]+)`", line.split("|")[1])
    return names


def test_at_most_300_lines():
    assert len(_text().splitlines()) <= MAX_LINES


def test_no_commit_hashes():
    assert not re.findall(r"\b[0-9a-f]{40}\b", _text())


def test_quickstart_has_two_commands_and_the_second_runs_what_ci_runs():
    blocks = _code_blocks(_section("Quickstart"), "bash")
    commands = [command for block in blocks for command in _commands(block)]
    assert len(commands) == 2, commands
    train, test = (command.split(" && ") for command in commands)
    assert train[-1] == "python train.py model=bahdanau"
    assert train[:-1] == test[:-1]

    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert test[-1] in ci, f"{test[-1]!r} is not a line of .ci/run"
    assert ci[-1] == test[-1], "the README's test command is not the last command of .ci/run"
    # The same installation: CI's `pip install [-q] -r requirements.txt`, quiet or not.
    ci_install = [shlex.split(line) for line in ci if line.startswith("pip install")]
    readme_install = [shlex.split(part) for part in test if part.startswith("pip install")]
    assert [[word for word in words if word != "-q"] for words in ci_install] == readme_install


def _slug(heading):
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower()).replace(" ", "-")


def _generated(path) -> bool:
    """Whether ``path`` is one of the documentation site's generated pages (scripts/mkdocs_hooks.py)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import mkdocs_hooks

    docs = (ROOT / "docs").resolve()
    return path.resolve().is_relative_to(docs) and path.resolve().relative_to(docs).as_posix() in mkdocs_hooks.pages()


def _broken_links(page):
    """Relative links of ``page`` whose file, or whose ``#anchor`` in a Markdown file, does not exist."""
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        linked = page.parent / path if path else page
        if not linked.exists() and _generated(linked):
            continue  # a page the documentation site generates at build time (tests/test_docs_site.py)
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md":
            headings = {_slug(line) for line in linked.read_text(encoding="utf-8").splitlines() if line.startswith("#")}
            if anchor not in headings:
                broken.append(target)
    return broken


def test_readme_links_point_to_files_and_headings():
    assert LINK.findall(_text()), "no links found: has the link pattern broken?"
    assert not _broken_links(README)


@pytest.mark.parametrize("page", sorted((ROOT / "docs").rglob("*.md")), ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_links_point_to_files_and_headings(page):
    """The pages the README sends readers to keep their own links valid."""
    assert not _broken_links(page)


def test_the_model_table_lists_exactly_the_registered_models():
    in_table = _table("model")
    registered = sorted(path.stem for path in (ROOT / "conf" / "model").glob("*.yaml"))
    assert len(in_table) == len(set(in_table)), f"named twice: {in_table}"
    assert sorted(in_table) == registered, (
        f"in the README's model table only: {sorted(set(in_table) - set(registered))}; "
        f"in conf/model/ only: {sorted(set(registered) - set(in_table))}")


# The attention table's rows by kind: the bold label of a row, and the ``kind`` its attentions' YAMLs declare.
KINDS = {"alignment": "alignment", "self-attention": "self", "positions": "positional", "reading": "other"}


def _attention_rows():
    """``{kind: [names]}``: the backticked names of each kind's row of the README's attention table."""
    lines = _text().splitlines()
    header = next(i for i, line in enumerate(lines) if re.match(r"\|\s*attentions\s*\|", line))
    rows = {}
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        cell = line.split("|")[1]
        label = re.match(r"\s*\*\*([a-z -]+)\*\*", cell)
        if label and label.group(1) in KINDS:
            rows[KINDS[label.group(1)]] = re.findall(r"`([a-z0-9_]+)`", cell)
    return rows


def test_the_attention_table_lists_every_registered_attention_under_its_kind():
    """Every ``conf/attention/<name>.yaml`` is named in the row of the kind it declares; the self-attention
    row holds the Transformer's choices (``multi_head`` and the ``kind: self`` layers); the positions row
    adds ``none`` (no positions), which is a value of ``model.positions``, not a layer."""
    from zoo import catalog

    rows = _attention_rows()
    assert set(rows) == set(KINDS.values()), rows
    for kind, names in rows.items():
        expected = catalog.self_attentions() if kind == "self" else catalog.attentions(kind)
        extra = {"none"} if kind == "positional" else set()
        assert sorted(set(names) - extra) == sorted(expected), (kind, names, expected)
    named = {name for names in rows.values() for name in names}
    registered = {path.stem for path in (ROOT / "conf" / "attention").glob("*.yaml")}
    assert registered <= named, f"in conf/attention/ only: {sorted(registered - named)}"
