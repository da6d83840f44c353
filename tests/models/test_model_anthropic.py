"""The ``anthropic`` provider: translation tables, a real Messages API server, the missing extra."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from sr_dist.conversation import Context
from sr_dist.models import ModelConfigError, ModelError, Usage, build_model
from sr_dist.models.anthropic_format import from_anthropic_response, to_anthropic_messages, to_anthropic_tools
from tests.support.chat_server import ScriptedAnthropicServer, StepLike, anthropic_message, error, tool_use

CALL = {"id": "toolu_1", "type": "function", "function": {"name": "evaluate_formulas", "arguments": '{"formulas": ["a*x"]}'}}
CALL2 = {"id": "toolu_2", "type": "function", "function": {"name": "evaluate_formulas", "arguments": '{"formulas": ["x**2"]}'}}

#: OpenAI chat-format conversation → (system, Anthropic messages).
TRANSLATION_CASES: list[dict[str, Any]] = [
    {
        "id": "system-is-separate",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "system": "Be brief.",
        "expected": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    },
    {
        "id": "tool-calls-become-tool-use-and-results-merge-into-one-user-turn",
        "messages": [
            {"role": "user", "content": "fit it"},
            {"role": "assistant", "content": "Two tries.", "tool_calls": [CALL, CALL2]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "nmse=0.1"},
            {"role": "tool", "tool_call_id": "toolu_2", "content": "nmse=0.5"},
        ],
        "system": "",
        "expected": [
            {"role": "user", "content": [{"type": "text", "text": "fit it"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Two tries."},
                    {"type": "tool_use", "id": "toolu_1", "name": "evaluate_formulas", "input": {"formulas": ["a*x"]}},
                    {"type": "tool_use", "id": "toolu_2", "name": "evaluate_formulas", "input": {"formulas": ["x**2"]}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "nmse=0.1"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "nmse=0.5"},
                ],
            },
        ],
    },
    {
        "id": "a-user-note-after-tool-results-joins-their-turn-after-them",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "user", "content": "Your last call failed to parse."},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "ok"},
        ],
        "system": "",
        "expected": [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "evaluate_formulas", "input": {"formulas": ["a*x"]}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
                    {"type": "text", "text": "Your last call failed to parse."},
                ],
            },
        ],
    },
    {
        "id": "unreadable-arguments-are-kept-not-dropped",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "t9", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]},
        ],
        "system": "",
        "expected": [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t9", "name": "f", "input": {"_unparsed_arguments": "{oops"}}]},
        ],
    },
    {
        "id": "empty-turns-dropped-and-text-parts-joined",
        "messages": [
            {"role": "system", "content": "A"},
            {"role": "system", "content": "B"},
            {"role": "user", "content": [{"type": "text", "text": "x "}, {"type": "text", "text": "y"}]},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "z"},
        ],
        "system": "A\n\nB",
        "expected": [{"role": "user", "content": [{"type": "text", "text": "x y"}, {"type": "text", "text": "z"}]}],
    },
]

#: Anthropic reply → what the agent sees.
RESPONSE_CASES: list[dict[str, Any]] = [
    {
        "id": "tool-use",
        "body": anthropic_message("Let me try.", tool_uses=[tool_use("evaluate_formulas", {"formulas": ["a*x"]}, id="tu1")], usage=(40, 12)),
        "text": "Let me try.",
        "calls": [{"id": "tu1", "type": "function", "function": {"name": "evaluate_formulas", "arguments": '{"formulas": ["a*x"]}'}}],
        "finish": "tool_calls",
        "usage": Usage(40, 12, 52),
    },
    {"id": "max-tokens-is-length", "body": anthropic_message("cut", stop_reason="max_tokens"), "text": "cut", "calls": [], "finish": "length", "usage": Usage(10, 5, 15)},
    {"id": "end-turn-is-stop", "body": anthropic_message("done"), "text": "done", "calls": [], "finish": "stop", "usage": Usage(10, 5, 15)},
    {
        "id": "cache-tokens-count-as-prompt",
        "body": {"content": [{"type": "text", "text": "a"}], "stop_reason": "end_turn", "usage": {"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 2}},
        "text": "a",
        "calls": [],
        "finish": "stop",
        "usage": Usage(105, 2, 107),
    },
]


@pytest.mark.parametrize("case", TRANSLATION_CASES, ids=[c["id"] for c in TRANSLATION_CASES])
def test_translation_to_anthropic(case: dict[str, Any]) -> None:
    system, messages = to_anthropic_messages(case["messages"])
    assert system == case["system"]
    assert messages == case["expected"]


@pytest.mark.parametrize("case", RESPONSE_CASES, ids=[c["id"] for c in RESPONSE_CASES])
def test_translation_from_anthropic(case: dict[str, Any]) -> None:
    response = from_anthropic_response(case["body"])
    assert response.text == case["text"]
    assert list(response.tool_calls) == case["calls"]
    assert response.finish_reason == case["finish"]
    assert response.usage == case["usage"]


def test_tools_translate_and_a_nameless_tool_is_refused(tools) -> None:
    [tool] = to_anthropic_tools(tools)
    assert tool == {
        "name": "evaluate_formulas",
        "description": "Fit and score candidate formulas.",
        "input_schema": tools[0]["function"]["parameters"],
    }
    with pytest.raises(ModelError, match="without a name"):
        to_anthropic_tools([{"type": "function", "function": {"description": "x"}}])


def test_a_reply_that_is_not_a_message_is_a_bad_response() -> None:
    with pytest.raises(ModelError) as info:
        from_anthropic_response({"type": "error"})
    assert info.value.kind == "bad_response"


def test_missing_extra_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch, env) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # makes ``import anthropic`` raise ImportError
    with pytest.raises(ModelConfigError) as info:
        build_model({"provider": "anthropic", "model": "claude-test"}, getenv=env.get)
    assert "pip install 'sr-dist[anthropic]'" in str(info.value)


def _model(server: ScriptedAnthropicServer, env: dict[str, str], sleeps: Any, **options: Any) -> Any:
    cfg = {"provider": "anthropic", "model": "claude-test", "base_url": server.base_url, "retry_base_delay_s": 0.001, **options}
    return build_model(cfg, getenv=env.get, sleep=sleeps)


def test_against_a_messages_api_server(tools, env, secret, sleeps) -> None:
    pytest.importorskip("anthropic", reason="the anthropic extra is not installed (pip install 'sr-dist[anthropic]')")
    context = Context(
        system="You propose formulas.",
        messages=[
            {"role": "user", "content": "Find f."},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "nmse=0.3"},
        ],
    )
    script: list[StepLike] = [
        error(529, "overloaded", headers={"retry-after": "0.5"}),
        anthropic_message("Refining.", tool_uses=[tool_use("evaluate_formulas", {"formulas": ["a*x+b"]}, id="tu2")], usage=(50, 9)),
    ]
    with ScriptedAnthropicServer(script) as server:
        model = _model(server, env, sleeps, temperature=0.2, max_tokens=300)
        response = model.call(context, tools)
        sent = server.requests
    assert model.name == "anthropic:claude-test"
    assert response.text == "Refining."
    assert response.tool_calls == ({"id": "tu2", "type": "function", "function": {"name": "evaluate_formulas", "arguments": '{"formulas": ["a*x+b"]}'}},)
    assert response.finish_reason == "tool_calls" and response.usage == Usage(50, 9, 59)
    assert len(sent) == 2 and sleeps == [0.5]  # 529 retried after the server's hint
    body = sent[-1].body
    headers = sent[-1].headers
    assert sent[-1].path == "/v1/messages"
    # SDK releases differ in the header that carries the key
    assert secret in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert body["system"] == "You propose formulas."
    assert body["model"] == "claude-test" and body["max_tokens"] == 300 and body["temperature"] == 0.2
    assert body["tools"] == to_anthropic_tools(tools) and body["tool_choice"] == {"type": "auto"}
    assert body["messages"] == to_anthropic_messages(context.messages_for_model())[1]


def test_anthropic_json_mode_sends_no_tools_and_errors_are_model_errors(context: Context, tools, env, secret, sleeps) -> None:
    pytest.importorskip("anthropic", reason="the anthropic extra is not installed (pip install 'sr-dist[anthropic]')")
    with ScriptedAnthropicServer([anthropic_message("{}", stop_reason="max_tokens"), error(401, f"bad key {secret}")]) as server:
        model = _model(server, env, sleeps, tool_mode="json")
        response = model.call(context, tools)
        with pytest.raises(ModelError) as info:
            model.call(context, tools)
        sent = server.requests
    assert response.truncated
    assert "tools" not in sent[0].body and "tool_choice" not in sent[0].body
    assert (info.value.kind, info.value.status, info.value.attempts) == ("auth", 401, 1)
    assert secret not in str(info.value)
