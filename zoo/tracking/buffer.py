"""Metrics that survive a tracking server going away during a run.

``MetricBuffer.log(metrics, step)`` sends one epoch's metrics with a single quick try (no retry
storm: MLflow's HTTP retries are off for the call and it times out after a few seconds). What
could not be sent is kept in order, written to ``<directory>/unlogged_metrics.jsonl`` (one JSON
row per ``log`` call) and sent first at the next call, so when the server comes back during the
run everything arrives, with its original step and timestamp, and the file is removed. If the
server is still away when the run ends, ``flush`` says where the file is and how to send it:

    python -m zoo.tracking.buffer <directory>/unlogged_metrics.jsonl   # MLFLOW_TRACKING_URI as for the run
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from zoo.environ import restored

FILE_NAME = "unlogged_metrics.jsonl"
TIMEOUT_SECONDS = "5"


@contextlib.contextmanager
def _one_quick_try() -> Iterator[None]:
    """MLflow's HTTP client without retries and with a short timeout, for the calls inside."""
    with restored("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = TIMEOUT_SECONDS
        yield


class MetricBuffer:
    """Logs metrics to one run; keeps, retries and finally files what the store did not take."""

    def __init__(self, run_id: str, tracking_uri: str, directory: str):
        self.run_id, self.tracking_uri = run_id, tracking_uri
        self.path = Path(directory) / FILE_NAME
        self.pending: List[dict] = []
        self.warned = False

    def log(self, metrics: Dict[str, float], step: Optional[int] = None) -> bool:
        """Queues one row and sends everything queued; True when the store has it all."""
        self.pending.append({"run_id": self.run_id, "step": step, "timestamp": int(time.time() * 1000),
                             "metrics": {k: float(v) for k, v in metrics.items()}})
        return self.flush()

    def flush(self, final: bool = False) -> bool:
        """Sends the queued rows in order; on failure keeps them (and the file) and says so once,
        or, with ``final``, says where the file is and how to send it."""
        while self.pending:
            try:
                send(self.tracking_uri, [self.pending[0]])
            except Exception as error:  # noqa: BLE001 - any failure of the store: keep the rows
                self._write()
                reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
                if final:
                    print(f"warning: the tracking store {self.tracking_uri} did not take {len(self.pending)} metric "
                          f"rows ({reason}). They are in {self.path.absolute()}; send them when it is back with: "
                          f"python -m zoo.tracking.buffer {self.path.absolute()}", file=sys.stderr, flush=True)
                elif not self.warned:
                    print(f"warning: the tracking store {self.tracking_uri} is not answering ({reason}); training "
                          f"goes on, metrics are kept in {self.path.absolute()} and sent when it answers.",
                          file=sys.stderr, flush=True)
                    self.warned = True
                return False
            self.pending.pop(0)
        if self.warned:
            print(f"The tracking store {self.tracking_uri} answers again: the kept metrics are logged.",
                  file=sys.stderr, flush=True)
            self.warned = False
        if self.path.exists():
            self.path.unlink()
        return True

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(row) + "\n" for row in self.pending), encoding="utf-8")
        os.replace(tmp, self.path)


def send(tracking_uri: str, rows: List[dict]) -> None:
    """Logs ``rows`` (as written in the file) with one quick try each; raises when the store does not take them."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(tracking_uri)
    with _one_quick_try():
        for row in rows:
            client.log_batch(row["run_id"], metrics=[Metric(k, v, row["timestamp"], row["step"] or 0)
                                                     for k, v in row["metrics"].items()], synchronous=True)


def upload(path: str, tracking_uri: Optional[str] = None) -> int:
    """Sends a file of kept rows to the store (``MLFLOW_TRACKING_URI``); removes it when all went in."""
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    send(uri, rows)
    Path(path).unlink()
    return len(rows)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isfile(sys.argv[1]):
        print(f"usage: python -m zoo.tracking.buffer <{FILE_NAME}>", file=sys.stderr)
        sys.exit(2)
    try:
        count = upload(sys.argv[1])
    except Exception as error:  # noqa: BLE001 - one line, the file is kept
        print(f"error: the rows of {sys.argv[1]} were not sent ({str(error).splitlines()[0][:200]}); "
              f"the file is kept.", file=sys.stderr)
        sys.exit(1)
    print(f"Sent {count} metric rows of {sys.argv[1]}.")
