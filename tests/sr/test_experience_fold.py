"""The tool-experience fold, its summary, its table and the description hook (fast, no Ray).

The fold is a pure function over an episode's call log; these tests build the log from real
``ToolCall``/``ToolCallResult`` values (and one from a real agent loop against the loopback chat server), fold it, write it
to a real ``experience`` table, read it back with DuckDB, and append the summary to a real
catalog's descriptions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from sr_dist.agent import Agent, AgentLimits
from sr_dist.conversation import Context
from sr_dist.models import build_model
from sr_dist.parsers import get_parser
from sr_dist.results.experience import EXPERIENCE_SCHEMA, read_experience, write_experience
from sr_dist.tools import ToolCall, ToolRegistry
from sr_dist.tools.experience import (
    LESSON_CHARS,
    MAX_FAILED_LESSONS,
    MAX_HELPED_LESSONS,
    CallRecord,
    ToolExperience,
    call_record,
    fold_experience,
    summarize_experience,
)
from sr_dist.tools.outcomes import failure_result, success_result
from tests.support.chat_server import ScriptedChatServer, chat_completion, tool_call


def ok(tool: str, value: Any) -> Any:
    return success_result(tool, value, elapsed_s=0.0, max_chars=2000)


def failed(tool: str, kind: str, text: str) -> Any:
    return failure_result(tool, kind, text, elapsed_s=0.0, max_chars=2000, model_visible=True)


def test_the_fold_counts_calls_failures_and_keeps_short_lessons() -> None:
    log = [
        call_record(ToolCall("evaluate_formulas", {"formulas": ["x0"]}),
                    failed("evaluate_formulas", "invalid_tool_call", "invalid call: 'expressions' is required\nmore")),
        call_record(ToolCall("evaluate_formulas", {"expressions": ["a*x0", "x0 +"]}),
                    ok("evaluate_formulas", {"results": [{"expression": "a*x0", "status": "ok"},
                                                         {"expression": "x0 +", "status": "invalid",
                                                          "error": "unexpected end of formula"}]}),
                    improved=True),
        call_record(ToolCall("data_summary", {}), ok("data_summary", {"rows": []})),
        call_record(ToolCall("evaluate_formulas", {"expressions": ["b"]}),
                    failed("evaluate_formulas", "cancelled", "the run was cancelled")),
    ]
    evaluate, summary = fold_experience(log)
    assert (evaluate.tool, evaluate.calls, evaluate.failures, evaluate.improved) == ("evaluate_formulas", 2, 1, 1)
    assert evaluate.failure_kinds == {"invalid_tool_call": 1}  # a cancelled call teaches nothing
    assert evaluate.lessons == (
        'failed: {"formulas": ["x0"]} -> invalid_tool_call: invalid call: \'expressions\' is required',
        "failed: x0 + was invalid: unexpected end of formula",
        'helped: {"expressions": ["a*x0", "x0 +"]}',
    )
    assert (summary.tool, summary.calls, summary.failures, summary.lessons) == ("data_summary", 1, 0, ())


def test_the_fold_is_bounded_whatever_the_episode() -> None:
    long = "y" * 5000
    log = [CallRecord("t", json.dumps({"e": f"{i}{long}"}), ok=False, error_kind="tool_error", error=long)
           for i in range(200)]
    log += [CallRecord("t", f"arg {i}", ok=True, improved=True) for i in range(50)]
    [record] = fold_experience(log)
    assert record.calls == 250 and record.failures == 200 and record.improved == 50
    assert len(record.lessons) == MAX_FAILED_LESSONS + MAX_HELPED_LESSONS
    assert all(len(lesson) <= LESSON_CHARS for lesson in record.lessons)


def test_the_summary_merges_episodes_ranks_repeated_lessons_and_stays_short() -> None:
    mistake = "failed: {} -> invalid_tool_call: 'expressions' is required"
    records = [ToolExperience("evaluate_formulas", calls=4, failures=1, improved=1,
                              failure_kinds={"invalid_tool_call": 1},
                              lessons=(mistake, "helped: a*x0")),
               ToolExperience("evaluate_formulas", calls=2, failures=1, failure_kinds={"invalid_tool_call": 1},
                              lessons=("failed: something else", mistake)),
               ToolExperience("never_called", calls=0)]
    notes = summarize_experience([records[0], records[1].row(), records[2]])
    assert set(notes) == {"evaluate_formulas"}
    note = notes["evaluate_formulas"]
    assert note.startswith("Experience of 2 earlier episode(s) with evaluate_formulas: 6 call(s), "
                           "2 failed (2 invalid_tool_call), 1 improved the best score.")
    assert note.splitlines()[1] == "- " + mistake  # seen twice: first
    assert "- helped: a*x0" in note
    many = [ToolExperience("t", calls=1, lessons=tuple(f"failed: {i} " + "z" * 150 for i in range(5)))
            for _ in range(30)]
    assert len(summarize_experience(many, limit=400)["t"]) <= 400


def test_experience_rows_round_trip_through_the_table(tmp_path: Path) -> None:
    records = fold_experience([CallRecord("evaluate_formulas", "{}", ok=False, error_kind="tool_error",
                                          error="boom")])
    write_experience(tmp_path, "run-1", [r.row() for r in records], dataset="d", model="m", agent_id=3)
    write_experience(tmp_path, "run-2", [ToolExperience("best_formulas", calls=2).row()], agent_id=0)
    assert write_experience(tmp_path, "run-3", []) is None
    rows = read_experience(tmp_path)
    assert [(r["run_id"], r["tool"]) for r in rows] == [("run-1", "evaluate_formulas"), ("run-2", "best_formulas")]
    assert ToolExperience.from_row(rows[0]) == records[0]
    con = duckdb.connect()
    got = con.sql(f"SELECT run_id, agent_id, tool, failures, failure_kinds, lessons FROM read_parquet("
                  f"'{tmp_path}/experience/*/*.parquet', hive_partitioning=true) ORDER BY run_id").fetchall()
    assert got[0] == ("run-1", 3, "evaluate_formulas", 1, '{"tool_error": 1}',
                      ["failed: {} -> tool_error: boom"])
    assert [f.name for f in EXPERIENCE_SCHEMA][0] == "run_id"


def test_notes_extend_descriptions_in_native_schemas_and_prompt_text() -> None:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> dict[str, Any]:
        """Say it back."""
        return {"echo": text}

    plain = registry.open_catalog()
    noted = plain.with_notes({"echo": "Experience: send text, not a number.", "absent": "ignored"})
    assert plain.specs()[0].description == "Say it back."
    assert noted.specs()[0].description == "Say it back.\n\nExperience: send text, not a number."
    assert noted.openai_tools()[0]["function"]["description"].endswith("not a number.")
    assert "send text, not a number" in get_parser("json").format_tools(noted.specs())
    assert noted.invoke(ToolCall("echo", {"text": "hi"})).result == {"echo": "hi"}


def test_the_agent_loop_logs_every_call_for_the_fold() -> None:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> dict[str, Any]:
        """Say it back."""
        return {"echo": text}

    script = [chat_completion(tool_calls=[tool_call("echo", {"text": "hi"}, id="a")]),
              chat_completion(tool_calls=[tool_call("echo", {"txt": "typo"}, id="b")])]
    with ScriptedChatServer(script) as server:
        model = build_model({"provider": "openai", "base_url": server.base_url, "model": "test",
                             "api_key_env": None})
        agent = Agent(model, get_parser("openai"), registry.open_catalog(),
                      Context(system="s", messages=[{"role": "user", "content": "go"}]),
                      AgentLimits(max_turns=2))
        agent.run()
    log = agent.call_log
    assert [(r.tool, r.ok, r.error_kind) for r in log] == [("echo", True, None), ("echo", False, "invalid_tool_call")]
    [record] = fold_experience(log)
    assert record.calls == 2 and record.failures == 1
    assert record.lessons[0].startswith('failed: {"txt": "typo"} -> invalid_tool_call')


def test_lessons_of_another_dataset_do_not_reach_a_run_on_this_one(tmp_path: Path) -> None:
    # One results path, two datasets: a lesson quotes the formulas and variable names of its
    # own dataset (here the answer to the first), so a run on the second dataset learns the
    # counts and failure kinds of every run but the lessons of its own dataset's runs only.
    gaussian = ToolExperience("evaluate_formulas", calls=3, failures=1, improved=1,
                              failure_kinds={"invalid_tool_call": 1},
                              lessons=('failed: {"formulas": ["theta"]} -> invalid_tool_call: x',
                                       'helped: {"expressions": ["exp(-theta**2/2)/sqrt(2*pi)"]}'))
    other = ToolExperience("evaluate_formulas", calls=2, lessons=('helped: {"expressions": ["q1*q2/r**2"]}',))
    write_experience(tmp_path, "run-1", [gaussian.row()], dataset="feynman:I.6.2")
    write_experience(tmp_path, "run-2", [other.row()], dataset="feynman:I.12.2")
    rows = read_experience(tmp_path)
    note = summarize_experience(rows, dataset="feynman:I.12.2")["evaluate_formulas"]
    assert note.startswith("Experience of 2 earlier episode(s) with evaluate_formulas: 5 call(s), "
                           "1 failed (1 invalid_tool_call), 1 improved the best score.")
    assert "q1*q2/r**2" in note
    assert "theta" not in note
    # Without a dataset (a caller that shares everything) every lesson is merged, as before.
    assert "theta" in summarize_experience(rows)["evaluate_formulas"]
