"""``call_within``: pure-Python work stopped at its deadline, in the main thread and in others."""

from __future__ import annotations

import gc
import sys
import threading
import time
import weakref
from typing import Any

import pytest

from sr_dist.formula import call_within


def _step(k: int) -> int:
    return k + 1


def _spin(calls: int) -> int:
    """Pure-Python work that makes a function call per step (as sympy's rewrites do)."""
    k = 0
    while k < calls:
        k = _step(k)
    return k


def test_work_that_finishes_returns_its_value() -> None:
    assert call_within(10.0, _spin, 1000) == (True, 1000)
    assert call_within(10.0, lambda a, *, b: a + b, 2, b=3) == (True, 5)


def test_work_past_its_deadline_is_stopped_in_the_main_thread() -> None:
    start = time.monotonic()
    assert call_within(0.2, _spin, 10**12) == (False, None)
    assert time.monotonic() - start < 20  # stopped, not run to its end (hours)


def test_work_past_its_deadline_is_stopped_in_another_thread() -> None:
    """A signal would not reach this thread; the work must still stop, not burn a core."""
    seen: list[tuple[bool, Any]] = []
    worker = threading.Thread(target=lambda: seen.append(call_within(0.2, _spin, 10**12)))
    worker.start()
    worker.join(60)
    assert not worker.is_alive()
    assert seen == [(False, None)]


def _spin_for(seconds: float) -> str:
    """Pure-Python work that ends by itself after ``seconds`` (so a failing test fails, not hangs)."""
    end = time.monotonic() + seconds
    k = 0
    while time.monotonic() < end:
        k = _step(k)
    return "ran to its end"


def _swallowed_by_bare_except() -> str:
    try:
        time.sleep(0.3)  # the deadline passes inside this C call
        _step(0)  # the first Python call past it: raised here...
    except BaseException:  # noqa: BLE001 - ...and swallowed, as some library code does
        pass
    return _spin_for(5.0)


class _SlowToDie:
    def __del__(self) -> None:
        time.sleep(0.3)
        _step(0)  # raised inside __del__, where Python only reports it


def _swallowed_by_del() -> str:
    _SlowToDie()
    return _spin_for(5.0)


@pytest.mark.parametrize("work", [_swallowed_by_bare_except, _swallowed_by_del])
def test_work_that_swallows_the_first_raise_is_still_stopped(
        work: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython drops a trace function whose raise is swallowed; the work must still stop."""
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # C: not traced
    before = (sys.gettrace(), sys.getprofile())
    assert call_within(0.1, work) == (False, None)
    assert (sys.gettrace(), sys.getprofile()) == before


class _Cycle:
    """Garbage only the collector frees: it runs the ``__del__`` and the weakref callback."""

    def __init__(self, callbacks: list[weakref.ref[Any]]) -> None:
        self.me = self
        callbacks.append(weakref.ref(self, lambda _: _step(0)))

    def __del__(self) -> None:
        _step(0)


def _collects_garbage_past_its_deadline() -> str:
    callbacks: list[weakref.ref[Any]] = []
    for _ in range(5):
        _Cycle(callbacks)
    time.sleep(0.3)
    gc.collect()  # finalizers run here, past the deadline: none may get the exception
    return _spin_for(5.0)


def test_finalizers_past_the_deadline_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception raised in a finalizer can only be printed (pytest's hook then fails the
    test that ran it); the work itself must still stop. Another library's collector callbacks
    (Python functions, as some register) are finalizer business too."""
    printed: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    seen: list[str] = []

    def other_library(phase: str, info: dict[str, int]) -> None:
        seen.append(phase)

    gc.callbacks.append(other_library)  # the collector's own list: only mutated, not replaced
    try:
        assert call_within(0.1, _collects_garbage_past_its_deadline) == (False, None)
    finally:
        gc.callbacks.remove(other_library)
    assert printed == []
    assert seen[:2] == ["start", "stop"]


def test_errors_of_the_work_propagate_and_the_trace_is_restored() -> None:
    def fail() -> None:
        raise ValueError("bad formula")

    before = sys.gettrace()
    with pytest.raises(ValueError, match="bad formula"):
        call_within(10.0, fail)
    assert sys.gettrace() is before
    call_within(0.0, _spin, 10**12)
    assert sys.gettrace() is before


@pytest.mark.parametrize(("get", "put", "per_call"), [
    (sys.gettrace, sys.settrace, ["call"]),
    (sys.getprofile, sys.setprofile, ["call", "return"]),
], ids=["trace", "profile"])
def test_a_hook_already_set_keeps_seeing_calls_and_is_restored(
        get: Any, put: Any, per_call: list[str]) -> None:
    """A debugger's, coverage's or profiler's hook must survive a deadline call, stopped or not."""
    events: list[str] = []
    before = get()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if frame.f_code is _step.__code__:
            events.append(event)

    put(hook)
    try:
        assert call_within(10.0, _spin, 3) == (True, 3)
        assert get() is hook
        assert call_within(0.1, _swallowed_by_bare_except) == (False, None)
        assert get() is hook
    finally:
        put(before)
    assert events[: 3 * len(per_call)] == per_call * 3
