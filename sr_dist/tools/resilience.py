"""Wrappers that make a flaky tool safe to use: ``RetryingTool`` and ``CircuitBreakingTool``.

Both wrap any object with the tool protocol and are tools themselves (same ``metadata``, so they
register under the wrapped tool's name). They react only to *implementation failures*
(exceptions, timeouts, broken output); a model-visible failure envelope is a normal answer and
passes through untouched. The decisions are pure functions (``backoff_delay``, ``admit``,
``settle``) so they are tested without sleeping; the classes are thin stateful shells.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from sr_dist.tools.execution import (
    DeadlineExceeded,
    call_in_thread,
    call_tool_async,
    call_tool_sync,
    cancel_event_of,
    is_cancel_requested,
)
from sr_dist.tools.metadata import Tool, ToolMetadata
from sr_dist.tools.outcomes import failure_result, is_implementation_failure, with_meta
from sr_dist.tools.types import ErrorKind, ToolCallResult, ToolSpec

__all__ = [
    "RetryingTool",
    "CircuitBreakingTool",
    "CircuitState",
    "backoff_delay",
    "admit",
    "settle",
    "circuit_phase",
    "Outcome",
]


# --- retries -----------------------------------------------------------------------------------


def backoff_delay(attempt: int, base_s: float, rng: random.Random, cap_s: float = 30.0) -> float:
    """Seconds to wait after failed ``attempt`` (1-based): ``base * 2**(attempt-1)``, capped,
    scaled by a jitter factor in [0.5, 1.5) so many agents retrying together spread out."""
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    return float(min(cap_s, base_s * 2.0 ** (attempt - 1)) * (0.5 + rng.random()))


def _forward_cancel(tool: Any) -> None:
    hook = getattr(tool, "cancel", None)
    if callable(hook):
        try:
            hook()
        except Exception:  # noqa: BLE001 - a broken hook must not hide the timeout
            pass


class _ToolWrapper:
    """What a decorator shares with the tool it wraps: name, schema, context, cancel hook."""

    _tool: Tool

    @property
    def tool(self) -> Tool:
        return self._tool

    @property
    def metadata(self) -> ToolMetadata:
        return self._tool.metadata

    @property
    def spec(self) -> ToolSpec:
        return self._tool.metadata.spec

    @property
    def context(self) -> object:
        """The wrapped tool's context as it is (a mapping or a typed context); ``{}`` if it has none."""
        ctx = getattr(self._tool, "context", None)
        return ctx if ctx is not None else {}

    def cancel(self) -> None:
        _forward_cancel(self._tool)


class RetryingTool(_ToolWrapper):
    """Retry an idempotent tool's implementation failures with exponential backoff and jitter.

    ``attempt_timeout_s`` bounds each attempt (a sync attempt runs in a worker thread);
    ``attempt_timeout_seconds`` is jharness's name for it. A failure envelope, an invalid call,
    a cancelled run or an open circuit is returned at once. ``meta_data["attempts"]`` says how
    many attempts ran.
    """

    def __init__(
        self,
        tool: Tool,
        max_attempts: int = 3,
        attempt_timeout_s: float | None = None,
        backoff_s: float = 0.1,
        *,
        max_backoff_s: float = 30.0,
        rng: random.Random | None = None,
        attempt_timeout_seconds: float | None = None,
    ) -> None:
        if attempt_timeout_seconds is not None:
            if attempt_timeout_s is not None and attempt_timeout_s != attempt_timeout_seconds:
                raise ValueError(
                    f"attempt_timeout_s={attempt_timeout_s!r} and attempt_timeout_seconds={attempt_timeout_seconds!r} "
                    "disagree; they are one setting, give only one"
                )
            attempt_timeout_s = attempt_timeout_seconds
        if not isinstance(tool, Tool):
            raise TypeError(f"RetryingTool wraps a tool (metadata + acall), got {tool!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        if max_attempts > 1 and not tool.metadata.idempotent:
            raise ValueError(
                f"tool {tool.metadata.name!r} is not declared idempotent; retrying it could repeat "
                "its side effects (declare idempotent=True or use max_attempts=1)"
            )
        if attempt_timeout_s is not None and not attempt_timeout_s > 0:
            raise ValueError(f"attempt_timeout_s must be > 0 or None, got {attempt_timeout_s!r}")
        if backoff_s < 0 or max_backoff_s < 0:
            raise ValueError("backoff_s and max_backoff_s must be >= 0")
        self._tool = tool
        self.max_attempts = max_attempts
        self.attempt_timeout_s = attempt_timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._rng = rng or random.Random()
        self._rng_lock = threading.Lock()


    def _delay(self, attempt: int) -> float:
        with self._rng_lock:
            return backoff_delay(attempt, self.backoff_s, self._rng, self.max_backoff_s)

    def _attempt_timed_out(self, start: float) -> ToolCallResult:
        _forward_cancel(self._tool)
        return failure_result(
            self.metadata.name,
            ErrorKind.TIMEOUT,
            f"tool {self.metadata.name!r} timed out after {self.attempt_timeout_s:g}s",
            elapsed_s=time.perf_counter() - start,
            max_chars=self.metadata.max_result_chars,
        )

    def _cancelled(self, attempts: int) -> ToolCallResult:
        return failure_result(
            self.metadata.name,
            ErrorKind.CANCELLED,
            f"tool {self.metadata.name!r} was cancelled between retries: the run is stopping",
            elapsed_s=0.0,
            max_chars=self.metadata.max_result_chars,
            attempts=attempts,
        )

    def _sync_attempt(self, arguments: Mapping[str, Any]) -> ToolCallResult:
        if self.attempt_timeout_s is None:
            return call_tool_sync(self._tool, arguments)
        start = time.perf_counter()
        try:
            return call_in_thread(
                lambda: call_tool_sync(self._tool, arguments),
                self.attempt_timeout_s,
                f"sr-dist-retry-{self.metadata.name}",
            )
        except DeadlineExceeded:
            return self._attempt_timed_out(start)

    async def _async_attempt(self, arguments: Mapping[str, Any]) -> ToolCallResult:
        start = time.perf_counter()
        deadline = asyncio.timeout(self.attempt_timeout_s)
        try:
            async with deadline:
                return await call_tool_async(self._tool, arguments)
        except TimeoutError:
            if deadline.expired():
                return self._attempt_timed_out(start)
            raise

    def __call__(self, /, **arguments: Any) -> ToolCallResult:
        event = cancel_event_of(self._tool)
        for attempt in range(1, self.max_attempts + 1):
            result = self._sync_attempt(arguments)
            if attempt == self.max_attempts or not is_implementation_failure(result):
                return with_meta(result, attempts=attempt)
            delay = self._delay(attempt)
            wait = getattr(event, "wait", None)
            if isinstance(event, threading.Event) and callable(wait):
                if event.wait(delay):
                    return self._cancelled(attempt)
            else:
                time.sleep(delay)
                if is_cancel_requested(event):
                    return self._cancelled(attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def acall(self, /, **arguments: Any) -> ToolCallResult:
        event = cancel_event_of(self._tool)
        for attempt in range(1, self.max_attempts + 1):
            result = await self._async_attempt(arguments)
            if attempt == self.max_attempts or not is_implementation_failure(result):
                return with_meta(result, attempts=attempt)
            await asyncio.sleep(self._delay(attempt))
            if is_cancel_requested(event):
                return self._cancelled(attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def __repr__(self) -> str:
        return f"RetryingTool({self._tool!r}, max_attempts={self.max_attempts})"


# --- circuit breaking ------------------------------------------------------------------------

#: How one admitted call ended, for the breaker: it worked, it failed, or it proved nothing
#: (cancelled, refused as an invalid call, ...).
Outcome = Literal["success", "failure", "inconclusive"]


@dataclass(frozen=True, slots=True)
class CircuitState:
    """``failures``: consecutive implementation failures; ``opened_at``: when the circuit
    opened (``None`` = closed); ``probing``: a half-open probe is in flight."""

    failures: int = 0
    opened_at: float | None = None
    probing: bool = False


def circuit_phase(state: CircuitState, now: float, recovery_s: float) -> Literal["closed", "open", "half_open"]:
    if state.opened_at is None:
        return "closed"
    if state.probing or now - state.opened_at >= recovery_s:
        return "half_open"
    return "open"


def admit(state: CircuitState, now: float, recovery_s: float) -> tuple[bool, bool, CircuitState]:
    """May a call run now? Returns ``(admitted, is_probe, new_state)``.

    Closed: yes. Open: no, until ``recovery_s`` has passed; then exactly one probe goes through
    and others are refused until it settles.
    """
    if state.opened_at is None:
        return True, False, state
    if not state.probing and now - state.opened_at >= recovery_s:
        return True, True, replace(state, probing=True)
    return False, False, state


def settle(state: CircuitState, outcome: Outcome, now: float, threshold: int, probe: bool) -> CircuitState:
    """The state after an admitted call ended with ``outcome``."""
    if probe:
        if outcome == "success":
            return CircuitState()
        if outcome == "failure":
            return CircuitState(failures=state.failures + 1, opened_at=now)
        return replace(state, probing=False)  # proved nothing: the next call may probe again
    if state.opened_at is not None:
        return state  # a call admitted before the circuit opened; only a probe may close it
    if outcome == "success":
        return CircuitState()
    if outcome == "failure":
        failures = state.failures + 1
        return CircuitState(failures=failures, opened_at=now if failures >= threshold else None)
    return state


def _outcome(result: ToolCallResult) -> Outcome:
    if result.ok or (result.meta_data.get("model_visible") and result.meta_data.get("error_kind") == ErrorKind.TOOL_ERROR):
        return "success"  # the tool answered; a failure envelope is a normal answer
    if is_implementation_failure(result):
        return "failure"
    return "inconclusive"


class CircuitBreakingTool(_ToolWrapper):
    """Stop calling a tool after ``failure_threshold`` consecutive implementation failures.

    While open, calls return ``ok=False, error_kind="circuit_open"`` at once. After
    ``recovery_s`` one probe runs (half-open): success closes the circuit, failure reopens it.
    The state lives in this wrapper only (not persisted). ``clock`` is injectable for tests.
    """

    def __init__(
        self,
        tool: Tool,
        failure_threshold: int = 3,
        recovery_s: float = 30.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(tool, Tool):
            raise TypeError(f"CircuitBreakingTool wraps a tool (metadata + acall), got {tool!r}")
        if isinstance(failure_threshold, bool) or not isinstance(failure_threshold, int) or failure_threshold < 1:
            raise ValueError(f"failure_threshold must be an int >= 1, got {failure_threshold!r}")
        if not recovery_s >= 0:
            raise ValueError(f"recovery_s must be >= 0, got {recovery_s!r}")
        self._tool = tool
        self.failure_threshold = failure_threshold
        self.recovery_s = float(recovery_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._state = CircuitState()


    @property
    def state(self) -> CircuitState:
        with self._lock:
            return self._state

    @property
    def phase(self) -> str:
        """``closed``, ``open`` or ``half_open`` (a probe is due or in flight)."""
        with self._lock:
            return circuit_phase(self._state, self._clock(), self.recovery_s)

    def _admit(self) -> tuple[bool, bool, ToolCallResult | None]:
        with self._lock:
            now = self._clock()
            admitted, probe, self._state = admit(self._state, now, self.recovery_s)
            if admitted:
                return True, probe, None
            opened_at = self._state.opened_at or now
            wait = max(0.0, opened_at + self.recovery_s - now)
            failures = self._state.failures
        name = self.metadata.name
        refusal = failure_result(
            name,
            ErrorKind.CIRCUIT_OPEN,
            f"tool {name!r} is temporarily unavailable after {failures} consecutive failures; "
            f"it will be tried again in about {wait:.0f}s. Use another tool or approach meanwhile.",
            elapsed_s=0.0,
            max_chars=self.metadata.max_result_chars,
            circuit="open",
            retry_in_s=wait,
        )
        return False, False, refusal

    def _settle(self, outcome: Outcome, probe: bool) -> str:
        with self._lock:
            now = self._clock()
            self._state = settle(self._state, outcome, now, self.failure_threshold, probe)
            return circuit_phase(self._state, now, self.recovery_s)

    def __call__(self, /, **arguments: Any) -> ToolCallResult:
        admitted, probe, refusal = self._admit()
        if not admitted:
            assert refusal is not None
            return refusal
        outcome: Outcome = "inconclusive"
        try:
            result = call_tool_sync(self._tool, arguments)
            outcome = _outcome(result)
        finally:
            phase = self._settle(outcome, probe)  # ToolRunAbort etc.: settle as inconclusive
        return with_meta(result, circuit=phase)

    async def acall(self, /, **arguments: Any) -> ToolCallResult:
        admitted, probe, refusal = self._admit()
        if not admitted:
            assert refusal is not None
            return refusal
        outcome: Outcome = "inconclusive"
        try:
            result = await call_tool_async(self._tool, arguments)
            outcome = _outcome(result)
        finally:
            phase = self._settle(outcome, probe)
        return with_meta(result, circuit=phase)

    def __repr__(self) -> str:
        return f"CircuitBreakingTool({self._tool!r}, failure_threshold={self.failure_threshold})"
