"""Screenshots of the MLflow UI for a store: the experiment's runs, a sweep's parent run, one child run.

    python scripts/screenshots.py --store sqlite:///mlflow.db --out docs/screenshots

Starts ``mlflow ui`` on a free port of 127.0.0.1 against the store, opens the pages in headless
Chromium (Debian package ``chromium``; ``--chromium`` for another binary) and writes PNG files:
``runs.png`` (the experiment's runs, sweeps grouped under their parent), ``parent.png`` (the newest
sweep's parent run: description with the summary table), ``child.png`` and ``child_artifacts.png``
(one of its children: name, description, datasets, system metrics when recorded, artifacts). Needs no
network. Not run in CI (the browser is not a requirement of the project).
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"))
    parser.add_argument("--experiment", default="attention-zoo")
    parser.add_argument("--out", default="screenshots")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
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
    finally:
        ui.terminate()
        ui.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
