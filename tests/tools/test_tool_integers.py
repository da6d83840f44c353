"""Whole floats for ``integer`` parameters: turned into ints at bind, or refused there.

JSON Schema says ``5.0`` is an integer; Python code such as ``range(n)`` disagrees. The tool
must receive ``5``, and a float that cannot be turned exactly must be the model's error
(``invalid_tool_call``), never a ``TypeError`` in ``execute`` that retries and circuit
breakers would count as a malfunction.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sr_dist.tools import (
    BaseTool,
    CircuitBreakingTool,
    FunctionTool,
    RetryingTool,
    ToolCall,
    ToolError,
    ToolMetadata,
    ToolRegistry,
)
from sr_dist.tools.validation import (
    MAX_EXACT_INTEGER,
    argument_errors,
    check_arguments,
    compile_parameters,
)


class Countdown(BaseTool):
    """``range(n)`` raises ``TypeError`` for a float, so a float reaching it would be a malfunction."""

    metadata = ToolMetadata(name="countdown", idempotent=True)

    def __init__(self, context: Any = None) -> None:
        super().__init__(context)
        self.seen: list[Any] = []

    def execute(self, n: int, steps: list[int] | None = None) -> dict[str, Any]:
        self.seen.append(n)
        return {"items": list(range(n)), "steps": [list(range(s)) for s in steps or []]}


def test_bind_turns_a_whole_float_into_an_int() -> None:
    catalog = ToolRegistry([Countdown()]).open_catalog()
    bound = catalog.bind(ToolCall("countdown", {"n": 3.0, "steps": [1.0, 2]}))
    assert bound.arguments == {"n": 3, "steps": [1, 2]}
    assert type(bound.arguments["n"]) is int and type(bound.arguments["steps"][0]) is int
    result = bound.invoke()
    assert result.ok, result.result_str
    assert result.result == {"items": [0, 1, 2], "steps": [[0], [0, 1]]}


def test_direct_and_async_calls_coerce_too() -> None:
    tool = Countdown()
    assert tool(n=2.0).ok
    assert asyncio.run(tool.acall(n=4.0)).result["items"] == [0, 1, 2, 3]
    assert [type(n) for n in tool.seen] == [int, int]


def test_function_tools_with_explicit_schemas_coerce() -> None:
    schema = {"type": "object", "properties": {"k": {"type": "integer", "minimum": 1}}, "required": ["k"]}
    tool = FunctionTool(name="top_k", description="", input_schema=schema, fn=lambda k: {"rows": list(range(k))})
    result = ToolRegistry([tool]).open_catalog().invoke(ToolCall("top_k", {"k": 2.0}))
    assert result.ok and result.result == {"rows": [0, 1]}


def test_refs_unions_and_nullable_integers_are_followed() -> None:
    schema = {
        "type": "object",
        "$defs": {"count": {"type": "integer"}},
        "properties": {
            "a": {"$ref": "#/$defs/count"},
            "b": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "c": {"type": ["integer", "null"]},
            "d": {"type": "number"},
            "e": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
    }
    checked = check_arguments(compile_parameters(schema), {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": {"x": 5.0}})
    assert checked.ok, checked.reasons
    assert checked.arguments == {"a": 1, "b": 2, "c": 3, "d": 4.0, "e": {"x": 5}}
    assert [type(checked.arguments[k]) for k in "abcd"] == [int, int, int, float]
    assert type(checked.arguments["e"]["x"]) is int
    assert sorted(checked.coerced) == ["a", "b", "c", "e.x"]


def test_a_float_that_is_not_exact_is_refused_at_bind_as_the_models_error() -> None:
    tool = Countdown()
    catalog = ToolRegistry([tool]).open_catalog()
    too_big = float(MAX_EXACT_INTEGER * 4)
    with pytest.raises(ToolError) as info:
        catalog.bind(ToolCall("countdown", {"n": too_big}))
    assert "argument 'n'" in str(info.value) and "exact integer" in str(info.value)
    for result in (catalog.invoke(ToolCall("countdown", {"n": too_big})), tool(n=too_big)):
        assert not result.ok
        assert result.error_kind == "invalid_tool_call"
        assert result.meta_data["model_visible"] is True
        assert "without a decimal point" in result.result_str
    assert tool.seen == []  # execute never ran


def test_fractional_floats_keep_the_usual_reason() -> None:
    validator = compile_parameters({"type": "object", "properties": {"n": {"type": "integer"}}})
    assert argument_errors(validator, {"n": 2.5}) == ["argument 'n': 2.5 is not of type 'integer'"]
    assert argument_errors(validator, {"n": 2.0}) == []
    assert argument_errors(validator, {"n": True}) == ["argument 'n': True is not of type 'integer'"]


def test_the_circuit_breaker_and_retries_do_not_count_integer_floats() -> None:
    inner = Countdown()
    breaker = CircuitBreakingTool(RetryingTool(inner, max_attempts=3), failure_threshold=1)
    catalog = ToolRegistry([breaker]).open_catalog()
    for _ in range(3):
        coerced = breaker(n=2.0)  # direct: the inner tool's own bind coerces
        assert coerced.ok and coerced.meta_data["attempts"] == 1
        refused = catalog.invoke(ToolCall("countdown", {"n": float(MAX_EXACT_INTEGER * 2)}))
        assert refused.error_kind == "invalid_tool_call"
        assert breaker(n=float(MAX_EXACT_INTEGER * 2)).error_kind == "invalid_tool_call"
    assert breaker.phase == "closed" and breaker.state.failures == 0
    assert asyncio.run(catalog.ainvoke(ToolCall("countdown", {"n": 1.0}))).ok
    assert breaker.phase == "closed"
