"""The attention explorer (zoo.plots.explorer) in a real browser: headless Chromium (Debian's package
``chromium``, driven by Playwright, no browser download) opens the ``attention/explorer.html`` of a
Transformer smoke run from disk with every network request refused, and in the MLflow UI's artifact
view against the run's store; pointing at an output token shades the source tokens by its weights.
Skipped, with the reason, where Chromium or Playwright is missing (``.ci/run`` installs both)."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import screenshots  # noqa: E402  (free_port, wait_for: the MLflow UI as the screenshot script starts it)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH: apt-get install chromium (.ci/run does)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -r requirements.txt")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A Transformer smoke run (no export: the explorer is what is looked at) in its own store, read by
    both tests."""
    import mlflow

    from zoo.training import train

    from conftest import compose, empty_store

    workdir = tmp_path_factory.mktemp("explorer_run")
    uri = empty_store(workdir)
    previous = os.getcwd(), os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = uri
    os.chdir(workdir)
    try:
        # One epoch of one step, no predictions.csv: the explorer is drawn from the test split's decoding alone.
        # One layer: its views are drawn per layer and head alike (the menu's "cross-attention, layer 1, head 2").
        result = train(compose(["model=transformer", "debug=smoke", "model.num_layers=1", "trainer.epochs=1",
                                "trainer.steps_per_epoch=1", "tracking.export=false", "tracking.predictions=0"]))
    finally:
        os.chdir(previous[0])
        os.environ.pop("MLFLOW_TRACKING_URI") if previous[1] is None else os.environ.update(
            MLFLOW_TRACKING_URI=previous[1])
    client = mlflow.MlflowClient(uri)
    run_id = result["run_id"]
    page = client.download_artifacts(run_id, "attention/explorer.html", str(workdir / "downloaded"))
    return {"uri": uri, "run_id": run_id, "page": page, "workdir": workdir,
            "experiment_id": client.get_run(run_id).info.experiment_id}


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


def payload(path):
    text = open(path, encoding="utf-8").read()
    return json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S).group(1))


def differing_rows(view):
    """Two row indices of ``view`` whose shading differs (the weights over the row's maximum)."""
    shades = [tuple(round(w / max(max(row), 1e-9), 3) for w in row) for row in view["weights"]]
    for i in range(1, len(shades)):
        if shades[i] != shades[0]:
            return 0, i
    raise AssertionError(f"every row of {view['name']!r} shades the columns alike")


def column_shades(frame):
    return frame.eval_on_selector_all("#columns span", "spans => spans.map(s => s.style.background)")


def point_and_read(frame, row):
    frame.hover(f"#rows span:nth-child({row + 1})")
    return column_shades(frame)


def check_explorer(frame, data):
    """The first example's first view drawn (tokens and plotly's heatmap), shading that follows the
    pointer, and another view chosen from the menu."""
    frame.wait_for_selector("#heatmap .main-svg", timeout=30_000)
    first = data["examples"][0]["views"][0]
    assert frame.eval_on_selector_all("#rows span", "s => s.map(x => x.textContent)") == first["rows"]
    assert frame.eval_on_selector_all("#columns span", "s => s.map(x => x.textContent)") == first["columns"]
    a, b = differing_rows(first)
    shade_a, shade_b = point_and_read(frame, a), point_and_read(frame, b)
    assert all(shade_a) and shade_a != shade_b  # pointing at another output token re-shades the source
    assert frame.eval_on_selector(f"#rows span:nth-child({b + 1})", "s => s.classList.contains('active')")
    names = [v["name"] for v in data["examples"][0]["views"]]
    target = names.index("cross-attention, layer 1, head 2")
    frame.select_option("#view", str(target))
    chosen = data["examples"][0]["views"][target]
    assert frame.eval_on_selector_all("#columns span", "s => s.map(x => x.textContent)") == chosen["columns"]
    assert frame.eval_on_selector_all("#heatmap .main-svg", "s => s.length") >= 1


def test_the_explorer_opens_from_disk_with_no_network_and_follows_the_pointer(run, browser):
    data = payload(run["page"])
    assert len(data["examples"]) == 2  # debug=smoke's tracking.attention_plots
    page = browser.new_page()
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def refuse(route):
        requests.append(route.request.url)
        route.abort()

    page.route(re.compile(r"^(?!file:).*"), refuse)  # anything but the file itself: refused, and noted
    page.goto(f"file://{run['page']}")
    check_explorer(page, data)
    assert requests == [] and errors == []
    page.close()


def test_the_explorer_works_in_the_mlflow_ui_artifact_view(run, browser):
    # One server worker (the default is four processes, each importing MLflow): one page asks.
    port = screenshots.free_port()
    ui = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", run["uri"], "--host",
                           "127.0.0.1", "--port", str(port), "--workers", "1"], cwd=run["workdir"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        screenshots.wait_for(f"{base}/health", ui)
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/#/experiments/{run['experiment_id']}/runs/{run['run_id']}/artifacts/attention/explorer.html")
        page.wait_for_selector("iframe", timeout=60_000)
        frame = next(f for f in _frames_with(page, "#heatmap"))
        check_explorer(frame, payload(run["page"]))
        assert errors == []
        page.close()
    finally:
        ui.terminate()
        ui.wait(timeout=30)


def _frames_with(page, selector, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = [f for f in page.frames if f != page.main_frame and f.query_selector(selector)]
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"no frame of the MLflow UI shows {selector} after {seconds} s")
