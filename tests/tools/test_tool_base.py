"""BaseTool: class registry, the call contract, timeouts, cancellation, envelopes, bounds."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sr_dist.tools import (
    BaseTool,
    ToolCall,
    ToolCallResult,
    ToolMetadata,
    ToolRunAbort,
)

SAFETY_S = 10.0  # blocked test tools give up after this, so a broken test cannot hang the suite


@BaseTool.register("bt_echo")
class Echo(BaseTool):
    def execute(self, text: str, times: int = 1) -> dict[str, Any]:
        """Repeat text.

        Args:
            text: What to repeat.
            times: How often.
        """
        return {"text": text * times, "seen_context": sorted(self.context)}


@BaseTool.register("bt_async_echo")
class AsyncEcho(BaseTool):
    async def execute(self, text: str) -> dict[str, Any]:
        """Repeat text, asynchronously."""
        await asyncio.sleep(0)
        return {"text": text}


def test_register_and_create_with_context() -> None:
    tool = BaseTool.create("bt_echo", context={"dataset": "feynman"})
    assert isinstance(tool, Echo)
    assert tool.context == {"dataset": "feynman"}
    result = tool(text="ab", times=2)
    assert result.ok
    assert result.result == {"text": "abab", "seen_context": ["dataset"]}
    assert tool.metadata.name == "bt_echo"
    assert tool.metadata.description == "Repeat text."
    assert "bt_echo" in BaseTool.known_tools()


def test_create_unknown_name_lists_known_names() -> None:
    with pytest.raises(ValueError) as info:
        BaseTool.create("no_such_tool")
    message = str(info.value)
    assert "no_such_tool" in message and "bt_echo" in message and "bt_async_echo" in message


def test_duplicate_class_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="already registered"):

        @BaseTool.register("bt_echo")
        class Other(BaseTool):
            def execute(self) -> dict[str, Any]:
                return {}


def test_register_checks_metadata_name() -> None:
    with pytest.raises(ValueError, match="metadata.name"):

        @BaseTool.register("bt_name_a")
        class Named(BaseTool):
            metadata = ToolMetadata(name="bt_name_b")

            def execute(self) -> dict[str, Any]:
                return {}


def test_tool_without_execute_is_rejected() -> None:
    with pytest.raises(TypeError, match="execute"):

        @BaseTool.register("bt_no_execute")
        class Empty(BaseTool):
            pass


def test_unregistered_class_needs_metadata() -> None:
    class Anonymous(BaseTool):
        def execute(self) -> dict[str, Any]:
            return {}

    with pytest.raises(ValueError, match="ToolMetadata"):
        Anonymous()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "has space"},
        {"name": ""},
        {"name": "ok", "timeout_s": 0},
        {"name": "ok", "timeout_s": -1.0},
        {"name": "ok", "max_result_chars": 10},
        {"name": "ok", "parameters": ["not", "a", "mapping"]},
    ],
)
def test_tool_metadata_validates(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ToolMetadata(**kwargs)


def test_values_are_frozen() -> None:
    call = ToolCall(name="bt_echo", arguments={"text": "a"})
    assert call.id is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "other"  # type: ignore[misc]
    result = BaseTool.create("bt_echo")(text="a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ok = False  # type: ignore[misc]
    meta = ToolMetadata(name="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.name = "y"  # type: ignore[misc]


# --- every way to call gives the same answer ---------------------------------------------


def _sync_call(tool: BaseTool, **kwargs: Any) -> ToolCallResult:
    return tool(**kwargs)


def _async_call(tool: BaseTool, **kwargs: Any) -> ToolCallResult:
    return asyncio.run(tool.acall(**kwargs))


def _sync_inside_loop(tool: BaseTool, **kwargs: Any) -> ToolCallResult:
    async def main() -> ToolCallResult:
        asyncio.get_running_loop()  # the sync call below runs with a loop in this thread
        return tool(**kwargs)

    return asyncio.run(main())


CALLERS: dict[str, Callable[..., ToolCallResult]] = {
    "sync": _sync_call,
    "async": _async_call,
    "sync_in_loop": _sync_inside_loop,
}


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize("name", ["bt_echo", "bt_async_echo"])
def test_def_and_async_def_execute_work_through_every_caller(caller: str, name: str) -> None:
    result = CALLERS[caller](BaseTool.create(name), text="hi")
    assert result.ok, result
    assert result.result["text"] == "hi"
    assert result.result_str.startswith("text: hi")
    assert result.meta_data["tool"] == name
    assert result.meta_data["truncated"] is False
    assert result.meta_data["elapsed_s"] >= 0.0
    assert "error_kind" not in result.meta_data


@BaseTool.register("bt_raises")
class Raises(BaseTool):
    def execute(self, message: str = "expression is empty") -> dict[str, Any]:
        raise ValueError(message)


@BaseTool.register("bt_async_raises")
class AsyncRaises(BaseTool):
    async def execute(self, message: str = "expression is empty") -> dict[str, Any]:
        raise ValueError(message)


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize("name", ["bt_raises", "bt_async_raises"])
def test_exceptions_become_readable_failures(caller: str, name: str) -> None:
    result = CALLERS[caller](BaseTool.create(name))
    assert not result.ok
    assert result.meta_data["error_kind"] == "tool_error"
    assert result.meta_data["model_visible"] is False
    assert result.meta_data["exception"] == "ValueError"
    assert "ValueError: expression is empty" in result.result_str
    assert result.envelope() == {"success": False, "reason": result.result_str}


def test_exception_without_message_still_has_a_reason() -> None:
    result = BaseTool.create("bt_raises")(message="")
    assert not result.ok and "ValueError" in result.result_str and result.result_str.strip()


@BaseTool.register("bt_aborts")
class Aborts(BaseTool):
    metadata = ToolMetadata(name="bt_aborts", timeout_s=SAFETY_S)

    def execute(self) -> dict[str, Any]:
        raise ToolRunAbort("final answer submitted")


@BaseTool.register("bt_async_aborts")
class AsyncAborts(BaseTool):
    async def execute(self) -> dict[str, Any]:
        raise ToolRunAbort("final answer submitted")


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize("name", ["bt_aborts", "bt_async_aborts"])
def test_tool_run_abort_propagates(caller: str, name: str) -> None:
    with pytest.raises(ToolRunAbort, match="final answer"):
        CALLERS[caller](BaseTool.create(name))


@pytest.mark.parametrize("caller", list(CALLERS))
def test_wrong_keyword_is_an_invalid_call_naming_the_argument(caller: str) -> None:
    result = CALLERS[caller](BaseTool.create("bt_echo"), txt="a")
    assert not result.ok
    assert result.meta_data["error_kind"] == "invalid_tool_call"
    assert "'txt'" in result.result_str and "'text'" in result.result_str


class _LooseSchema(BaseTool):
    """Declares a permissive schema; the signature is still checked before execute runs."""

    metadata = ToolMetadata(
        name="bt_loose",
        description="Loose.",
        parameters={"type": "object", "properties": {}, "additionalProperties": True},
    )
    ran = False

    def execute(self, needed: str) -> dict[str, Any]:
        type(self).ran = True
        return {"needed": needed}


def test_signature_is_checked_even_when_schema_is_loose() -> None:
    result = _LooseSchema()(other=1)
    assert not result.ok and result.meta_data["error_kind"] == "invalid_tool_call"
    assert "needed" in result.result_str or "other" in result.result_str
    assert _LooseSchema.ran is False


# --- timeouts -----------------------------------------------------------------------------


class _Blocking(BaseTool):
    """Blocks until released; records cancel() calls."""

    metadata = ToolMetadata(name="bt_blocking", timeout_s=0.05)

    def __init__(self, context: Any = None) -> None:
        super().__init__(context)
        self.release = threading.Event()
        self.cancelled = threading.Event()

    def execute(self) -> dict[str, Any]:
        self.release.wait(SAFETY_S)
        return {"finished": True}

    def cancel(self) -> None:
        self.cancelled.set()


class _AsyncBlocking(BaseTool):
    metadata = ToolMetadata(name="bt_async_blocking", timeout_s=0.05)

    def __init__(self, context: Any = None) -> None:
        super().__init__(context)
        self.was_cancelled = False

    async def execute(self) -> dict[str, Any]:
        try:
            await asyncio.sleep(SAFETY_S)
        except asyncio.CancelledError:
            self.was_cancelled = True
            raise
        return {"finished": True}


@pytest.fixture
def blocking() -> Iterator[_Blocking]:
    tool = _Blocking()
    yield tool
    tool.release.set()  # let the abandoned worker thread finish


@pytest.mark.parametrize("caller", list(CALLERS))
def test_sync_execute_times_out_and_calls_the_cancel_hook(caller: str, blocking: _Blocking) -> None:
    result = CALLERS[caller](blocking)
    assert not result.ok
    assert result.meta_data["error_kind"] == "timeout"
    assert "timed out after 0.05s" in result.result_str
    assert blocking.cancelled.is_set()


@pytest.mark.parametrize("caller", list(CALLERS))
def test_async_execute_is_cancelled_at_its_deadline(caller: str) -> None:
    tool = _AsyncBlocking()
    result = CALLERS[caller](tool)
    assert not result.ok and result.meta_data["error_kind"] == "timeout"
    assert tool.was_cancelled


class _RaisesTimeoutError(BaseTool):
    metadata = ToolMetadata(name="bt_inner_timeout", timeout_s=SAFETY_S)

    async def execute(self) -> dict[str, Any]:
        raise TimeoutError("socket read timed out")


def test_a_timeout_error_raised_by_the_tool_is_a_tool_error() -> None:
    result = _RaisesTimeoutError()()
    assert result.meta_data["error_kind"] == "tool_error"
    assert "socket read timed out" in result.result_str


# --- cancellation -------------------------------------------------------------------------


class _Counting(BaseTool):
    metadata = ToolMetadata(name="bt_counting")

    def __init__(self, context: Any = None, set_during: bool = False) -> None:
        super().__init__(context)
        self.runs = 0
        self.set_during = set_during

    def execute(self) -> dict[str, Any]:
        self.runs += 1
        if self.set_during:
            self.context["cancel_event"].set()
        return {"runs": self.runs}


@pytest.mark.parametrize("event_type", [threading.Event, asyncio.Event])
@pytest.mark.parametrize("caller", list(CALLERS))
def test_cancel_event_set_before_skips_execute(event_type: type, caller: str) -> None:
    event = event_type()
    event.set()
    tool = _Counting(context={"cancel_event": event})
    result = CALLERS[caller](tool)
    assert not result.ok and result.meta_data["error_kind"] == "cancelled"
    assert tool.runs == 0
    assert tool.cancel_requested


@pytest.mark.parametrize("caller", list(CALLERS))
def test_cancel_event_set_during_execute_discards_the_result(caller: str) -> None:
    tool = _Counting(context={"cancel_event": threading.Event()}, set_during=True)
    result = CALLERS[caller](tool)
    assert tool.runs == 1
    assert not result.ok and result.meta_data["error_kind"] == "cancelled"


def test_unset_cancel_event_lets_calls_run() -> None:
    tool = _Counting(context={"cancel_event": threading.Event()})
    assert tool().ok and tool.runs == 1


class _Unbounded(_Blocking):
    metadata = ToolMetadata(name="bt_unbounded")  # no timeout: only cancellation ends the wait

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()

    def execute(self) -> dict[str, Any]:
        self.started.set()
        return super().execute()


def test_task_cancellation_propagates_and_calls_the_hook() -> None:
    tool = _Unbounded()

    async def main() -> None:
        task = asyncio.create_task(tool.acall())
        while not tool.started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
    finally:
        tool.release.set()
    assert tool.cancelled.is_set()


# --- results ------------------------------------------------------------------------------


class _Envelope(BaseTool):
    metadata = ToolMetadata(name="bt_envelope")

    def execute(self, succeed: bool) -> dict[str, Any]:
        if succeed:
            return {"success": True, "run_id": "run-123"}
        return {"success": False, "reason": "the target is not visible", "hint": "look around first"}


def test_failure_envelope_is_a_model_visible_failure() -> None:
    result = _Envelope()(succeed=False)
    assert not result.ok
    assert result.meta_data["error_kind"] == "tool_error"
    assert result.meta_data["model_visible"] is True
    assert result.result == {"success": False, "reason": "the target is not visible", "hint": "look around first"}
    assert result.result_str.startswith("the target is not visible")
    assert "hint: look around first" in result.result_str
    assert result.envelope()["success"] is False
    assert result.envelope()["reason"].startswith("the target is not visible")


def test_success_envelope_is_a_success() -> None:
    result = _Envelope()(succeed=True)
    assert result.ok
    assert result.envelope() == {"success": True, "run_id": "run-123"}


def test_envelope_of_a_plain_success_and_of_an_empty_result() -> None:
    assert BaseTool.create("bt_echo")(text="a").envelope()["success"] is True
    assert ToolCallResult(ok=True, result={}, result_str="done").envelope() == {"success": True, "observation": "done"}
    assert ToolCallResult(ok=False, result=None, result_str="", meta_data={"error_kind": "timeout"}).envelope() == {
        "success": False,
        "reason": "timeout",
    }


class _Big(BaseTool):
    metadata = ToolMetadata(name="bt_big", max_result_chars=200)

    def execute(self, n: int) -> dict[str, Any]:
        return {"values": list(range(n)), "color": "\x1b[32mgreen\x1b[0m"}


def test_result_str_is_bounded_with_a_marker_and_result_is_whole() -> None:
    result = _Big()(n=5000)
    assert result.ok
    assert len(result.result_str) <= 200
    assert result.meta_data["truncated"] is True
    cut = result.meta_data["cut_chars"]
    assert result.result_str.endswith(f"[truncated {cut} chars]")
    assert len(result.result["values"]) == 5000


def test_small_result_is_not_truncated_and_ansi_is_stripped() -> None:
    result = _Big()(n=3)
    assert result.meta_data["truncated"] is False
    assert result.result_str == "values: [0, 1, 2]\ncolor: green"
    assert "\x1b" in result.result["color"]


class _CustomFormat(BaseTool):
    metadata = ToolMetadata(name="bt_custom_format")

    def execute(self) -> dict[str, Any]:
        return {"nmse": 0.5, "expression": "x"}

    def format_result(self, result: Any) -> str:
        return f"{result['expression']} has NMSE {result['nmse']}"


def test_format_result_can_be_overridden_without_changing_result() -> None:
    result = _CustomFormat()()
    assert result.result_str == "x has NMSE 0.5"
    assert result.result == {"nmse": 0.5, "expression": "x"}


class _Typed(BaseTool):
    metadata = ToolMetadata(
        name="bt_typed_output",
        output_schema={"type": "object", "properties": {"nmse": {"type": "number"}}, "required": ["nmse"]},
    )

    def execute(self, good: bool) -> dict[str, Any]:
        return {"nmse": 0.1} if good else {"nmse": "low"}


def test_output_schema_is_checked_after_the_call() -> None:
    tool = _Typed()
    assert tool(good=True).ok
    bad = tool(good=False)
    assert not bad.ok and bad.meta_data["error_kind"] == "tool_error"
    assert "field 'nmse'" in bad.result_str
    assert bad.meta_data["model_visible"] is False
