"""Agents with MCP tools: the catalog they see, every parser mode, and a hanging server.

The model is a real OpenAI-compatible HTTP server on 127.0.0.1 playing a script; the formula
tools use the real evaluator; the MCP servers are real processes. :func:`mcp_agent` is
``build_agent`` with the MCP tools as ``extra_tools``, as the Ray agents get them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sr_dist.agent import Agent, AgentLimits
from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.models import build_model
from sr_dist.sr import build_agent
from sr_dist.sr.formula_tools import FORMULA_TOOLS, ListRecorder
from sr_dist.tools.mcp import MCPToolset
from tests.mcp.support import flaky
from tests.support.chat_server import ScriptedChatServer, StepLike, chat_completion, tool_call

pytestmark = pytest.mark.timeout(180)


def mcp_agent(model: Any, dataset: Dataset, evaluator: Evaluator, toolset: MCPToolset, limits: AgentLimits) -> Agent:
    """The agent ``build_agent`` builds, with the MCP tools after the formula tools in the catalog."""
    return build_agent(model, dataset, evaluator, limits=limits, recorder=ListRecorder(),
                       extra_tools=toolset.tools(reserved=FORMULA_TOOLS))


def _model(server: ScriptedChatServer, tool_mode: str = "native") -> Any:
    return build_model(
        {"provider": "openai", "base_url": server.base_url, "model": "test", "api_key_env": None,
         "tool_mode": tool_mode, "max_retries": 0}
    )


def _sent_text(request: Any) -> str:
    return json.dumps(request.body["messages"])


def test_a_run_with_a_hanging_mcp_tool_finishes_and_records_the_failures(
    agent_dataset: Dataset, agent_evaluator: Evaluator
) -> None:
    """Acceptance: the hang times out, later calls to that server fail fast, the agent carries on."""
    script: list[StepLike] = [
        chat_completion(tool_calls=[tool_call("sleep", {"seconds": 3600}, id="hang")]),
        chat_completion(tool_calls=[tool_call("echo", {"text": "still there?"}, id="echo")]),
        chat_completion(tool_calls=[tool_call("evaluate_formulas", {"expressions": ["c*x0*x1"]}, id="eval")]),
        chat_completion(tool_calls=[tool_call("submit_formula", {"expression": "c*x0*x1"}, id="submit")]),
    ]
    with MCPToolset([flaky(call_timeout_s=1)]) as toolset, ScriptedChatServer(script) as server:
        agent = mcp_agent(_model(server), agent_dataset, agent_evaluator, toolset, AgentLimits(max_turns=10))
        result = agent.run()
        assert toolset.status("flaky").state == "status_unknown"

    history = [(call.name, outcome.ok, outcome.error_kind) for call, outcome in agent.context.tool_history]
    explain = f"result: {result.to_dict()}; history: {agent.context.tool_history}"
    assert result.stop_reason == "submitted" and result.error is None, explain
    assert result.tool_calls == 4 and result.failed_tool_calls == 2, explain
    assert result.submitted is not None and result.submitted.expression == "c*x0*x1"
    assert history == [
        ("sleep", False, "timeout"),
        ("echo", False, "mcp_status_unknown"),
        ("evaluate_formulas", True, None),
        ("submit_formula", True, None),
    ]
    requests = server.completion_requests
    assert "did not answer within 1s" in _sent_text(requests[1])  # the model was told
    assert "unknown state" in _sent_text(requests[2])


@pytest.mark.parametrize(
    ("tool_mode", "reply"),
    [
        ("native", chat_completion(tool_calls=[tool_call("echo", {"text": "hello from mcp"})])),
        ("json", chat_completion('Checking the link.\n{"tool": "echo", "params": {"text": "hello from mcp"}}')),
        ("text", chat_completion('Action: echo(text="hello from mcp")')),
    ],
    ids=["native", "json", "text"],
)
def test_agents_see_and_call_mcp_tools_in_every_parser_mode(
    tool_mode: str, reply: StepLike, agent_dataset: Dataset, agent_evaluator: Evaluator
) -> None:
    script: list[StepLike] = [reply, chat_completion("Done for now.")]
    with MCPToolset([flaky()]) as toolset, ScriptedChatServer(script) as server:
        agent = mcp_agent(_model(server, tool_mode), agent_dataset, agent_evaluator, toolset, AgentLimits(max_turns=2))
        result = agent.run()

    first, second = server.completion_requests
    if tool_mode == "native":
        offered = [tool["function"]["name"] for tool in first.body["tools"]]
        assert offered[:len(FORMULA_TOOLS)] == list(FORMULA_TOOLS) and {"echo", "add", "math_square"} <= set(offered)
    else:
        assert "tools" not in first.body
        system = first.body["messages"][0]["content"]
        for name in (*FORMULA_TOOLS, "echo", "math_square"):
            assert name in system
    [(call, outcome)] = agent.context.tool_history
    assert (call.name, outcome.ok, outcome.result_str) == ("echo", True, "hello from mcp")
    assert "hello from mcp" in _sent_text(second)
    assert result.tool_calls == 1 and result.failed_tool_calls == 0


def test_an_agent_calls_a_third_party_server_in_a_run(
    time_server: dict[str, Any], agent_dataset: Dataset, agent_evaluator: Evaluator
) -> None:
    script: list[StepLike] = [
        chat_completion(tool_calls=[
            tool_call("get_current_time", {"timezone": "UTC"}, id="now"),
            tool_call("evaluate_formulas", {"expressions": ["c*x0"]}, id="eval"),
        ]),
        chat_completion(tool_calls=[tool_call(
            "convert_time", {"source_timezone": "Europe/Berlin", "time": "09:30", "target_timezone": "UTC"}, id="conv"
        )]),
    ]
    with MCPToolset([time_server]) as toolset, ScriptedChatServer(script) as server:
        agent = mcp_agent(_model(server), agent_dataset, agent_evaluator, toolset, AgentLimits(max_turns=2))
        result = agent.run()

    assert result.stop_reason == "max_turns" and result.failed_tool_calls == 0
    outcomes = {call.name: outcome for call, outcome in agent.context.tool_history}
    assert outcomes["get_current_time"].result["timezone"] == "UTC"
    assert outcomes["convert_time"].result["target"]["timezone"] == "UTC"
    assert result.candidates == 1
    assert '\\"timezone\\": \\"UTC\\"' in _sent_text(server.completion_requests[1])
