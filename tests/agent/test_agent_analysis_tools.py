"""Acceptance: an agent uses every analysis tool against a real chat-completions server on
127.0.0.1, in both ``native`` and ``json`` tool modes, and its candidates and tool calls land
in the Parquet results as any other run's do.

The agent, parser, tools and evaluator are the real ones; the recorder is the real
:class:`~sr_dist.search.recording.CandidateRecorder` writing through a real
:class:`~sr_dist.results.CandidateWriter`, in process (the rows and files are the ones a Ray
run's writer actor makes; only the actor hop is left out, so no cluster is needed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.models import build_model
from sr_dist.results import CandidateWriter
from sr_dist.results.query import duckdb_connection
from sr_dist.search.recording import CandidateRecorder
from sr_dist.sr import build_agent
from sr_dist.sr.analysis_tools import ANALYSIS_TOOLS
from sr_dist.sr.formula_tools import FORMULA_TOOLS
from tests.support.chat_server import ScriptedChatServer, chat_completion, tool_call

RUN = "run-analysis"
AGENT = 3

#: Every analysis tool with arguments for the shared problem y = 2.5*x0*x1.
ANALYSIS_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("data_statistics", {}),
    ("variable_relationships", {}),
    ("separability_test", {"groups": [["x0"], ["x1"]]}),
    ("dimensional_groups", {}),
    ("fit_polynomial", {"variables": ["x0", "x1"], "degree": 2}),
    ("fit_power_law", {"variables": ["x0", "x1"]}),
    ("fit_rational", {"numerator_degree": 2, "denominator_degree": 1}),
    ("residual_analysis", {"expression": "a*x0 + b"}),
]
#: What each tool's answer starts with (or holds), as the model reads it.
EXPECTED_TEXT = {
    "data_statistics": "Training rows: 210.",
    "variable_relationships": "Each variable alone against the target (210 training rows)",
    "separability_test": "multiplicative YES",
    "dimensional_groups": "No units: the dataset has no units",
    "fit_polynomial": "2.5*x0*x1",
    "fit_power_law": "2.5*x0*x1",
    "fit_rational": "2.5*x0*x1",
    "residual_analysis": "The residual still depends on",
}


def script(mode: str) -> list[dict[str, Any]]:
    """Turn 1: every analysis tool at once; turn 2: evaluate; turn 3: submit."""
    if mode == "native":
        first = chat_completion("Analyse first.", tool_calls=[
            tool_call(name, arguments, id=f"call_{name}") for name, arguments in ANALYSIS_CALLS])
        return [
            first,
            chat_completion(tool_calls=[tool_call("evaluate_formulas", {"expressions": ["c*x0*x1"]},
                                                  id="call_eval")]),
            chat_completion(tool_calls=[tool_call("submit_formula", {"expression": "c*x0*x1"}, id="call_sub")]),
        ]
    calls = [{"tool": name, "params": arguments} for name, arguments in ANALYSIS_CALLS]
    return [
        chat_completion("Analyse first.\n```json\n" + json.dumps(calls) + "\n```"),
        chat_completion('```json\n{"tool": "evaluate_formulas", "params": {"expressions": ["c*x0*x1"]}}\n```'),
        chat_completion('```json\n{"tool": "submit_formula", "params": {"expression": "c*x0*x1"}}\n```'),
    ]


@pytest.mark.parametrize("mode", ["native", "json"])
def test_an_agent_uses_every_analysis_tool_and_its_results_land_in_parquet(
    mode: str, tmp_path: Path, agent_dataset: Dataset, agent_evaluator: Evaluator,
) -> None:
    with CandidateWriter(tmp_path, RUN, agent_dataset.name, "openai:test", background=False) as writer:
        recorder = CandidateRecorder(RUN, AGENT, "openai:test", agent_dataset.name, writer.add)
        with ScriptedChatServer(script(mode)) as server:
            model = build_model({"provider": "openai", "base_url": server.base_url, "model": "test",
                                 "api_key_env": None, "tool_mode": mode})
            agent = build_agent(model, agent_dataset, agent_evaluator, recorder=recorder, agent_id=AGENT)
            result = agent.run()

    assert result.stop_reason == "submitted" and result.error is None
    assert (result.turns, result.tool_calls, result.failed_tool_calls) == (3, 10, 0)
    history = agent.context.tool_history
    assert [call.name for call, _ in history] == [*ANALYSIS_TOOLS, "evaluate_formulas", "submit_formula"]
    assert all(outcome.ok for _, outcome in history)

    # What the model was offered and what it read back.
    first = server.completion_requests[0].body
    system = first["messages"][0]["content"]
    assert "residual_analysis shows which variables" in system
    if mode == "native":
        assert [t["function"]["name"] for t in first["tools"]] == list(FORMULA_TOOLS)
        answers = {m["tool_call_id"]: m["content"] for m in server.completion_requests[1].body["messages"]
                   if m["role"] == "tool"}
        for name, _ in ANALYSIS_CALLS:
            assert EXPECTED_TEXT[name] in answers[f"call_{name}"], name
    else:
        assert "tools" not in first
        assert all(f"### {name}" in system for name in ANALYSIS_TOOLS)
        reply = server.completion_requests[1].body["messages"][-1]
        assert reply["role"] == "user" and reply["content"].startswith("Tool results:")
        for index, (name, _) in enumerate(ANALYSIS_CALLS):
            assert f"[call_{index}] {name}: ok" in reply["content"], name
            assert EXPECTED_TEXT[name] in reply["content"], name

    # The candidates in the results: the residual fit, the evaluated and the submitted formula,
    # each with its step and the id of the tool call that made it.
    rows = duckdb_connection(tmp_path).sql(
        "SELECT agent_id, step, expression, status, tool_call_id FROM candidates ORDER BY step").fetchall()
    residual_id = "call_residual_analysis" if mode == "native" else "call_7"
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (AGENT, 1, "a*x0 + b", "ok"), (AGENT, 2, "c*x0*x1", "ok"), (AGENT, 3, "c*x0*x1", "ok")]
    assert rows[0][4] == residual_id
    assert (rows[1][4] is not None) and (rows[2][4] is not None)
    if mode == "native":
        assert [r[4] for r in rows[1:]] == ["call_eval", "call_sub"]
