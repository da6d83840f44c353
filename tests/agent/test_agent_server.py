"""The agent loop against a real chat-completions server on 127.0.0.1 and the real openai adapter.

Each test plays a script on :class:`ScriptedChatServer` (native calls, JSON-text calls, broken
arguments, prose, 429, 500s, slow replies, cut replies), runs a real :class:`Agent` with the
real formula tools and evaluator, and checks what the agent sent back in the next request.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from sr_dist.agent import Agent, AgentLimits, AgentResult, CompactionPolicy
from sr_dist.agent.history_window import COMPACTED, conversation_chars
from sr_dist.conversation import Context
from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.models import build_model
from sr_dist.parsers import get_parser
from sr_dist.sr import build_agent
from sr_dist.sr.formula_tools import FORMULA_TOOLS, ListRecorder
from sr_dist.tools import ToolRegistry, ToolRunAbort
from tests.support.agent_problem import FailingEvaluator
from tests.support.chat_server import ScriptedChatServer, StepLike, chat_completion, delayed, error, tool_call


def model_for(server: ScriptedChatServer, **options: Any) -> Any:
    cfg = {
        "provider": "openai",
        "base_url": server.base_url,
        "model": "test",
        "api_key_env": None,
        "retry_base_delay_s": 0.001,
        "retry_max_delay_s": 0.002,
        **options,
    }
    return build_model(cfg)


def run_script(
    script: Sequence[StepLike],
    dataset: Dataset,
    evaluator: Any,
    *,
    limits: AgentLimits | None = None,
    compaction: CompactionPolicy | None = None,
    cancel_event: Any = None,
    **model_options: Any,
) -> tuple[AgentResult, Agent, ScriptedChatServer, ListRecorder]:
    recorder = ListRecorder()
    with ScriptedChatServer(script) as server:
        agent = build_agent(
            model_for(server, **model_options),
            dataset,
            evaluator,
            limits=limits,
            recorder=recorder,
            agent_id=3,
            compaction=compaction,
            cancel_event=cancel_event,
        )
        result = agent.run()
    return result, agent, server, recorder


def sent(server: ScriptedChatServer, index: int) -> list[dict[str, Any]]:
    """The messages of the ``index``-th chat completion request."""
    return server.completion_requests[index].body["messages"]


def evaluate(expressions: list[str], id: str | None = None) -> dict[str, Any]:
    return tool_call("evaluate_formulas", {"expressions": expressions}, id=id)


def submit(expression: str, id: str | None = None) -> dict[str, Any]:
    return tool_call("submit_formula", {"expression": expression, "rationale": "it fits"}, id=id)


# --------------------------------------------------------------------------- message protocol


def test_native_calls_are_answered_with_tool_messages(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    script = [
        chat_completion("Two candidates.", tool_calls=[evaluate(["c*x0*x1", "x0 +"], id="call_a")]),
        chat_completion(tool_calls=[submit("c*x0*x1", id="call_b")]),
    ]
    result, agent, server, recorder = run_script(script, agent_dataset, agent_evaluator)

    assert result.stop_reason == "submitted" and result.error is None
    assert (result.turns, result.tool_calls, result.failed_tool_calls) == (2, 2, 0)
    assert result.usage.total_tokens == 30 and result.tokens == 30
    assert result.submitted is not None and result.submitted.expression == "c*x0*x1"
    assert result.best is not None and result.best.expression == "c*x0*x1" and result.best.test_nmse < 1e-8
    assert result.candidates == 3 and result.model == "openai:test"

    first = server.completion_requests[0].body
    assert [t["function"]["name"] for t in first["tools"]] == list(FORMULA_TOOLS)
    assert first["tool_choice"] == "auto"
    system, task = first["messages"][0], first["messages"][1]
    assert system["role"] == "system" and "Training rows: 210" in system["content"] and "x0:" in system["content"]
    assert task["role"] == "user" and "x0, x1" in task["content"]

    assistant, answer = sent(server, 1)[-2:]
    assert assistant["role"] == "assistant" and assistant["content"] == "Two candidates."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a"]
    assert answer["role"] == "tool" and answer["tool_call_id"] == "call_a"
    assert "1. ok val_nmse=" in answer["content"]
    assert "2. invalid x0 + :: unexpected end of formula" in answer["content"]

    assert [(b.agent_id, b.step, b.tool_call_id) for b in recorder.batches] == [(3, 1, "call_a"), (3, 2, "call_b")]
    assert [call.name for call, _ in agent.context.tool_history] == ["evaluate_formulas", "submit_formula"]
    records = agent.context.tool_history[0][1].result["results"]
    assert [r["status"] for r in records] == ["ok", "invalid"]


def test_json_mode_reads_calls_from_text_and_answers_in_one_user_message(
    agent_dataset: Dataset, agent_evaluator: Evaluator
) -> None:
    first = 'Let me test the product.\n```json\n{"tool": "evaluate_formulas", "params": {"expressions": ["c*x0*x1"]}}\n```'
    broken = 'Again:\n```json\n{"tool": "evaluate_formulas", "params": {"expressions": [}}\n```'
    done = '```json\n{"tool": "submit_formula", "params": {"expression": "c*x0*x1"}}\n```'
    script = [chat_completion(first), chat_completion(broken), chat_completion(done)]
    result, _, server, _ = run_script(script, agent_dataset, agent_evaluator, tool_mode="json")

    assert result.stop_reason == "submitted" and result.turns == 3
    body = server.completion_requests[0].body
    assert "tools" not in body
    system = body["messages"][0]["content"]
    assert "### evaluate_formulas" in system and '"tool": "evaluate_formulas"' in system
    assistant, answer = sent(server, 1)[-2:]
    assert assistant == {"role": "assistant", "content": first}
    assert answer["role"] == "user" and answer["content"].startswith("Tool results:")
    assert "[call_0] evaluate_formulas: ok" in answer["content"]
    unreadable = sent(server, 2)[-1]
    assert unreadable["role"] == "user" and "could not be read: invalid JSON" in unreadable["content"]


def test_bad_arguments_are_answered_with_errors_that_name_the_problem(
    agent_dataset: Dataset, agent_evaluator: Evaluator
) -> None:
    calls = [
        tool_call("evaluate_formulas", '{"expressions": ["c*x0"', id="call_json"),
        tool_call("evaluate_formulas", {"expressions": "c*x0"}, id="call_type"),
        tool_call("evaluate_formulas", {"formulas": ["c*x0"]}, id="call_name"),
        tool_call("fit_everything", {}, id="call_unknown"),
        evaluate(["c*x0*x1"], id="call_good"),
    ]
    script = [chat_completion(tool_calls=calls), chat_completion(tool_calls=[submit("c*x0*x1")])]
    result, agent, server, _ = run_script(script, agent_dataset, agent_evaluator)

    assert result.stop_reason == "submitted"
    assert (result.tool_calls, result.failed_tool_calls) == (6, 4)
    messages = sent(server, 1)
    assistant = messages[-6]
    assert [c["id"] for c in assistant["tool_calls"]] == [c["id"] for c in calls]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"expressions": ["c*x0"'  # kept as sent
    answers = {m["tool_call_id"]: m["content"] for m in messages[-5:]}
    assert all(m["role"] == "tool" for m in messages[-5:])
    assert answers["call_json"].startswith("ERROR (invalid_tool_call): Tool call #1 (id call_json)")
    assert "invalid JSON" in answers["call_json"]
    assert "argument 'expressions'" in answers["call_type"] and "is not of type 'array'" in answers["call_type"]
    assert "'expressions'" in answers["call_name"] and "formulas" in answers["call_name"]
    assert "unknown tool 'fit_everything'" in answers["call_unknown"] and "evaluate_formulas" in answers["call_unknown"]
    assert answers["call_good"].startswith("Evaluated 1 formula(s) (1 ok).")
    assert len(agent.context.tool_history) == 6


def test_an_unreadable_text_call_is_answered_under_its_id_among_the_others(
    agent_dataset: Dataset, agent_evaluator: Evaluator
) -> None:
    """Prompted formats: the model's second call is ``call_1`` whether or not it could be read."""
    calls = 'Action: evaluate_formulas(expressions=["c*x0*x1"])\nAction: evaluate_formulas(expressions=c*x0)\nAction: best_formulas(k=1)'
    done = 'Action: submit_formula(expression="c*x0*x1", rationale="it fits")'
    result, _, server, _ = run_script([chat_completion(calls), chat_completion(done)], agent_dataset, agent_evaluator, tool_mode="text")

    assert result.stop_reason == "submitted"
    assert (result.tool_calls, result.failed_tool_calls) == (4, 1)  # the unreadable call counts, as a native one does
    assistant, answer = sent(server, 1)[-2:]
    assert assistant == {"role": "assistant", "content": calls}
    content = answer["content"]
    assert answer["role"] == "user" and content.startswith("Tool results:")
    assert "[call_0] evaluate_formulas: ok" in content
    assert "[call_1] evaluate_formulas: failed\nERROR (invalid_tool_call): The Action at line 2 could not be read" in content
    assert "put text in quotes" in content
    assert "[call_2] best_formulas: ok" in content
    assert content.index("[call_0]") < content.index("[call_1]") < content.index("[call_2]")
    assert "could not be read:\n-" not in content  # no separate list of reply problems


def test_text_fallback_calls_are_answered_as_tool_messages_readable_or_not() -> None:
    """Calls read from text by the ``openai`` parser: every id in the assistant turn gets its answer."""
    registry = ToolRegistry()

    @registry.tool(description="Look up a fact.", read_only=True, idempotent=True)
    def lookup(key: str) -> dict[str, Any]:
        return {"key": key, "value": len(key)}

    reply = (
        'Two lookups: <tool_call>{"name": "lookup", "arguments": {"key": "ab"}}</tool_call>\n'
        '<tool_call>{"name": "lookup", "arguments": "not json"}</tool_call>'
    )
    with ScriptedChatServer([chat_completion(reply), chat_completion("Done.")]) as server:
        context = Context(system="s", messages=[{"role": "user", "content": "Go."}])
        parser = get_parser("openai", text_fallback=True)
        agent = Agent(model_for(server), parser, registry.open_catalog(), context, AgentLimits(max_turns=2))
        result = agent.run()
        assistant, *answers = sent(server, 1)[-3:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_0", "call_1"]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["lookup", "lookup"]
    assert [(m["role"], m["tool_call_id"]) for m in answers] == [("tool", "call_0"), ("tool", "call_1")]
    assert answers[0]["content"].startswith("key: ab")
    assert answers[1]["content"].startswith("ERROR (invalid_tool_call): The tool call at line 2 cannot be used")
    assert (result.tool_calls, result.failed_tool_calls) == (2, 1)


def test_prose_gets_nudges_then_the_run_stops(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    script = [chat_completion("I think it is a product."), chat_completion("Still thinking."), chat_completion("Hmm.")]
    result, agent, server, _ = run_script(script, agent_dataset, agent_evaluator, limits=AgentLimits(max_prose_turns=3))

    assert result.stop_reason == "no_tool_calls" and result.turns == 3 and result.tool_calls == 0
    for index, prose in ((1, "I think it is a product."), (2, "Still thinking.")):
        assistant, nudge = sent(server, index)[-2:]
        assert assistant == {"role": "assistant", "content": prose}
        assert nudge["role"] == "user" and "contained no tool call" in nudge["content"]
        assert "submit_formula" in nudge["content"]
    assert agent.context.messages[-1] == {"role": "assistant", "content": "Hmm."}  # no nudge after the last


def test_a_cut_reply_is_reported_and_counts_as_a_failed_turn(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    cut = chat_completion(tool_calls=[tool_call("evaluate_formulas", '{"expressions": ["c*x0*x', id="c1")], finish_reason="length")
    script = [cut, chat_completion(tool_calls=[submit("c*x0*x1")])]
    result, _, server, _ = run_script(script, agent_dataset, agent_evaluator, limits=AgentLimits(failure_budget=2))
    assert result.stop_reason == "submitted"
    tool_msg, note = sent(server, 1)[-2:]
    assert tool_msg["tool_call_id"] == "c1" and tool_msg["content"].startswith("ERROR (invalid_tool_call)")
    assert note["role"] == "user" and "cut off at the output token limit" in note["content"]

    result, _, _, _ = run_script([cut, cut], agent_dataset, agent_evaluator, limits=AgentLimits(failure_budget=1))
    assert result.stop_reason == "failure_budget" and result.turns == 1


# --------------------------------------------------------------------------- provider trouble


def test_429_then_success_is_retried_by_the_adapter(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    script = [
        error(429, "slow down", headers={"Retry-After": "0"}),
        chat_completion(tool_calls=[evaluate(["c*x0*x1"])]),
        chat_completion(tool_calls=[submit("c*x0*x1")]),
    ]
    result, _, server, _ = run_script(script, agent_dataset, agent_evaluator)
    assert result.stop_reason == "submitted" and result.turns == 2
    requests = server.completion_requests
    assert len(requests) == 3 and requests[0].body == requests[1].body


def test_500s_that_exhaust_retries_end_the_run_with_a_reason(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    script = [chat_completion(tool_calls=[evaluate(["c*x0*x1"])])] + [error(500, "upstream exploded")] * 3
    result, _, server, _ = run_script(script, agent_dataset, agent_evaluator, max_retries=2)
    assert result.stop_reason == "model_error:server_error"
    assert result.error is not None and "HTTP 500" in result.error and "upstream exploded" in result.error
    assert result.turns == 2 and len(server.completion_requests) == 4 and server.remaining == 0
    assert result.best is not None and result.best.expression == "c*x0*x1"  # work done before is kept


def test_a_reply_slower_than_the_timeout_ends_the_run(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    script = [delayed(1.5, chat_completion(tool_calls=[evaluate(["c*x0"])]))]
    result, _, _, _ = run_script(script, agent_dataset, agent_evaluator, timeout_s=0.2, max_retries=0)
    assert result.stop_reason == "model_error:timeout" and result.turns == 1
    assert result.error is not None and "0.2" in result.error


def test_an_evaluator_failure_goes_back_to_the_model_and_the_run_goes_on(agent_dataset: Dataset) -> None:
    broken = FailingEvaluator("evaluator actor died")
    script = [chat_completion(tool_calls=[evaluate(["c*x0"], id="e1")]), chat_completion(tool_calls=[evaluate(["c*x1"], id="e2")])]
    result, _, server, _ = run_script(script, agent_dataset, broken, limits=AgentLimits(max_turns=2))
    assert result.stop_reason == "max_turns" and broken.calls == 2
    assert (result.tool_calls, result.failed_tool_calls, result.best) == (2, 2, None)
    answer = sent(server, 1)[-1]
    assert answer["tool_call_id"] == "e1" and answer["content"].startswith("ERROR (tool_error)")
    assert "the evaluator could not fit the batch (ConnectionError: evaluator actor died)" in answer["content"]


# --------------------------------------------------------------------------- limits


def test_max_turns(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    script = [chat_completion(tool_calls=[evaluate([e])]) for e in ("c*x0", "c*x1", "c*x0 + d")]
    result, _, server, _ = run_script(script, agent_dataset, agent_evaluator, limits=AgentLimits(max_turns=2))
    assert result.stop_reason == "max_turns" and result.turns == 2 and server.remaining == 1


def test_max_tool_calls_answers_the_calls_it_did_not_run(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    calls = [evaluate(["c*x0"], id="t1"), evaluate(["c*x1"], id="t2"), evaluate(["c*x0*x1"], id="t3")]
    result, agent, _, recorder = run_script(
        [chat_completion(tool_calls=calls)], agent_dataset, agent_evaluator, limits=AgentLimits(max_tool_calls=2)
    )
    assert result.stop_reason == "max_tool_calls" and result.tool_calls == 2 and result.failed_tool_calls == 0
    last = agent.context.messages[-1]
    assert last["tool_call_id"] == "t3"
    assert last["content"] == "ERROR (cancelled): not run: the run's limit of 2 tool calls was reached"
    assert [b.tool_call_id for b in recorder.batches] == ["t1", "t2"]


def test_max_tokens(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    script = [chat_completion(tool_calls=[evaluate([e])], usage=(10, 5)) for e in ("c*x0", "c*x1", "c*x0 + d")]
    result, _, _, _ = run_script(script, agent_dataset, agent_evaluator, limits=AgentLimits(max_tokens=25))
    assert result.stop_reason == "max_tokens" and result.turns == 2 and result.tokens == 30


def test_deadline_cuts_a_slow_model_call(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    script = [delayed(1.5, chat_completion(tool_calls=[evaluate(["c*x0"])]))]
    result, _, _, _ = run_script(script, agent_dataset, agent_evaluator, limits=AgentLimits(deadline_s=0.3), timeout_s=30)
    assert result.stop_reason == "deadline" and result.turns == 1 and result.tool_calls == 0
    assert result.error is not None and "deadline of 0.3s" in result.error


def test_failure_budget_counts_consecutive_failed_turns(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    bad = lambda: chat_completion(tool_calls=[tool_call("evaluate_formulas", "{not json")])  # noqa: E731
    good = chat_completion(tool_calls=[evaluate(["c*x0"])])
    script = [bad(), bad(), good, bad(), bad(), bad()]
    result, _, server, _ = run_script(script, agent_dataset, agent_evaluator, limits=AgentLimits(failure_budget=3))
    assert result.stop_reason == "failure_budget" and result.turns == 6 and server.remaining == 0


def test_target_nmse_stops_the_run(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    script = [chat_completion(tool_calls=[evaluate(["c*x0", "c*x0*x1"])]), chat_completion("unused")]
    result, _, server, _ = run_script(script, agent_dataset, agent_evaluator, limits=AgentLimits(target_nmse=1e-8))
    assert result.stop_reason == "target_nmse" and result.turns == 1 and server.remaining == 1
    assert result.best is not None and result.best.val_nmse <= 1e-8


def test_a_cancelled_run_makes_no_request(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    event = threading.Event()
    event.set()
    result, _, server, _ = run_script([chat_completion("x")], agent_dataset, agent_evaluator, cancel_event=event)
    assert result.stop_reason == "cancelled" and result.turns == 0 and server.completion_requests == []


def test_read_only_calls_of_one_turn_are_all_answered_in_order(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    calls = [
        tool_call("data_summary", {}, id="r1"),
        tool_call("best_formulas", {"k": 3}, id="r2"),
        evaluate(["c*x0*x1"], id="w1"),
        tool_call("best_formulas", {}, id="r3"),
    ]
    script = [chat_completion(tool_calls=calls), chat_completion(tool_calls=[submit("c*x0*x1")])]
    result, _, server, _ = run_script(script, agent_dataset, agent_evaluator)
    assert result.stop_reason == "submitted" and result.failed_tool_calls == 0
    answers = sent(server, 1)[-4:]
    assert [m["tool_call_id"] for m in answers] == ["r1", "r2", "w1", "r3"]
    assert "First rows" in answers[0]["content"]
    assert "No formula has been fitted" in answers[1]["content"]  # ran before the evaluation
    assert "c*x0*x1" in answers[3]["content"]  # ran after it


# --------------------------------------------------------------------------- compaction


def test_compaction_bounds_what_is_sent(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    turns = 8
    script = [
        chat_completion(
            "Trying a family of power laws. " * 10,
            tool_calls=[evaluate([f"c*x0**{t} + d*x1**{i}" for i in range(1, 13)], id=f"turn{t}")],
        )
        for t in range(1, turns + 1)
    ]
    policy = CompactionPolicy(keep_turns=2, max_context_chars=5000)
    result, agent, server, _ = run_script(
        script, agent_dataset, agent_evaluator, limits=AgentLimits(max_turns=turns), compaction=policy
    )
    assert result.stop_reason == "max_turns"
    sizes = []
    for request in server.completion_requests:
        messages = request.body["messages"][1:]  # the system prompt is fixed, not part of the budget
        sizes.append(conversation_chars(messages))
        calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
        answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        assert calls == answered  # native pairing survives compaction
    assert max(sizes) <= policy.max_context_chars
    assert sizes[2] > sizes[1]  # it did grow before the bound bit
    last = sent(server, turns - 1)
    assert "earlier turn(s) were removed" in last[2]["content"]  # the oldest turns were dropped
    tool_texts = [m["content"] for m in last if m["role"] == "tool"]
    assert tool_texts[0].startswith(f"{COMPACTED} evaluate_formulas: 12 results (12 ok), best val_nmse")
    assert tool_texts[-1].startswith("Evaluated 12 formula(s)")  # the latest turns stay verbatim
    assert last[1]["content"].startswith("Find a formula for y")  # the task is always kept
    assert len(agent.context.tool_history) == turns  # the structured history keeps every turn
    assert all(len(r.result["results"]) == 12 for _, r in agent.context.tool_history)


# --------------------------------------------------------------------------- direct construction


def test_an_agent_built_by_hand_describes_its_tools_and_honours_tool_run_abort() -> None:
    """Any catalog works: the parser's tool text joins the system prompt; ToolRunAbort ends the run."""
    registry = ToolRegistry()

    @registry.tool(description="Look up a fact.", read_only=True, idempotent=True)
    def lookup(key: str) -> dict[str, Any]:
        return {"key": key, "value": len(key)}

    @registry.tool(description="Stop everything.")
    def halt(reason: str) -> dict[str, Any]:
        raise ToolRunAbort(f"halted: {reason}")

    catalog = registry.open_catalog()
    calls = (
        '```json\n[{"tool": "lookup", "params": {"key": "ab"}}, {"tool": "lookup", "params": {"key": "abc"}},'
        ' {"tool": "lookup", "params": {"key": "abcd"}}]\n```'
    )
    stop = '```json\n{"tool": "halt", "params": {"reason": "done"}}\n```'
    with ScriptedChatServer([chat_completion(calls), chat_completion(stop)]) as server:
        context = Context(system="Be brief.", messages=[{"role": "user", "content": "Go."}])
        agent = Agent(model_for(server, tool_mode="json"), get_parser("json"), catalog, context, AgentLimits(max_tool_calls=10))
        result = agent.run()
        assert agent.context.system.startswith("Be brief.\n\nYou can call the following tools.")
        assert "### lookup" in sent(server, 0)[0]["content"]
        results_text = sent(server, 1)[-1]["content"]
    assert "[call_0] lookup: ok" in results_text and "[call_2] lookup: ok\nkey: abcd" in results_text
    assert result.stop_reason == "aborted" and result.error == "halted: done"
    assert (result.turns, result.tool_calls, result.best, result.candidates) == (2, 4, None, 0)


def test_a_parallel_group_respects_the_tool_call_limit(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    calls = [tool_call("best_formulas", {"k": k}, id=f"b{k}") for k in (1, 2, 3)]
    result, agent, _, _ = run_script(
        [chat_completion(tool_calls=calls)], agent_dataset, agent_evaluator, limits=AgentLimits(max_tool_calls=2)
    )
    assert result.stop_reason == "max_tool_calls" and result.tool_calls == 2
    answers = agent.context.messages[-3:]
    assert [m["tool_call_id"] for m in answers] == ["b1", "b2", "b3"]
    assert answers[2]["content"].endswith("not run: the run's limit of 2 tool calls was reached")


def test_read_only_calls_run_together_and_other_calls_one_at_a_time() -> None:
    """Two calls that each wait for the other at a barrier succeed only if they run concurrently."""
    registry = ToolRegistry()
    together = threading.Barrier(2, timeout=2.0)
    apart = threading.Barrier(2, timeout=0.5)

    @registry.tool(description="Meet another reader.", read_only=True, idempotent=True)
    def meet(who: str) -> dict[str, Any]:
        together.wait()
        return {"met": who}

    @registry.tool(description="Meet another writer.", idempotent=True)
    def meet_writer(who: str) -> dict[str, Any]:
        apart.wait()
        return {"met": who}

    calls = [tool_call("meet", {"who": "a"}, id="m1"), tool_call("meet", {"who": "b"}, id="m2")]
    calls += [tool_call("meet_writer", {"who": "c"}, id="w1"), tool_call("meet_writer", {"who": "d"}, id="w2")]
    with ScriptedChatServer([chat_completion(tool_calls=calls)]) as server:
        context = Context(system="s", messages=[{"role": "user", "content": "Go."}])
        agent = Agent(model_for(server), get_parser("openai"), registry.open_catalog(), context, AgentLimits(max_turns=1))
        result = agent.run()
    answers = {m["tool_call_id"]: m["content"] for m in agent.context.messages if m["role"] == "tool"}
    assert answers["m1"] == "met: a" and answers["m2"] == "met: b"
    assert answers["w1"].startswith("ERROR (tool_error)") and "BrokenBarrierError" in answers["w1"]
    assert result.stop_reason == "max_turns" and result.failed_tool_calls == 2
