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
next call or return, and the exception is raised again until it leaves the work. It is not
raised inside a finalizer (a ``__del__``, anything the garbage collector runs) or inside
``sys.unraisablehook``: there it could only be printed, once per finalizer (seen under pytest,
whose hook then failed the test).

The price is one trace call per Python call before the deadline, about twice the work's time
(measured on sympy's ``simplify``); meant for a few calls per run, not hot loops. Work that
stays inside one C call is not cut short.
"""

from __future__ import annotations

import gc
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
    collecting = False
    here = sys._getframe()

    # First at a collection's start and last at its stop, so that the flag also covers the
    # collector callbacks of other libraries (Python functions that run before and after).
    def collection_starts(phase: str, info: dict[str, int]) -> None:
        nonlocal collecting
        if phase == "start":
            collecting = True

    def collection_stops(phase: str, info: dict[str, int]) -> None:
        nonlocal collecting
        if phase == "stop":
            collecting = False

    def in_finalizer(frame: FrameType) -> bool:
        if collecting:
            return True
        spared = {getattr(f, "__code__", None) for f in (sys.unraisablehook, *gc.callbacks)}
        f: FrameType | None = frame
        while f is not None and f is not here:
            if f.f_code.co_name == "__del__" or f.f_code in spared:
                return True
            f = f.f_back
        return False

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > end and not in_finalizer(frame):
            sys.setprofile(rearm)  # only from here on: a profile call per event costs
            raise DeadlineExceeded
        return previous_trace(frame, event, arg) if previous_trace is not None else None

    def rearm(frame: FrameType, event: str, arg: Any) -> None:
        if sys.gettrace() is not trace:
            sys.settrace(trace)
        if previous_profile is not None:
            previous_profile(frame, event, arg)

    gc.callbacks.insert(0, collection_starts)
    gc.callbacks.append(collection_stops)
    sys.settrace(trace)
    try:
        return True, fn(*args, **kwargs)
    except DeadlineExceeded:
        return False, None
    finally:
        sys.setprofile(previous_profile)  # first, or its return event would re-arm the trace
        sys.settrace(previous_trace)
        gc.callbacks.remove(collection_starts)
        gc.callbacks.remove(collection_stops)
