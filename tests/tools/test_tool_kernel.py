"""jharness's kernel names on sr-dist's tool layer (sr_dist.tools.kernel)."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
from typing import Any

import pytest

from sr_dist.tools import (
    CircuitBreakingTool,
    FunctionTool,
    RetryingTool,
    ToolCatalog,
    ToolError,
    ToolRegistry,
    function_tool,
)
from sr_dist.tools import ToolCall as SrToolCall
from sr_dist.tools.kernel import (
    ContentPart,
    SettledResult,
    ToolCall,
    ToolContext,
    ToolExecution,
    ToolFailure,
    ToolResult,
    ToolSuccess,
    is_kernel_function,
    settled_value,
)

TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string"}},
    "additionalProperties": False,
}


def make_uppercase() -> FunctionTool:
    @function_tool(
        name="uppercase",
        description="Convert text to uppercase.",
        input_schema=TEXT_SCHEMA,
        output_schema=TEXT_SCHEMA,
        execution=ToolExecution(idempotent=True),
    )
    async def uppercase(call: ToolCall, context: ToolContext) -> ToolResult:
        text = str(call.arguments["text"]).upper()
        return SettledResult(ToolSuccess((ContentPart.text_part(text),), structured_content={"text": text}))

    return uppercase


def test_kernel_tool_call_is_positional_jharness_style_and_an_sr_dist_call() -> None:
    call = ToolCall("call-1", "uppercase", {"text": "hello"})
    assert (call.id, call.name, dict(call.arguments)) == ("call-1", "uppercase", {"text": "hello"})
    assert isinstance(call, SrToolCall)
    assert dataclasses.replace(call, id="call-2").id == "call-2"
    assert pickle.loads(pickle.dumps(call)).arguments == {"text": "hello"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "other"  # type: ignore[misc]


def test_function_tool_adapts_a_call_context_function() -> None:
    tool = make_uppercase()
    assert tool.metadata.idempotent is True
    assert tool(text="abc").result == {"text": "ABC"}
    result = asyncio.run(tool.acall(text="abc"))
    assert result.ok and result.result_str == "text: ABC"


def test_open_catalog_is_awaitable_and_still_sync() -> None:
    registry = ToolRegistry((make_uppercase(),))
    assert isinstance(registry.open_catalog(), ToolCatalog)

    async def main() -> tuple[ToolCatalog, Any]:
        catalog = await registry.open_catalog()
        binding = catalog.bind(ToolCall("call-1", "uppercase", {"text": "hello"}))
        return catalog, binding

    catalog, binding = asyncio.run(main())
    assert isinstance(catalog, ToolCatalog)
    assert binding.spec.name == "uppercase"
    result = binding.invoke()
    assert result.result == {"text": "HELLO"} and result.meta_data["call_id"] == "call-1"
    with pytest.raises(ToolError, match="argument 'text'"):
        catalog.bind(ToolCall("call-2", "uppercase", {"text": 5}))


def test_output_schema_checks_structured_content() -> None:
    @function_tool(name="wrong", input_schema=TEXT_SCHEMA, output_schema=TEXT_SCHEMA)
    def wrong(call: ToolCall, context: ToolContext) -> ToolResult:
        return SettledResult(ToolSuccess(structured_content={"text": 1}))

    result = wrong(text="a")
    assert result.error_kind == "tool_error" and result.meta_data["output_invalid"] is True


def test_failures_text_and_bad_returns() -> None:
    @function_tool(name="refuse", input_schema=TEXT_SCHEMA)
    def refuse(call: ToolCall, context: ToolContext) -> ToolResult:
        return SettledResult(ToolFailure("not today"))

    @function_tool(name="words", input_schema=TEXT_SCHEMA)
    def words(call: ToolCall, context: ToolContext) -> ToolResult:
        return SettledResult(ToolSuccess(tuple(ContentPart.text_part(w) for w in call.arguments["text"].split())))

    @function_tool(name="broken", input_schema=TEXT_SCHEMA)
    def broken(call: ToolCall, context: ToolContext) -> Any:
        return {"text": "not a SettledResult"}

    failed = refuse(text="a")
    assert failed.error_kind == "tool_error" and failed.meta_data["model_visible"] and failed.result_str == "not today"
    assert words(text="a b").result_str == "a\nb"
    bad = broken(text="a")
    assert bad.error_kind == "tool_error" and "must return SettledResult" in bad.result_str


def test_the_context_mapping_reaches_the_tool() -> None:
    @function_tool(name="ctx", input_schema={"type": "object"})
    def ctx(call: ToolCall, context: ToolContext) -> ToolResult:
        return SettledResult(ToolSuccess(structured_content={"run": context.get("run"), "stop": context.cancel_requested}))

    assert ctx().result == {"run": None, "stop": False}
    assert ctx.with_context({"run": 7}).fn is ctx.fn
    assert ctx.with_context({"run": 7})().result == {"run": 7, "stop": False}


def test_detection_and_schema_rules() -> None:
    def keywords(text: str) -> dict[str, Any]:
        return {"text": text}

    def by_name(call: "ToolCall", context: "ToolContext") -> Any:  # noqa: UP037 - written annotations on purpose
        return None

    assert not is_kernel_function(keywords)
    assert is_kernel_function(by_name)
    assert keywords.__name__ and FunctionTool(name="kw", description="", input_schema=TEXT_SCHEMA, fn=keywords)(text="x").ok
    registry = ToolRegistry()
    with pytest.raises(ValueError, match="give input_schema"):
        registry.tool(by_name)
    with pytest.raises(TypeError, match="SettledResult"):
        settled_value({"text": "x"})


def test_execution_policy_merges_and_refuses_contradictions() -> None:
    assert function_tool(input_schema=TEXT_SCHEMA, execution=ToolExecution(timeout_seconds=2.0))(str.upper).metadata.timeout_s == 2.0
    with pytest.raises(ValueError, match="contradicts"):
        function_tool(input_schema=TEXT_SCHEMA, idempotent=True, execution=ToolExecution())(str.upper)
    with pytest.raises(ValueError, match="timeout_seconds must be a positive"):
        ToolExecution(timeout_seconds=0)


def test_resilience_wrappers_take_the_jharness_keywords() -> None:
    tool = make_uppercase()
    resilient = CircuitBreakingTool(RetryingTool(tool, max_attempts=3, attempt_timeout_seconds=2.0), failure_threshold=3)
    retrying = resilient.tool
    assert isinstance(retrying, RetryingTool) and retrying.attempt_timeout_s == 2.0
    assert resilient.failure_threshold == 3
    assert resilient(text="x").result == {"text": "X"}
    with pytest.raises(ValueError, match="give only one"):
        RetryingTool(tool, attempt_timeout_s=1.0, attempt_timeout_seconds=2.0)
