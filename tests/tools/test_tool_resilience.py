"""RetryingTool and CircuitBreakingTool around real tools (failures are scripted per call)."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

from sr_dist.tools import (
    BaseTool,
    CircuitBreakingTool,
    FunctionTool,
    RetryingTool,
    ToolCall,
    ToolCallResult,
    ToolMetadata,
    ToolRegistry,
    ToolRunAbort,
)
from sr_dist.tools.resilience import backoff_delay

SAFETY_S = 10.0


class Scripted(BaseTool):
    """Plays one scripted behaviour per call: 'ok', 'raise', 'hang', 'envelope', 'abort'."""

    metadata = ToolMetadata(name="scripted", idempotent=True)

    def __init__(self, script: list[str], context: Any = None) -> None:
        super().__init__(context)
        self.script = list(script)
        self.calls = 0
        self.release = threading.Event()
        self.cancel_calls = 0

    def execute(self, x: int = 1) -> dict[str, Any]:
        step = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if step == "raise":
            raise ConnectionError(f"flaky backend on call {self.calls}")
        if step == "hang":
            self.release.wait(SAFETY_S)
            return {"late": True}
        if step == "envelope":
            return {"success": False, "reason": "x must be positive"}
        if step == "abort":
            raise ToolRunAbort("done")
        if step == "cancel":
            self.context["cancel_event"].set()
            raise ConnectionError("failing while the run stops")
        return {"value": x, "call": self.calls}

    def cancel(self) -> None:
        self.cancel_calls += 1


def _sync(tool: Any, **kw: Any) -> ToolCallResult:
    return tool(**kw)


def _async(tool: Any, **kw: Any) -> ToolCallResult:
    return asyncio.run(tool.acall(**kw))


MODES: dict[str, Callable[..., ToolCallResult]] = {"sync": _sync, "async": _async}


def _retrying(inner: Any, **kw: Any) -> RetryingTool:
    return RetryingTool(inner, backoff_s=0.001, rng=random.Random(0), **kw)


def test_retrying_requires_an_idempotent_tool() -> None:
    plain = FunctionTool(name="side_effect", description="", input_schema={"type": "object"}, fn=lambda: {})
    with pytest.raises(ValueError, match="idempotent"):
        RetryingTool(plain, max_attempts=2)
    assert RetryingTool(plain, max_attempts=1)().meta_data["attempts"] == 1


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"attempt_timeout_s": 0}, {"backoff_s": -1}])
def test_retrying_validates_its_policy(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryingTool(Scripted(["ok"]), **kwargs)


@pytest.mark.parametrize("mode", list(MODES))
def test_retries_exceptions_until_success(mode: str) -> None:
    inner = Scripted(["raise", "raise", "ok"])
    result = MODES[mode](_retrying(inner), x=7)
    assert result.ok and result.result == {"value": 7, "call": 3}
    assert result.meta_data["attempts"] == 3 and inner.calls == 3


@pytest.mark.parametrize("mode", list(MODES))
def test_gives_up_after_max_attempts(mode: str) -> None:
    inner = Scripted(["raise"])
    result = MODES[mode](_retrying(inner, max_attempts=4))
    assert not result.ok and result.meta_data["error_kind"] == "tool_error"
    assert "flaky backend on call 4" in result.result_str
    assert result.meta_data["attempts"] == 4 and inner.calls == 4


@pytest.mark.parametrize("mode", list(MODES))
def test_retries_attempt_timeouts(mode: str) -> None:
    inner = Scripted(["hang", "ok"])
    try:
        # generous: the second attempt must finish inside it even on a loaded machine
        result = MODES[mode](_retrying(inner, attempt_timeout_s=0.3))
    finally:
        inner.release.set()
    assert result.ok and result.meta_data["attempts"] == 2
    assert inner.cancel_calls >= 1  # the abandoned attempt was told to stop


@pytest.mark.parametrize("mode", list(MODES))
def test_all_attempts_timing_out_reports_timeout(mode: str) -> None:
    inner = Scripted(["hang"])
    try:
        result = MODES[mode](_retrying(inner, max_attempts=2, attempt_timeout_s=0.05))
    finally:
        inner.release.set()
    assert not result.ok and result.meta_data["error_kind"] == "timeout"
    assert result.meta_data["attempts"] == 2


@pytest.mark.parametrize("mode", list(MODES))
def test_model_visible_failure_is_returned_as_is(mode: str) -> None:
    inner = Scripted(["envelope", "ok"])
    result = MODES[mode](_retrying(inner))
    assert not result.ok and result.meta_data["model_visible"] is True
    assert result.result_str == "x must be positive"
    assert result.meta_data["attempts"] == 1 and inner.calls == 1


@pytest.mark.parametrize("mode", list(MODES))
def test_invalid_call_is_not_retried(mode: str) -> None:
    inner = Scripted(["ok"])
    result = MODES[mode](_retrying(inner), x="one")
    assert result.meta_data["error_kind"] == "invalid_tool_call"
    assert result.meta_data["attempts"] == 1 and inner.calls == 0


@pytest.mark.parametrize("mode", list(MODES))
def test_tool_run_abort_is_not_retried(mode: str) -> None:
    inner = Scripted(["abort", "ok"])
    with pytest.raises(ToolRunAbort):
        MODES[mode](_retrying(inner))
    assert inner.calls == 1


@pytest.mark.parametrize("event_type", [threading.Event, asyncio.Event])
@pytest.mark.parametrize("mode", list(MODES))
def test_cancellation_stops_retrying(mode: str, event_type: type) -> None:
    event = event_type()
    inner = Scripted(["cancel", "ok"], context={"cancel_event": event})
    result = MODES[mode](_retrying(inner, max_attempts=5))
    assert not result.ok and result.meta_data["error_kind"] == "cancelled"
    assert inner.calls == 1
    assert result.meta_data["attempts"] == 1


def test_task_cancellation_propagates_through_retrying() -> None:
    inner = Scripted(["hang"])
    tool = _retrying(inner)

    async def main() -> None:
        task = asyncio.create_task(tool.acall())
        while inner.calls == 0:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
    finally:
        inner.release.set()
    assert inner.calls == 1


def test_backoff_grows_exponentially_with_bounded_jitter() -> None:
    rng = random.Random(42)
    for attempt in range(1, 8):
        base = min(5.0, 0.1 * 2 ** (attempt - 1))
        delays = [backoff_delay(attempt, 0.1, rng, cap_s=5.0) for _ in range(50)]
        assert all(0.5 * base <= d < 1.5 * base for d in delays)
        assert len(set(delays)) > 1  # jittered, not constant
    with pytest.raises(ValueError):
        backoff_delay(0, 0.1, rng)


class FakeClock:
    """A time source the test moves by hand (the breaker's recovery is about elapsed time)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("mode", list(MODES))
def test_circuit_opens_after_consecutive_failures_and_stops_calling(mode: str) -> None:
    inner = Scripted(["raise"])
    clock = FakeClock()
    breaker = CircuitBreakingTool(inner, failure_threshold=3, recovery_s=30.0, clock=clock)
    for _ in range(3):
        assert MODES[mode](breaker).meta_data["error_kind"] == "tool_error"
    assert breaker.phase == "open" and inner.calls == 3
    refused = MODES[mode](breaker)
    assert not refused.ok and refused.meta_data["error_kind"] == "circuit_open"
    assert "temporarily unavailable" in refused.result_str
    assert inner.calls == 3  # the tool was not called


@pytest.mark.parametrize("mode", list(MODES))
def test_half_open_probe_success_closes_the_circuit(mode: str) -> None:
    inner = Scripted(["raise", "raise", "ok"])
    clock = FakeClock()
    breaker = CircuitBreakingTool(inner, failure_threshold=2, recovery_s=30.0, clock=clock)
    MODES[mode](breaker)
    MODES[mode](breaker)
    clock.now += 29.0
    assert MODES[mode](breaker).meta_data["error_kind"] == "circuit_open"
    clock.now += 1.0
    assert breaker.phase == "half_open"
    probe = MODES[mode](breaker)
    assert probe.ok and probe.meta_data["circuit"] == "closed"
    assert breaker.phase == "closed" and inner.calls == 3


@pytest.mark.parametrize("mode", list(MODES))
def test_half_open_probe_failure_reopens_the_circuit(mode: str) -> None:
    inner = Scripted(["raise", "raise", "ok"])
    clock = FakeClock()
    breaker = CircuitBreakingTool(inner, failure_threshold=1, recovery_s=10.0, clock=clock)
    MODES[mode](breaker)
    clock.now += 10.0
    probe = MODES[mode](breaker)
    assert probe.meta_data["error_kind"] == "tool_error" and probe.meta_data["circuit"] == "open"
    clock.now += 5.0
    assert MODES[mode](breaker).meta_data["error_kind"] == "circuit_open"
    clock.now += 5.0
    assert MODES[mode](breaker).ok
    assert inner.calls == 3


def test_model_visible_failures_do_not_open_the_circuit() -> None:
    inner = Scripted(["envelope"])
    breaker = CircuitBreakingTool(inner, failure_threshold=2, clock=FakeClock())
    for _ in range(5):
        assert breaker().meta_data["model_visible"] is True
    assert breaker.phase == "closed" and inner.calls == 5


def test_a_success_resets_the_failure_count() -> None:
    inner = Scripted(["raise", "ok", "raise", "ok"])
    breaker = CircuitBreakingTool(inner, failure_threshold=2, clock=FakeClock())
    for _ in range(4):
        breaker()
    assert breaker.phase == "closed" and breaker.state.failures == 0


def test_only_one_probe_runs_while_half_open() -> None:
    inner = Scripted(["raise", "hang"])
    clock = FakeClock()
    breaker = CircuitBreakingTool(inner, failure_threshold=1, recovery_s=1.0, clock=clock)
    breaker()
    clock.now += 1.0
    probe_result: list[ToolCallResult] = []
    probe = threading.Thread(target=lambda: probe_result.append(breaker()))
    probe.start()
    try:
        while inner.calls < 2:
            threading.Event().wait(0.001)
        second = breaker()  # arrives while the probe is still running
        assert second.meta_data["error_kind"] == "circuit_open"
    finally:
        inner.release.set()
        probe.join()
    assert probe_result[0].ok and breaker.phase == "closed"
    assert inner.calls == 2


def test_tool_run_abort_through_the_breaker_does_not_count() -> None:
    inner = Scripted(["abort"])
    breaker = CircuitBreakingTool(inner, failure_threshold=1, clock=FakeClock())
    with pytest.raises(ToolRunAbort):
        breaker()
    assert breaker.phase == "closed"


def test_wrappers_compose_and_register_under_the_inner_name() -> None:
    inner = Scripted(["raise", "raise", "raise", "raise", "raise", "raise", "ok"])
    clock = FakeClock()
    tool = CircuitBreakingTool(_retrying(inner, max_attempts=3), failure_threshold=2, recovery_s=5.0, clock=clock)
    catalog = ToolRegistry([tool]).open_catalog()
    call = ToolCall("scripted", {"x": 2}, id="c9")
    first = catalog.invoke(call)
    assert first.meta_data["attempts"] == 3 and first.meta_data["error_kind"] == "tool_error"
    assert first.meta_data["call_id"] == "c9"
    catalog.invoke(call)
    assert catalog.invoke(call).meta_data["error_kind"] == "circuit_open"
    assert inner.calls == 6
    clock.now += 5.0
    recovered = asyncio.run(catalog.ainvoke(call))
    assert recovered.ok and recovered.meta_data["attempts"] == 1 and recovered.meta_data["circuit"] == "closed"


def test_circuit_validates_its_policy() -> None:
    with pytest.raises(ValueError):
        CircuitBreakingTool(Scripted(["ok"]), failure_threshold=0)
    with pytest.raises(ValueError):
        CircuitBreakingTool(Scripted(["ok"]), recovery_s=-1)
    with pytest.raises(TypeError):
        CircuitBreakingTool(object())  # type: ignore[arg-type]
