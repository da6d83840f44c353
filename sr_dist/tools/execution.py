"""Running one tool call under the contract, sync or async, whatever kind of callable it is.

The rules live here once, for every tool kind: check the run's cancellation event before and
after; validate arguments; bound the call by ``timeout_s``; turn exceptions into ``ok=False``
results with a readable reason while ``ToolRunAbort`` (and asyncio cancellation) propagate.

Timeouts: an ``async`` callable is cancelled at its deadline. A sync callable with a timeout runs
in a daemon worker thread and the caller stops waiting at the deadline; Python cannot kill a
thread, so it may keep running in the background until it returns (its result is discarded and
the tool's ``cancel()`` hook is called so it can stop early).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # jsonschema ships no type stubs

from sr_dist.tools.contexts import context_value
from sr_dist.tools.formatting import format_result_dict
from sr_dist.tools.metadata import Tool, ToolMetadata
from sr_dist.tools.outcomes import exception_reason, failure_result, value_result
from sr_dist.tools.types import ErrorKind, ToolCallResult, ToolRunAbort
from sr_dist.tools.validation import check_arguments, output_errors

__all__ = [
    "CallPlan",
    "run_sync",
    "run_async",
    "run_coroutine_blocking",
    "call_in_thread",
    "await_in_thread",
    "DeadlineExceeded",
    "call_tool_sync",
    "call_tool_async",
    "is_cancel_requested",
    "cancel_event_of",
]

T = TypeVar("T")
_TRACEBACK_CHARS = 4000

#: Arguments a catalog has just checked against a schema (``call_tool_*`` with
#: ``checked_schema``): (schema, arguments). The first runner check in the call consumes it and
#: does not validate again when the tool's own schema and the arguments are those.
_CHECKED: contextvars.ContextVar[tuple[Mapping[str, Any], Mapping[str, Any]] | None] = (
    contextvars.ContextVar("sr_dist_checked_arguments", default=None))


class DeadlineExceeded(Exception):
    """Our own deadline passed (as opposed to a ``TimeoutError`` the tool raised itself)."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"deadline of {timeout_s:g}s exceeded")
        self.timeout_s = timeout_s


def is_cancel_requested(event: Any) -> bool:
    """True when ``event`` (a ``threading.Event``, ``asyncio.Event`` or anything with ``is_set``) is set."""
    if event is None:
        return False
    is_set = getattr(event, "is_set", None)
    return bool(is_set()) if callable(is_set) else False


def cancel_event_of(tool: Any) -> Any:
    """The ``cancel_event`` in a tool's context (a mapping or a typed context), if it has one."""
    return context_value(getattr(tool, "context", None), "cancel_event")


@dataclass(frozen=True)
class CallPlan:
    """Everything the runner needs about one tool, prepared once when the tool is built."""

    metadata: ToolMetadata
    input_validator: Draft202012Validator | None = None
    output_validator: Draft202012Validator | None = None
    signature: inspect.Signature | None = None
    formatter: Callable[[Any], str] = format_result_dict
    #: The tool's context: a mapping or a typed object; only ``cancel_event`` is read here.
    context: object = field(default_factory=dict)
    on_cancel: Callable[[], None] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def max_chars(self) -> int:
        return self.metadata.max_result_chars


# --- threads and event loops -----------------------------------------------------------------


def _start_daemon(body: Callable[[], T], name: str) -> concurrent.futures.Future[T]:
    """Run ``body`` in a fresh daemon thread (never blocks interpreter exit if it hangs)."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    future.set_running_or_notify_cancel()

    def target() -> None:
        try:
            value = body()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller, re-raised there
            future.set_exception(exc)
        else:
            future.set_result(value)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


def call_in_thread(body: Callable[[], T], timeout_s: float | None, name: str = "sr-dist-tool") -> T:
    """``body()`` in a daemon thread; ``DeadlineExceeded`` if it has not returned by ``timeout_s``."""
    future = _start_daemon(body, name)
    done, _ = concurrent.futures.wait([future], timeout=timeout_s)
    if not done:
        raise DeadlineExceeded(timeout_s or 0.0)
    return future.result()


def run_coroutine_blocking(awaitable: Awaitable[T]) -> T:
    """Drive ``awaitable`` to completion from sync code, with or without a loop in this thread.

    With no running loop, ``asyncio.run`` is used here; inside a running loop (sync code called
    from async code) it runs on a private loop in a worker thread, and this thread blocks.
    """

    async def main() -> T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    return call_in_thread(lambda: asyncio.run(main()), None, "sr-dist-tool-loop")


async def await_in_thread(body: Callable[[], T], name: str = "sr-dist-tool") -> T:
    """Await a blocking ``body()`` run in a daemon thread, keeping the event loop free.

    Not ``asyncio.to_thread``: a thread that outlives its timeout would hold the loop's default
    executor and make ``asyncio.run`` wait for it at shutdown.
    """
    return await asyncio.wrap_future(_start_daemon(body, name))


async def _within(awaitable: Awaitable[T], timeout_s: float | None) -> T:
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            return await awaitable
    except TimeoutError:
        if deadline.expired():
            raise DeadlineExceeded(timeout_s or 0.0) from None
        raise


def _resolve(value: Any) -> Any:
    """A sync callable may still hand back an awaitable (a lambda around an async function)."""
    return run_coroutine_blocking(value) if inspect.isawaitable(value) else value


def _is_async(target: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(target):
        return True
    # A callable object whose __call__ is ``async def`` (checked on the type, as Python calls it).
    return not inspect.isroutine(target) and inspect.iscoroutinefunction(getattr(type(target), "__call__", None))  # noqa: B004


def _contract_broken(tool: Tool, start: float, exc: Exception | None = None, got: Any = None) -> ToolCallResult:
    metadata = tool.metadata
    if exc is not None:
        reason = f"tool {metadata.name!r} failed: {exception_reason(exc)}"
        extra: dict[str, Any] = {"exception": type(exc).__name__}
    else:
        reason = f"tool {metadata.name!r} broke the tool contract: it returned {type(got).__name__}, not ToolCallResult"
        extra = {}
    return failure_result(
        metadata.name, ErrorKind.TOOL_ERROR, reason, elapsed_s=_elapsed(start), max_chars=metadata.max_result_chars, **extra
    )


def call_tool_sync(tool: Tool, arguments: Mapping[str, Any],
                   checked_schema: Mapping[str, Any] | None = None) -> ToolCallResult:
    """Call any tool synchronously (its ``__call__`` when it has one, else its ``acall``).

    A tool that breaks the contract (raises, or returns something else) is contained as a
    ``tool_error`` result; ``ToolRunAbort`` still propagates. ``checked_schema``: the schema
    the caller has already validated ``arguments`` against (a catalog's bind); a tool whose
    own input schema it is does not validate them again.
    """
    start = time.perf_counter()
    token = _CHECKED.set((checked_schema, arguments)) if checked_schema is not None else None
    try:
        if callable(tool):
            result = tool(**arguments)
        else:
            result = run_coroutine_blocking(tool.acall(**arguments))
    except ToolRunAbort:
        raise
    except Exception as exc:  # noqa: BLE001 - contain a foreign tool's bug
        return _contract_broken(tool, start, exc=exc)
    finally:
        if token is not None:
            _CHECKED.reset(token)
    return result if isinstance(result, ToolCallResult) else _contract_broken(tool, start, got=result)


async def call_tool_async(tool: Tool, arguments: Mapping[str, Any],
                          checked_schema: Mapping[str, Any] | None = None) -> ToolCallResult:
    """Await any tool's ``acall``, containing contract breaks like :func:`call_tool_sync`
    (``checked_schema`` as there)."""
    start = time.perf_counter()
    token = _CHECKED.set((checked_schema, arguments)) if checked_schema is not None else None
    try:
        result = await tool.acall(**arguments)
    except ToolRunAbort:
        raise
    except Exception as exc:  # noqa: BLE001 - contain a foreign tool's bug
        return _contract_broken(tool, start, exc=exc)
    finally:
        if token is not None:
            _CHECKED.reset(token)
    return result if isinstance(result, ToolCallResult) else _contract_broken(tool, start, got=result)


# --- the contract ----------------------------------------------------------------------------


def _elapsed(start: float) -> float:
    return time.perf_counter() - start


def _cancelled(plan: CallPlan, start: float, when: str) -> ToolCallResult:
    return failure_result(
        plan.name,
        ErrorKind.CANCELLED,
        f"tool {plan.name!r} was cancelled {when}: the run is stopping",
        elapsed_s=_elapsed(start),
        max_chars=plan.max_chars,
    )


def _already_checked(validator: Draft202012Validator, arguments: Mapping[str, Any]) -> bool:
    """Whether the caller (a catalog) has just validated these very arguments against this
    schema (see :data:`_CHECKED`); consumed, so a tool the tool calls validates its own."""
    flagged = _CHECKED.get()
    if flagged is None:
        return False
    _CHECKED.set(None)
    schema, checked = flagged
    return bool(validator.schema == schema and checked == arguments)


def _precheck(
    plan: CallPlan, arguments: Mapping[str, Any], start: float
) -> tuple[ToolCallResult | None, dict[str, Any]]:
    """Refuse before running (cancelled run, arguments that cannot be bound), or hand back the
    arguments as they will be passed (whole floats the schema wants as integers are ints)."""
    if is_cancel_requested(context_value(plan.context, "cancel_event")):
        return _cancelled(plan, start, "before it ran"), {}
    reasons: list[str] = []
    bound = dict(arguments)
    if plan.input_validator is not None and not _already_checked(plan.input_validator, arguments):
        checked = check_arguments(plan.input_validator, arguments)
        reasons, bound = list(checked.reasons), dict(checked.arguments)
    if not reasons and plan.signature is not None:
        try:
            plan.signature.bind(**bound)
        except TypeError as exc:
            reasons = [str(exc)]
    if reasons:
        refusal = failure_result(
            plan.name,
            ErrorKind.INVALID_TOOL_CALL,
            f"invalid call to {plan.name!r}: " + "; ".join(reasons),
            elapsed_s=_elapsed(start),
            max_chars=plan.max_chars,
            model_visible=True,
        )
        return refusal, {}
    return None, bound


def _timed_out(plan: CallPlan, start: float, timeout_s: float) -> ToolCallResult:
    if plan.on_cancel is not None:
        try:
            plan.on_cancel()
        except Exception:  # noqa: BLE001 - a failing cancel hook must not mask the timeout
            pass
    return failure_result(
        plan.name,
        ErrorKind.TIMEOUT,
        f"tool {plan.name!r} timed out after {timeout_s:g}s and was abandoned; "
        "try a smaller request or a different approach",
        elapsed_s=_elapsed(start),
        max_chars=plan.max_chars,
    )


def _raised(plan: CallPlan, exc: Exception, start: float) -> ToolCallResult:
    trace = "".join(traceback.format_exception(exc))
    return failure_result(
        plan.name,
        ErrorKind.TOOL_ERROR,
        f"tool {plan.name!r} failed: {exception_reason(exc)}",
        elapsed_s=_elapsed(start),
        max_chars=plan.max_chars,
        exception=type(exc).__name__,
        traceback=trace[-_TRACEBACK_CHARS:],
    )


def _finish(plan: CallPlan, value: Any, start: float) -> ToolCallResult:
    """After ``execute``: honour a cancellation, check the output schema, format the text."""
    if is_cancel_requested(context_value(plan.context, "cancel_event")):
        return _cancelled(plan, start, "while it ran; its result was discarded")
    if plan.output_validator is not None and not (isinstance(value, Mapping) and value.get("success") is False):
        problems = output_errors(plan.output_validator, value)
        if problems:
            return failure_result(
                plan.name,
                ErrorKind.TOOL_ERROR,
                f"tool {plan.name!r} returned output that breaks its declared schema: " + "; ".join(problems),
                elapsed_s=_elapsed(start),
                max_chars=plan.max_chars,
                result=value,
                output_invalid=True,
            )
    try:
        return value_result(
            plan.name,
            value,
            elapsed_s=_elapsed(start),
            max_chars=plan.max_chars,
            formatter=plan.formatter,
            evaluated=plan.metadata.evaluated,
        )
    except Exception as exc:  # noqa: BLE001 - a broken custom formatter is the tool's failure
        return _raised(plan, exc, start)


def run_sync(target: Callable[..., Any], arguments: Mapping[str, Any], plan: CallPlan) -> ToolCallResult:
    """Call ``target(**arguments)`` from sync code and return its ``ToolCallResult``."""
    start = time.perf_counter()
    early, kwargs = _precheck(plan, arguments, start)
    if early is not None:
        return early
    timeout_s = plan.metadata.timeout_s
    try:
        if _is_async(target):
            value = run_coroutine_blocking(_within(target(**kwargs), timeout_s))
        elif timeout_s is None:
            value = _resolve(target(**kwargs))
        else:
            value = call_in_thread(lambda: _resolve(target(**kwargs)), timeout_s, f"sr-dist-tool-{plan.name}")
    except ToolRunAbort:
        raise
    except DeadlineExceeded as exc:
        return _timed_out(plan, start, exc.timeout_s)
    except Exception as exc:  # noqa: BLE001 - the contract: ordinary exceptions become results
        return _raised(plan, exc, start)
    return _finish(plan, value, start)


async def run_async(target: Callable[..., Any], arguments: Mapping[str, Any], plan: CallPlan) -> ToolCallResult:
    """Await ``target(**arguments)`` (a sync target runs in a worker thread) and return its result."""
    start = time.perf_counter()
    early, kwargs = _precheck(plan, arguments, start)
    if early is not None:
        return early
    timeout_s = plan.metadata.timeout_s
    try:
        if _is_async(target):
            value = await _within(target(**kwargs), timeout_s)
        else:
            work = await_in_thread(lambda: _resolve(target(**kwargs)), f"sr-dist-tool-{plan.name}")
            value = await _within(work, timeout_s)
    except ToolRunAbort:
        raise
    except asyncio.CancelledError:
        if plan.on_cancel is not None:
            plan.on_cancel()
        raise
    except DeadlineExceeded as exc:
        return _timed_out(plan, start, exc.timeout_s)
    except Exception as exc:  # noqa: BLE001 - the contract: ordinary exceptions become results
        return _raised(plan, exc, start)
    return _finish(plan, value, start)
