"""The documentation site (mkdocs.yml, scripts/mkdocs_hooks.py): a page for every registered attention,
model and data set, ``mkdocs build --strict`` passing with nothing fetched from a network, and in
headless Chromium (where installed) the index, an attention page and the concepts page load with no
console error, no broken image and their math rendered."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import heatmaps  # noqa: E402
import mkdocs_hooks  # noqa: E402

PICTURES = ROOT / "docs" / "site" / "heatmaps"


def test_the_generated_pages_are_the_registries():
    import zoo.attention
    import zoo.models
    from zoo import catalog

    pages = mkdocs_hooks.pages()
    for folder, names in (("attention", zoo.attention.names()), ("models", zoo.models.names()),
                          ("data", catalog.datasets())):
        made = sorted(Path(p).stem for p in pages if p.startswith(f"site/{folder}/") and not p.endswith("index.md"))
        assert made == sorted(names), folder
        index = pages[f"site/{folder}/index.md"]
        assert all(f"]({name}.md)" in index for name in names)
    assert sorted(mkdocs_hooks.equations()) == sorted(zoo.attention.names())  # every mechanism's equation typeset
    additive = pages["site/attention/additive.md"]
    assert "\\[\ne_{ij} = v_a^\\top \\tanh(W_a s_{i-1} + U_a h_j)" in additive
    assert "::: zoo.attention.additive_attention.AdditiveAttention" in additive  # the API from the docstring
    assert "| `model.attention_options.units` | `null` |" in additive  # the keys and defaults of conf/
    assert "python train.py model=bahdanau model.attention=additive" in additive
    assert "::: zoo.models.self_attention.transformer.TransformerSeq2Seq" in pages["site/models/transformer.md"]
    assert "python train.py model=memory_network data=story_qa" in pages["site/models/memory_network.md"]


def test_every_attention_with_a_model_has_its_picture_from_a_real_run_and_its_page_shows_it():
    """scripts/heatmaps.py made one small PNG per attention that drives a model (bahdanau or transformer),
    all of the same test example, and each page embeds its own with the command that made it; an
    attention no model runs with has neither picture nor a word about one."""
    pages, made = mkdocs_hooks.pages(), mkdocs_hooks.heatmaps()
    with_model = {n for n, kind in heatmaps.kinds().items() if heatmaps.model_of(n, kind) is not None}
    assert len(with_model) >= 20 and sorted(made) == sorted(with_model)
    assert len({entry["example"] for entry in made.values()}) == 1  # one date string on every page
    for name, kind in heatmaps.kinds().items():
        page, png = pages[f"site/attention/{name}.md"], PICTURES / f"{name}.png"
        if name in with_model:
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 100_000, name
            assert made[name]["model"] == heatmaps.model_of(name, kind)[0] and made[name]["data"] == "dates"
            assert f"](../heatmaps/{name}.png)" in page
            assert f"`python scripts/heatmaps.py --only {name} --steps {made[name]['steps']}`" in page
            assert f"`model={made[name]['model']}`, `data=dates`, {made[name]['steps']} training steps" in page
        else:
            assert not png.exists() and "heatmaps" not in page, name
    assert sum(p.stat().st_size for p in PICTURES.glob("*.png")) < 2_000_000
    assert mkdocs_hooks.heatmap("nowhere") == ""  # no file, no picture


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**__import__("os").environ,
                                                                            "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_mkdocs_builds_strict_with_every_page_and_nothing_from_a_network(site):
    import zoo.attention
    import zoo.models

    for name in zoo.attention.names():
        page = (site / "site" / "attention" / f"{name}.html").read_text(encoding="utf-8")
        assert f"conf/attention/{name}.yaml" in page
    for name in zoo.models.names():
        assert (site / "site" / "models" / f"{name}.html").exists()
    additive = (site / "site" / "attention" / "additive.html").read_text(encoding="utf-8")
    assert "AdditiveAttention" in additive and "Bahdanau" in additive  # mkdocstrings rendered the docstring
    fetched = set()
    for page in site.rglob("*.html"):
        fetched |= set(re.findall(r'<(?:script|img|link)[^>]+(?:src|href)="(https?://[^"]+)"', page.read_text("utf-8")))
    assert fetched == set()  # scripts, styles, fonts and images are all local
    assert (site / "search" / "search_index.json").exists()  # search works offline
    for name in mkdocs_hooks.heatmaps():  # each attention page's picture is a file of the built site
        page = site / "site" / "attention" / f"{name}.html"
        images = re.findall(r'<img[^>]+src="([^"]+)"', page.read_text("utf-8"))
        assert f"../heatmaps/{name}.png" in images, name
        assert all((page.parent / src).resolve().is_file() for src in images), (name, images)
    assert list((site / "site" / "katex" / "fonts").glob("*.woff2"))


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH: apt-get install chromium (.ci/run does)")
def test_the_site_in_a_browser_loads_cleanly_with_its_math_rendered(site):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        for path in ("index.html", "site/attention/additive.html", "site/concepts.html"):
            check_page(browser, site, path)
        browser.close()


def check_page(browser, site, path):
    """``path`` of the built site from disk: no console error, nothing fetched remotely, no broken
    image; on the concepts page and an attention's page the math typeset by KaTeX, no raw TeX left."""
    page = browser.new_page()
    errors, remote = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route(re.compile(r"^(?!file:).*"), lambda route: (remote.append(route.request.url), route.abort()))
    page.goto(f"file://{site / path}")
    page.wait_for_load_state("load")
    broken = page.eval_on_selector_all("img", "imgs => imgs.filter(i => !i.complete || !i.naturalWidth).map(i => i.src)")
    assert errors == [] and broken == [] and remote == [], (path, errors, broken, remote)
    if path in ("site/concepts.html", "site/attention/additive.html"):
        page.wait_for_selector(".katex", timeout=30_000)
        text = page.inner_text("article")
        assert "\\[" not in text and "\\(" not in text and "\\frac" not in text  # no raw TeX left
        assert page.eval_on_selector_all(".katex-display", "e => e.length") >= 1
        assert page.eval_on_selector_all(".katex-error", "e => e.map(x => x.title)") == []  # TeX KaTeX could not read
    page.close()
