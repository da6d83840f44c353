"""A hard deadline for pure-Python work such as sympy's ``simplify``, in any thread.

``sympy.simplify`` can run for minutes on a formula that fits exactly but carries a junk term
(``Int_0*exp(sin(cos(theta)) - 3367/6)`` added to the law: seen at the end of a run, whose
wrap-up then never ended). A signal (``SIGALRM``) only reaches the main thread, and a daemon
thread that the caller stops waiting for keeps burning a core. So :func:`call_within` sets a
trace function (``sys.settrace``) on the calling thread that raises :class:`DeadlineExceeded`
at the first Python function call after the deadline: the work itself stops, in whichever
thread it runs.

CPython removes a trace function that raises. When the work swallows the exception (a bare
``except:``, a ``__del__`` or a weakref callback, where Python only prints it), the trace is
gone and the work would run to its end. So at the deadline the trace also sets a profile
function (``sys.setprofile``), which never raises and so stays: it puts the trace back at the
next call or return, and the exception is raised again until it leaves the work.

The price is one trace call per Python call before the deadline, about twice the work's time
(measured on sympy's ``simplify``); meant for a few calls per run, not hot loops. Work that
stays inside one C call is not cut short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar, cast

__all__ = ["DeadlineExceeded", "call_within"]

T = TypeVar("T")

Hook = Callable[[FrameType, str, Any], Any]


class DeadlineExceeded(BaseException):
    """Raised inside the work at its deadline; a BaseException, so that the work's own
    ``except Exception`` clauses do not swallow it."""


def call_within(seconds: float, fn: Callable[..., T], /, *args: Any,
                **kwargs: Any) -> tuple[bool, T | None]:
    """``(True, fn(*args, **kwargs))``, or ``(False, None)`` when it was stopped after
    ``seconds``. Exceptions of ``fn`` propagate; a trace or profile function already set
    (a debugger, coverage, a profiler) keeps being called and is restored afterwards."""
    previous_trace = cast("Hook | None", sys.gettrace())
    previous_profile = cast("Hook | None", sys.getprofile())
    end = time.monotonic() + max(float(seconds), 0.0)

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > end:
            sys.setprofile(rearm)  # only from here on: a profile call per event costs
            raise DeadlineExceeded
        return previous_trace(frame, event, arg) if previous_trace is not None else None

    def rearm(frame: FrameType, event: str, arg: Any) -> None:
        if sys.gettrace() is not trace:
            sys.settrace(trace)
        if previous_profile is not None:
            previous_profile(frame, event, arg)

    sys.settrace(trace)
    try:
        return True, fn(*args, **kwargs)
    except DeadlineExceeded:
        return False, None
    finally:
        sys.setprofile(previous_profile)  # first, or its return event would re-arm the trace
        sys.settrace(previous_trace)
