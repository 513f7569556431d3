"""SIGTERM/SIGINT: deferred to the end of the step while training, immediate otherwise (real signals)."""

import os
import signal

import pytest


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_training_waits_for_the_step(signum):
    from zoo.training.signals import Interrupted, handle_signals

    before = signal.getsignal(signum)
    with handle_signals() as stop:
        with stop.deferring():
            os.kill(os.getpid(), signum)
            assert stop.requested and stop.signum == signum  # still here: the loop decides
        with pytest.raises(Interrupted) as raised:
            with stop.deferring():
                pass  # a request from before raises on entry
        assert raised.value.exit_code == 128 + signum
    assert signal.getsignal(signum) is before


def test_a_signal_outside_training_interrupts_at_once():
    from zoo.training.signals import Interrupted, handle_signals

    with handle_signals():
        with pytest.raises(Interrupted, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 1)  # the handler runs here at the latest
