"""SIGTERM and SIGINT while training: finish the step, checkpoint, end the run KILLED.

During training a signal only raises a flag that the loop reads after each step; outside
training (scoring, export) it raises ``Interrupted`` at once, so the run still ends KILLED.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator, Optional

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """Training stopped on a signal. ``str()`` is the message for the user; ``exit_code`` is
    ``128 + signal number``, as a shell reports a process killed by that signal."""

    def __init__(self, signum: int, message: str = ""):
        super().__init__(message or f"stopped by {signal.Signals(signum).name}")
        self.signum = int(signum)
        self.exit_code = 128 + int(signum)


class StopTraining(Exception):
    """Raised by an ``on_epoch`` hook of ``train`` to end the run after that epoch (a pruned search
    trial). The run ends KILLED (``run_status``) with the message as its ``zoo.stopped`` tag."""

    run_status = "KILLED"


class StopRequest:
    """The flag the loop polls. ``deferred`` is True while a step may finish first."""

    def __init__(self):
        self.signum: Optional[int] = None
        self.deferred = False

    def __call__(self, signum, frame):  # the signal handler
        if self.signum is None:
            self.signum = signum
        if not self.deferred:
            raise Interrupted(signum)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        """Within the block a signal waits for the loop; one that came before it raises at once."""
        if self.signum is not None:
            raise Interrupted(self.signum)
        self.deferred = True
        try:
            yield
        finally:
            self.deferred = False


@contextlib.contextmanager
def handle_signals() -> Iterator[StopRequest]:
    """Installs the handler for SIGTERM and SIGINT (main thread only) and restores the old ones."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, request)
    try:
        yield request
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
