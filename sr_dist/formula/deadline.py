"""A hard deadline for pure-Python work such as sympy's ``simplify``, in any thread.

``sympy.simplify`` can run for minutes on a formula that fits exactly but carries a junk term
(``Int_0*exp(sin(cos(theta)) - 3367/6)`` added to the law: seen at the end of a run, whose
wrap-up then never ended). A signal (``SIGALRM``) only reaches the main thread, and a daemon
thread that the caller stops waiting for keeps burning a core. So :func:`call_within` sets a
trace function (``sys.settrace``) on the calling thread that raises :class:`DeadlineExceeded`
at the first Python function call after the deadline: the work itself stops, in whichever
thread it runs. The price is one trace call per Python call, about 2.4 times the work's time
(measured on recovery checks of 1-80 ms); meant for a few calls per run, not hot loops. Work
that stays inside one C call is not cut short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar, cast

__all__ = ["DeadlineExceeded", "call_within"]

T = TypeVar("T")


class DeadlineExceeded(BaseException):
    """Raised inside the work at its deadline; a BaseException, so that the work's own
    ``except Exception`` clauses do not swallow it."""


def call_within(seconds: float, fn: Callable[..., T], /, *args: Any,
                **kwargs: Any) -> tuple[bool, T | None]:
    """``(True, fn(*args, **kwargs))``, or ``(False, None)`` when it was stopped after
    ``seconds``. Exceptions of ``fn`` propagate; a trace function already set (a debugger,
    coverage) keeps being called and is restored afterwards."""
    previous = cast("Callable[[FrameType, str, Any], Any] | None", sys.gettrace())
    end = time.monotonic() + max(float(seconds), 0.0)

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > end:
            raise DeadlineExceeded
        return previous(frame, event, arg) if previous is not None else None

    sys.settrace(trace)
    try:
        return True, fn(*args, **kwargs)
    except DeadlineExceeded:
        return False, None
    finally:
        sys.settrace(previous)
