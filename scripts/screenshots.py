"""Screenshots of the MLflow UI for a store: the experiment's runs, a sweep's parent run, one child run.

    python scripts/screenshots.py --store sqlite:///mlflow.db --out docs/screenshots

Starts ``mlflow ui`` on a free port of 127.0.0.1 against the store, opens the pages in headless
Chromium (Debian package ``chromium``; ``--chromium`` for another binary) and writes PNG files:
``runs.png`` (the experiment's runs, sweeps grouped under their parent), ``parent.png`` (the newest
sweep's parent run: description with the summary table), ``child.png`` and ``child_artifacts.png``
(one of its children: name, description, datasets, system metrics when recorded, artifacts). With
``--explorer-run <run id>``: ``explorer.png`` (the run's ``attention/explorer.html`` opened from disk)
and ``explorer_in_mlflow.png`` (the run page's artifact view showing it). Needs no network. Not run in
CI (tests/plots/test_explorer_browser.py checks the explorer in the browser there).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"error: mlflow ui exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"error: mlflow ui did not answer at {url} within {seconds:.0f} s")


def shoot(browser: str, url: str, path: str, width: int = 1600, height: int = 1100) -> None:
    subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", "--virtual-time-budget=30000", f"--screenshot={path}", url],
                   check=True, capture_output=True, timeout=180)
    print(f"wrote {path}  ({url})")


def shoot_explorer_in_ui(browser: str, url: str, path: str) -> None:
    """The MLflow UI's artifact view of an explorer, once the page inside its frame has drawn the
    heatmap (a fixed time budget shoots the frame before its 5 MB of script ran): Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=browser, args=["--no-sandbox", "--disable-gpu"])
        page = chromium.new_page(viewport={"width": 1600, "height": 1100})
        page.goto(url)
        page.wait_for_selector("iframe", timeout=120_000)
        deadline = time.monotonic() + 120
        while not any(f.query_selector("#heatmap .main-svg") for f in page.frames if f != page.main_frame):
            if time.monotonic() > deadline:
                raise SystemExit(f"error: the explorer did not draw in the MLflow UI at {url}")
            time.sleep(0.5)
        frame = next(f for f in page.frames if f != page.main_frame and f.query_selector("#heatmap"))
        frame.hover("#rows span:nth-child(2)")
        page.screenshot(path=path)
        chromium.close()
    print(f"wrote {path}  ({url})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"))
    parser.add_argument("--experiment", default="attention-zoo")
    parser.add_argument("--out", default="screenshots")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    parser.add_argument("--explorer-run", default=None, metavar="RUN_ID",
                        help="also shoot this run's attention explorer, from disk and in the MLflow UI")
    args = parser.parse_args(argv)
    if not args.chromium:
        print("error: no chromium found: apt-get install chromium, or pass --chromium <binary>", file=sys.stderr)
        return 2
    import mlflow

    client = mlflow.MlflowClient(args.store)
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        print(f"error: no experiment '{args.experiment}' in {args.store}", file=sys.stderr)
        return 2
    eid = experiment.experiment_id
    parents = client.search_runs([eid], "tags.zoo.kind = 'sweep'", order_by=["attributes.start_time DESC"])
    os.makedirs(args.out, exist_ok=True)
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", args.store,
                           "--host", "127.0.0.1", "--port", str(port)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{base}/health", ui)
        shoot(args.chromium, f"{base}/#/experiments/{eid}/runs", os.path.join(args.out, "runs.png"))
        if parents:
            parent = parents[0].info.run_id
            shoot(args.chromium, f"{base}/#/experiments/{eid}/runs/{parent}", os.path.join(args.out, "parent.png"))
            children = client.search_runs([eid], f"tags.mlflow.parentRunId = '{parent}'")
            if children:
                child = children[0].info.run_id
                shoot(args.chromium, f"{base}/#/experiments/{eid}/runs/{child}", os.path.join(args.out, "child.png"))
                shoot(args.chromium, f"{base}/#/experiments/{eid}/runs/{child}/artifacts",
                      os.path.join(args.out, "child_artifacts.png"))
                shoot(args.chromium, f"{base}/#/experiments/{eid}/runs/{child}/system-metrics",
                      os.path.join(args.out, "child_system_metrics.png"))
        else:
            print("no sweep parent run in the store: only runs.png", file=sys.stderr)
        if args.explorer_run:
            run = client.get_run(args.explorer_run)
            page = client.download_artifacts(args.explorer_run, "attention/explorer.html", os.path.abspath(args.out))
            shoot(args.chromium, f"file://{page}", os.path.join(args.out, "explorer.png"), height=1000)
            shoot_explorer_in_ui(args.chromium, f"{base}/#/experiments/{run.info.experiment_id}/runs/"
                                 f"{args.explorer_run}/artifacts/attention/explorer.html",
                                 os.path.join(args.out, "explorer_in_mlflow.png"))
    finally:
        ui.terminate()
        ui.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
