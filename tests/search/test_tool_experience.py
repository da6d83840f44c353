"""Issue 17 acceptance: a second run on the same results path starts with the first run's tool
experience in its tool descriptions.

Two real Ray runs (the session's local cluster) against the loopback chat-completions server:
the first agent (native tool calls) makes an argument mistake, sends a batch with a formula
that does not parse, and improves its best with another; its folded experience lands in the
``experience`` table. The second run (json tool mode) reads it at agent start: the test reads
the request the server received and finds the first run's lessons in the tool text.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hydra import compose, initialize_config_module

from sr_dist.search import run_search
from tests.support.chat_server import ScriptedChatServer, chat_completion, tool_call

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]


def _cfg(results: Path, server: ScriptedChatServer, *overrides: str) -> Any:
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=[
            f"results.path={results}", "dataset.source=feynman:I.6.2", "dataset.n=500",
            "search.agents=1", "search.target_nmse=null", "search.max_seconds=120",
            "evaluator.warmup=false", "model=openai", f"model.base_url={server.base_url}",
            "model.model=scripted", "model.api_key_env=null", "search.tool_experience=on",
            *overrides])


def _tools_text(request: Any) -> str:
    """Everything a request tells the model about its tools: native schemas and prompt text."""
    body = request.body
    schemas = " ".join(str(t["function"]["description"]) for t in body.get("tools") or ())
    return schemas + "\n" + "\n".join(str(m.get("content") or "") for m in body["messages"])


def test_a_second_run_starts_with_the_first_runs_tool_experience(ray_cluster: None, tmp_path: Path) -> None:
    first_script = [
        chat_completion(tool_calls=[tool_call("evaluate_formulas", {"formulas": ["theta"]}, id="typo")]),
        chat_completion(tool_calls=[tool_call("evaluate_formulas", {"expressions": ["c*theta", "theta +"]},
                                              id="batch")]),
        chat_completion(tool_calls=[tool_call("submit_formula", {"expression": "c*theta"}, id="sub")]),
    ]
    with ScriptedChatServer(first_script) as server:
        first = run_search(_cfg(tmp_path, server), stream=io.StringIO(), handle_signals=False)
        first_requests = server.completion_requests
    assert first.status == "completed" and first.agents[0].stop_reason == "submitted", first.agents
    assert "Experience of" not in _tools_text(first_requests[0])  # nothing learned yet

    rows = duckdb.sql(f"SELECT run_id, tool, calls, failures, improved, failure_kinds, lessons FROM read_parquet("
                      f"'{tmp_path}/experience/*/*.parquet', hive_partitioning=true) ORDER BY tool").fetchall()
    by_tool = {row[1]: row for row in rows}
    assert set(by_tool) == {"evaluate_formulas", "submit_formula"}
    run_id, _, calls, failures, improved, kinds, lessons = by_tool["evaluate_formulas"]
    assert (run_id, calls, failures, improved, kinds) == (first.run_id, 2, 1, 1, '{"invalid_tool_call": 1}')
    assert any(lesson.startswith('failed: {"formulas": ["theta"]} -> invalid_tool_call') for lesson in lessons)
    assert any(lesson.startswith("failed: theta + was invalid") for lesson in lessons)
    assert 'helped: {"expressions": ["c*theta", "theta +"]}' in lessons

    with ScriptedChatServer([chat_completion("Let me look at the data first.")]) as server:
        second = run_search(_cfg(tmp_path, server, "model.tool_mode=json", "search.max_turns=1"),
                            stream=io.StringIO(), handle_signals=False)
        [request] = server.completion_requests
    assert second.status == "completed" and second.run_id != first.run_id
    told = _tools_text(request)
    assert "Experience of 1 earlier episode(s) with evaluate_formulas: 2 call(s), 1 failed " \
           "(1 invalid_tool_call), 1 improved the best score." in told
    assert 'failed: {"formulas": ["theta"]} -> invalid_tool_call' in told
    assert "failed: theta + was invalid" in told
    assert "Experience of 1 earlier episode(s) with submit_formula" in told
    assert "Experience of" not in told.split("evaluate_formulas", 1)[0]  # appended, not prepended
