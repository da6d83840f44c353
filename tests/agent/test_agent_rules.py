"""The loop's pure rules: stop conditions, call grouping, compaction and history entries."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from sr_dist.agent.history_window import (
    COMPACTED,
    CompactionPolicy,
    TurnLog,
    conversation_chars,
    history_result,
    render_conversation,
    summarize_result,
)
from sr_dist.agent.loop import AgentLimits, Counters, call_groups, stop_after_turn, stop_before_turn
from sr_dist.tools import ToolCall, ToolCallResult

# --------------------------------------------------------------------------- stop rules

BEFORE_CASES: list[dict[str, Any]] = [
    {"id": "fresh run goes on", "limits": {}, "counters": {}, "elapsed": 0.0, "cancelled": False, "stop": None},
    {"id": "cancel wins", "limits": {"max_turns": 1}, "counters": {"turns": 1}, "elapsed": 0.0, "cancelled": True, "stop": "cancelled"},
    {"id": "deadline", "limits": {"deadline_s": 5.0}, "counters": {}, "elapsed": 5.0, "cancelled": False, "stop": "deadline"},
    {"id": "before deadline", "limits": {"deadline_s": 5.0}, "counters": {}, "elapsed": 4.9, "cancelled": False, "stop": None},
    {"id": "max turns", "limits": {"max_turns": 3}, "counters": {"turns": 3}, "elapsed": 0.0, "cancelled": False, "stop": "max_turns"},
    {"id": "unlimited turns", "limits": {"max_turns": None}, "counters": {"turns": 10**6}, "elapsed": 0.0, "cancelled": False, "stop": None},
    {"id": "max tool calls", "limits": {"max_tool_calls": 4}, "counters": {"tool_calls": 4}, "elapsed": 0.0, "cancelled": False, "stop": "max_tool_calls"},
    {"id": "max tokens", "limits": {"max_tokens": 100}, "counters": {"tokens": 100}, "elapsed": 0.0, "cancelled": False, "stop": "max_tokens"},
]

AFTER_CASES: list[dict[str, Any]] = [
    {"id": "nothing to stop for", "limits": {}, "counters": {}, "submitted": False, "stop": None},
    {"id": "submitted wins", "limits": {"target_nmse": 1.0}, "counters": {"best_nmse": 0.0}, "submitted": True, "stop": "submitted"},
    {"id": "target reached", "limits": {"target_nmse": 1e-6}, "counters": {"best_nmse": 1e-6}, "submitted": False, "stop": "target_nmse"},
    {"id": "target not reached", "limits": {"target_nmse": 1e-6}, "counters": {"best_nmse": 2e-6}, "submitted": False, "stop": None},
    {"id": "target but nothing fitted", "limits": {"target_nmse": 0.0}, "counters": {"best_nmse": math.inf}, "submitted": False, "stop": None},
    {"id": "failure budget", "limits": {"failure_budget": 2}, "counters": {"consecutive_failures": 2}, "submitted": False, "stop": "failure_budget"},
    {"id": "prose streak", "limits": {"max_prose_turns": 2}, "counters": {"prose_streak": 2}, "submitted": False, "stop": "no_tool_calls"},
    {"id": "tool calls spent", "limits": {"max_tool_calls": 2}, "counters": {"tool_calls": 3}, "submitted": False, "stop": "max_tool_calls"},
    {"id": "tokens spent", "limits": {"max_tokens": 10}, "counters": {"tokens": 11}, "submitted": False, "stop": "max_tokens"},
]


@pytest.mark.parametrize("case", BEFORE_CASES, ids=[c["id"] for c in BEFORE_CASES])
def test_stop_before_turn(case: dict[str, Any]) -> None:
    got = stop_before_turn(
        Counters(**case["counters"]), AgentLimits(**case["limits"]), elapsed_s=case["elapsed"], cancelled=case["cancelled"]
    )
    assert got == case["stop"]


@pytest.mark.parametrize("case", AFTER_CASES, ids=[c["id"] for c in AFTER_CASES])
def test_stop_after_turn(case: dict[str, Any]) -> None:
    got = stop_after_turn(Counters(**case["counters"]), AgentLimits(**case["limits"]), submitted=case["submitted"])
    assert got == case["stop"]


@pytest.mark.parametrize(
    ("flags", "groups"),
    [
        ([], []),
        ([False], [[0]]),
        ([True, True, False, True], [[0, 1], [2], [3]]),
        ([False, False], [[0], [1]]),
        ([True, False, True, True, True], [[0], [1], [2, 3, 4]]),
    ],
)
def test_call_groups(flags: list[bool], groups: list[list[int]]) -> None:
    assert call_groups(flags) == groups


@pytest.mark.parametrize(
    "bad",
    [{"max_turns": 0}, {"max_tool_calls": -1}, {"failure_budget": True}, {"deadline_s": 0}, {"target_nmse": -1.0}, {"max_prose_turns": 0}],
)
def test_limits_refuse_nonsense(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        AgentLimits(**bad)


def test_limits_from_a_mapping_name_unknown_keys() -> None:
    assert AgentLimits.from_mapping({"max_turns": 7}).max_turns == 7
    with pytest.raises(ValueError, match="max_turn"):
        AgentLimits.from_mapping({"max_turn": 7})


# --------------------------------------------------------------------------- compaction


def evaluate_turn(n: int, size: int = 40) -> TurnLog:
    args = json.dumps({"expressions": [f"c*x**{i}" for i in range(size)]})
    assistant = {
        "role": "assistant",
        "content": "reasoning " * 60,
        "tool_calls": [{"id": f"t{n}", "type": "function", "function": {"name": "evaluate_formulas", "arguments": args}}],
    }
    tool = {"role": "tool", "tool_call_id": f"t{n}", "content": "result line\n" * 80}
    return TurnLog((assistant, tool), (None, f"{COMPACTED} summary {n}"))


HEAD = [{"role": "user", "content": "Find the formula."}]


def test_recent_turns_stay_verbatim_and_older_ones_are_summarised() -> None:
    turns = [evaluate_turn(n) for n in range(4)]
    policy = CompactionPolicy(keep_turns=2, max_context_chars=100_000)
    messages, dropped = render_conversation(HEAD, turns, policy)
    assert dropped == 0 and messages[0] == HEAD[0]
    assert messages[2]["content"] == f"{COMPACTED} summary 0" and messages[4]["content"] == f"{COMPACTED} summary 1"
    assert messages[1]["content"].endswith("chars)") and len(messages[1]["content"]) < 450
    stub = json.loads(messages[1]["tool_calls"][0]["function"]["arguments"])
    assert stub == {"expressions": [f"{COMPACTED} 40 formulas, see the result"]}
    assert messages[5:] == [dict(m) for t in turns[2:] for m in t.messages]
    assert turns[0].messages[0]["content"] == "reasoning " * 60  # inputs are not changed


def test_over_the_bound_old_turns_are_dropped_whole_and_noted() -> None:
    turns = [evaluate_turn(n) for n in range(10)]
    policy = CompactionPolicy(keep_turns=3, max_context_chars=3500)
    messages, dropped = render_conversation(HEAD, turns, policy, dropped_before=2)
    assert dropped > 0 and conversation_chars(messages) <= policy.max_context_chars
    assert messages[0] == HEAD[0]
    assert f"{2 + dropped} earlier turn(s) were removed" in messages[1]["content"]
    ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert ids == [f"t{n}" for n in range(dropped, 10)]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ids
    assert messages[-1] == turns[-1].messages[-1]  # the last turn is verbatim


def test_the_last_turn_is_never_dropped_even_when_it_alone_overflows() -> None:
    huge = TurnLog(({"role": "assistant", "content": "x" * 5000}, {"role": "user", "content": "y" * 5000}), (None, "s"))
    messages, dropped = render_conversation(HEAD, [evaluate_turn(0), huge], CompactionPolicy(keep_turns=2, max_context_chars=1000))
    assert dropped == 1 and messages[-2:] == list(huge.messages)


def test_summaries_name_the_outcome() -> None:
    ok = ToolCallResult(
        True,
        {
            "results": [
                {"expression": "c*x", "status": "ok", "val_nmse": 0.0012},
                {"expression": "x+", "status": "invalid", "val_nmse": None},
            ],
            "best": {"expression": "c*x", "val_nmse": 0.0012},
        },
        "text",
        {"tool": "evaluate_formulas"},
    )
    assert summarize_result(ToolCall("evaluate_formulas"), ok) == (
        "evaluate_formulas: 2 results (1 ok, 1 invalid), best val_nmse 0.0012 `c*x`"
    )
    failed = ToolCallResult(False, {"success": False}, "the evaluator could not fit\nthe batch", {"error_kind": "tool_error"})
    assert summarize_result(ToolCall("evaluate_formulas"), failed) == (
        "evaluate_formulas failed (tool_error): the evaluator could not fit the batch"
    )


def test_history_keeps_the_result_and_only_stable_metadata() -> None:
    result = ToolCallResult(
        False, {"success": False, "reason": "r"}, "r" * 5000, {"tool": "t", "elapsed_s": 0.3, "traceback": "...", "error_kind": "tool_error"}
    )
    kept = history_result(result, CompactionPolicy(history_result_chars=100))
    assert kept.result == result.result and len(kept.result_str) == 101
    assert dict(kept.meta_data) == {"tool": "t", "error_kind": "tool_error"}


class _Prose:
    """A model that only ever writes prose (no tool call)."""

    name = "prose"
    tool_mode = "json"

    def call(self, context: Any, tools: Any = None) -> Any:
        from sr_dist.models import ModelResponse

        return ModelResponse(text="thinking")

    async def acall(self, context: Any, tools: Any = None) -> Any:
        return self.call(context, tools)


@pytest.mark.parametrize("how", ["episode", "tool_context mapping"])
def test_the_loop_honours_the_cancel_event_it_is_given(how: str) -> None:
    import threading

    from sr_dist.agent import Agent, Context, NoEpisode
    from sr_dist.parsers import get_parser
    from sr_dist.tools import ToolRegistry

    event = threading.Event()
    event.set()
    wiring: dict[str, Any] = (
        {"episode": NoEpisode(cancel_event=event)} if how == "episode" else {"tool_context": {"cancel_event": event}}
    )
    agent = Agent(_Prose(), get_parser("json"), ToolRegistry().open_catalog(), Context(), **wiring)
    result = agent.run()
    assert result.stop_reason == "cancelled" and result.turns == 0
    running = Agent(_Prose(), get_parser("json"), ToolRegistry().open_catalog(), Context(),
                    AgentLimits(max_turns=2, max_prose_turns=5))
    assert running.run().stop_reason == "max_turns"
