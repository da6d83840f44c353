"""Thea's envelope rules, the ``evaluated`` flag and ``BuiltinTool(post_condition=...)``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from sr_dist.agent.history_window import history_result
from sr_dist.parsers import get_parser
from sr_dist.tools import (
    BaseTool,
    BuiltinTool,
    CircuitBreakingTool,
    RetryingTool,
    ToolCall,
    ToolCallResult,
    ToolMetadata,
    ToolRegistry,
    is_implementation_failure,
)
from sr_dist.tools.outcomes import protocol_violation

OBJECT: dict[str, Any] = {"type": "object", "properties": {"target": {"type": "string"}}, "additionalProperties": False}


def returning(value: Any, *, name: str = "probe", **options: Any) -> BuiltinTool:
    return BuiltinTool(name=name, description="Returns a fixed value.", input_schema=OBJECT, fn=lambda **_: value, **options)


@pytest.mark.parametrize(
    "value",
    [{"success": True}, {"success": True, "observation": None}],
    ids=["bare", "only-none"],
)
def test_a_success_without_a_value_field_is_a_protocol_violation(value: dict[str, Any]) -> None:
    result = returning(value)()
    assert not result.ok
    assert result.error_kind == "tool_protocol_violation"
    assert "at least one value field beyond 'success'" in result.result_str
    assert result.result == value  # kept whole for the recorder
    assert is_implementation_failure(result)


@pytest.mark.parametrize(
    "value",
    [{"success": False}, {"success": False, "reason": ""}, {"success": False, "reason": "  "}, {"success": False, "reason": {}}],
    ids=["missing", "empty", "blank", "empty-mapping"],
)
def test_a_failure_without_a_reason_is_a_protocol_violation(value: dict[str, Any]) -> None:
    result = returning(value)()
    assert not result.ok
    assert result.error_kind == "tool_protocol_violation"
    assert "non-empty 'reason'" in result.result_str
    assert result.envelope() == {"success": False, "reason": result.result_str}


def test_envelopes_that_keep_the_rules_are_unchanged() -> None:
    assert returning({"success": True, "observation": "the drawer opened"})().ok
    assert returning({"success": True, "run_id": "run-123"})().ok
    assert returning({"no_envelope": 1})().ok  # sr-dist's own dict results are not envelopes
    failed = returning({"success": False, "reason": "the target is not visible"})()
    assert failed.error_kind == "tool_error" and failed.meta_data["model_visible"] is True
    assert failed.result_str == "the target is not visible"
    assert not is_implementation_failure(failed)


def test_an_evaluated_tool_must_return_a_run_id() -> None:
    for value in ({"success": True, "observation": "moved"}, {"success": True, "run_id": ""}, {"x": 1}):
        result = returning(value, evaluated=True)()
        assert result.error_kind == "tool_protocol_violation", value
        assert "evaluated" in result.result_str and "'run_id'" in result.result_str
    assert returning({"success": True, "run_id": "run-1"}, evaluated=True)().ok
    failed = returning({"success": False, "reason": "blocked"}, evaluated=True)()
    assert failed.error_kind == "tool_error"  # a failure needs no run_id
    assert returning({"success": True, "run_id": "r"}, evaluated=True).metadata.evaluated


def test_base_tools_declared_evaluated_are_held_to_it() -> None:
    class Move(BaseTool):
        metadata = ToolMetadata(name="envelope_move", evaluated=True)

        def execute(self, target: str) -> dict[str, Any]:
            return {"success": True, "observation": f"moved to {target}"}

    result = Move()(target="door")
    assert result.error_kind == "tool_protocol_violation"
    with pytest.raises(ValueError, match="evaluated must be True or False"):
        ToolMetadata(name="bad_flag", evaluated="yes")  # type: ignore[arg-type]


def test_protocol_violations_count_as_malfunctions_for_the_wrappers() -> None:
    tool = returning({"success": True}, idempotent=True)
    breaker = CircuitBreakingTool(RetryingTool(tool, max_attempts=2, backoff_s=0.0), failure_threshold=1)
    result = breaker()
    assert result.error_kind == "tool_protocol_violation" and result.meta_data["attempts"] == 2
    assert breaker.phase == "open"


def test_protocol_violation_function() -> None:
    assert protocol_violation({"success": True, "observation": "x"}) is None
    assert protocol_violation({"success": False, "reason": ["a"]}) is None
    assert protocol_violation({"success": True, "run_id": 7}, evaluated=True) is None
    assert protocol_violation({"success": True, "run_id": True}, evaluated=True) is not None
    assert protocol_violation("plain text") is None
    assert protocol_violation("plain text", evaluated=True) is not None


# --- post-conditions ---------------------------------------------------------------------------


def notifier(post_condition: Any, value: Any = None) -> BuiltinTool:
    return BuiltinTool(
        name="notify_user",
        description="Send a one-way progress notification.",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string", "minLength": 1}},
            "required": ["message"],
            "additionalProperties": False,
        },
        fn=lambda message: value if value is not None else {"success": True, "observation": f"sent {message}"},
        post_condition=post_condition,
    )


def test_a_post_condition_verdict_is_recorded_and_hidden_from_the_model() -> None:
    seen: list[tuple[Mapping[str, Any], ToolCallResult]] = []

    def delivered(arguments: Mapping[str, Any], result: ToolCallResult) -> tuple[bool, str]:
        seen.append((arguments, result))
        return False, "inbox of SECRET-EVALUATOR is empty"

    tool = notifier(delivered)
    call = ToolCall("notify_user", {"message": "half way"}, id="c1")
    result = ToolRegistry([tool]).open_catalog().invoke(call)
    assert result.ok  # the verdict does not change the outcome
    assert result.meta_data["post_condition"] == {"ok": False, "detail": "inbox of SECRET-EVALUATOR is empty"}
    assert seen[0][0] == {"message": "half way"} and seen[0][1].ok
    assert "SECRET" not in result.result_str and "post" not in result.result_str
    assert "SECRET" not in str(result.envelope())
    for parser in ("openai", "json", "text"):
        messages = get_parser(parser).result_messages([call], [result])
        assert "SECRET" not in str(messages), parser
    kept = history_result(result)  # what the tool history (and so the results) keeps
    assert kept.meta_data["post_condition"]["ok"] is False


def test_a_raising_or_odd_post_condition_is_recorded_as_failed() -> None:
    def broken(arguments: Mapping[str, Any], result: ToolCallResult) -> bool:
        raise RuntimeError("evaluator offline")

    result = notifier(broken)(message="hi")
    assert result.ok
    verdict = result.meta_data["post_condition"]
    assert verdict["ok"] is False and "RuntimeError: evaluator offline" in verdict["detail"]
    odd = notifier(lambda arguments, result: "yes")(message="hi")
    assert odd.meta_data["post_condition"]["ok"] is False
    assert "expected True/False" in odd.meta_data["post_condition"]["detail"]


def test_post_conditions_run_async_and_on_failures_but_not_on_refused_calls() -> None:
    async def passes(arguments: Mapping[str, Any], result: ToolCallResult) -> bool:
        return True

    tool = notifier(passes)
    assert asyncio.run(tool.acall(message="hi")).meta_data["post_condition"] == {"ok": True, "detail": None}
    assert tool(message="hi").meta_data["post_condition"] == {"ok": True, "detail": None}  # awaited from sync
    failing = notifier(lambda arguments, result: not result.ok, {"success": False, "reason": "no network"})
    failed = failing(message="hi")
    assert failed.error_kind == "tool_error" and failed.meta_data["post_condition"]["ok"] is True
    refused = tool(message="")
    assert refused.error_kind == "invalid_tool_call" and "post_condition" not in refused.meta_data


def test_post_condition_survives_with_context_and_wrappers() -> None:
    tool = notifier(lambda arguments, result: True)
    copy = tool.with_context({"run": 1})
    assert copy.post_condition is tool.post_condition
    wrapped = CircuitBreakingTool(copy)
    assert wrapped(message="x").meta_data["post_condition"]["ok"] is True
    with pytest.raises(TypeError, match="post_condition must be callable"):
        notifier("not callable")
