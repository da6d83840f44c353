"""The driver's signal handling (issue 14, item 1): real signals to this process."""

from __future__ import annotations

import pytest


def test_sighup_sigterm_and_sigint_stop_alike_and_a_third_raises() -> None:
    """The driver's signal handling, in this (main) thread with real signals."""
    import os
    import signal

    from sr_dist.search.driver import Interrupts

    interrupts = Interrupts()
    with interrupts.installed(True):
        os.kill(os.getpid(), signal.SIGHUP)
        assert interrupts.name == "SIGHUP" and not interrupts.hurry
        os.kill(os.getpid(), signal.SIGTERM)
        assert interrupts.hurry and interrupts.name == "SIGHUP"  # the first one is named
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGHUP) is not interrupts._handle  # handlers given back
