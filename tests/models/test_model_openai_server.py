"""The ``openai`` provider against a real chat-completions server on 127.0.0.1.

Each test plays a script on :class:`ScriptedChatServer`, calls the model through
``build_model`` and the official SDK, and checks both what came back and what was sent.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import socket
from typing import Any

import pytest

from sr_dist.conversation import Context
from sr_dist.models import ModelError, ModelProtocol, ModelResponse, Usage, build_model
from tests.support.chat_server import (
    ScriptedChatServer,
    Step,
    StepLike,
    chat_completion,
    delayed,
    error,
    tool_call,
)


def make(server: ScriptedChatServer, env: dict[str, str], sleeps: Any = None, **options: Any) -> ModelProtocol:
    cfg = {
        "provider": "openai",
        "model": "test-model",
        "base_url": server.base_url,
        "api_key_env": "OPENAI_API_KEY",
        "retry_base_delay_s": 0.001,
        "retry_max_delay_s": 0.004,
        **options,
    }
    kwargs = {"sleep": sleeps} if sleeps is not None else {}
    return build_model(cfg, getenv=env.get, **kwargs)


def test_native_tool_calls_are_normalized_and_tools_are_sent(context: Context, tools, env, secret) -> None:
    call = tool_call("evaluate_formulas", {"formulas": ["a*x + b"]}, id="call_abc")
    with ScriptedChatServer([chat_completion(tool_calls=[call], usage=(120, 30))]) as server:
        model = make(server, env, temperature=0.3, max_tokens=256)
        response = model.call(context, tools)

    assert isinstance(model, ModelProtocol)
    assert model.name == "openai:test-model" and model.tool_mode == "native"
    assert response.tool_calls == (
        {"id": "call_abc", "type": "function", "function": {"name": "evaluate_formulas", "arguments": '{"formulas": ["a*x + b"]}'}},
    )
    assert response.text == ""
    assert response.finish_reason == "tool_calls" and not response.truncated
    assert response.usage == Usage(120, 30, 150)
    assert response.raw is not None and response.raw["choices"][0]["message"]["tool_calls"][0]["id"] == "call_abc"

    [sent] = server.requests
    assert sent.method == "POST" and sent.path == "/v1/chat/completions"
    assert sent.body == {
        "model": "test-model",
        "messages": context.messages_for_model(),
        "tools": tools,
        "tool_choice": "auto",
        "temperature": 0.3,
        "max_tokens": 256,
    }
    assert sent.headers["authorization"] == f"Bearer {secret}"
    assert sent.headers.get("x-stainless-retry-count", "0") == "0"  # the SDK's own retries are off


@pytest.mark.parametrize("mode", ["json", "text"])
def test_prompted_tool_modes_send_no_tools_and_return_the_text(context: Context, tools, env, mode: str) -> None:
    reply = 'Trying a line.\n```json\n{"tool": "evaluate_formulas", "params": {"formulas": ["a*x"]}}\n```'
    with ScriptedChatServer([chat_completion(reply)]) as server:
        model = make(server, env, tool_mode=mode)
        response = model.call(context, tools)
    assert model.tool_mode == mode
    assert response.text == reply and response.tool_calls == () and response.finish_reason == "stop"
    [sent] = server.requests
    assert "tools" not in sent.body and "tool_choice" not in sent.body
    assert "temperature" not in sent.body and "max_tokens" not in sent.body  # unset options are not sent


def test_native_mode_without_tools_sends_no_tools_key(context: Context, env) -> None:
    with ScriptedChatServer([chat_completion("hello")]) as server:
        make(server, env).call(context, [])
        make_response = server.requests[0].body
    assert "tools" not in make_response and "tool_choice" not in make_response


def test_arguments_that_are_not_json_are_passed_through_verbatim(context: Context, tools, env) -> None:
    broken = '{"formulas": ["a*x" '
    with ScriptedChatServer([chat_completion(tool_calls=[tool_call("evaluate_formulas", broken, id="c1")])]) as server:
        response = make(server, env).call(context, tools)
    assert response.tool_calls[0]["function"]["arguments"] == broken


def test_prose_without_a_call(context: Context, tools, env) -> None:
    with ScriptedChatServer([chat_completion("I think the answer is a line.")]) as server:
        response = make(server, env).call(context, tools)
    assert response == ModelResponse(text="I think the answer is a line.", usage=Usage(10, 5, 15), finish_reason="stop")


def test_length_finish_is_reported_as_truncated(context: Context, env) -> None:
    with ScriptedChatServer([chat_completion("The formula is a*x + ", finish_reason="length")]) as server:
        response = make(server, env).call(context)
    assert response.finish_reason == "length" and response.truncated


def test_429_is_retried_honouring_retry_after(context: Context, env, sleeps) -> None:
    script: list[StepLike] = [error(429, "rate limited", headers={"Retry-After": "0.25"}), chat_completion("ok")]
    with ScriptedChatServer(script) as server:
        response = make(server, env, sleeps).call(context)
        sent = server.requests
    assert response.text == "ok"
    assert len(sent) == 2 and sent[0].body == sent[1].body
    assert sleeps == [0.25]


def test_a_run_of_500s_exhausts_the_retries(context: Context, env, sleeps) -> None:
    with ScriptedChatServer([error(500, "boom")] * 5) as server:
        with pytest.raises(ModelError) as info:
            make(server, env, sleeps, max_retries=2).call(context)
        assert len(server.requests) == 3 and server.remaining == 2
    err = info.value
    assert (err.kind, err.status, err.retryable, err.attempts) == ("server_error", 500, True, 3)
    assert "boom" in str(err) and "after 3 attempts" in str(err)
    # exponential backoff from retry_base_delay_s, shortened by at most the policy's jitter
    assert len(sleeps) == 2
    assert 0.001 * 0.8 <= sleeps[0] <= 0.001 and 0.002 * 0.8 <= sleeps[1] <= 0.002


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "bad_request"), (401, "auth"), (403, "auth"), (404, "not_found"), (422, "bad_request")],
)
def test_client_errors_are_not_retried(context: Context, env, sleeps, status: int, kind: str) -> None:
    with ScriptedChatServer([error(status, "nope"), chat_completion("never")]) as server:
        with pytest.raises(ModelError) as info:
            make(server, env, sleeps).call(context)
        assert len(server.requests) == 1
    assert (info.value.kind, info.value.status, info.value.retryable, info.value.attempts) == (kind, status, False, 1)
    assert sleeps == []


@pytest.mark.parametrize("status", [408, 409, 425, 502, 503])
def test_transient_statuses_are_retried(context: Context, env, sleeps, status: int) -> None:
    with ScriptedChatServer([error(status, "later"), chat_completion("ok")]) as server:
        assert make(server, env, sleeps).call(context).text == "ok"
        assert len(server.requests) == 2


def test_the_api_key_never_appears_in_errors_or_repr(context: Context, env, secret) -> None:
    echo = f"Incorrect API key provided: {secret}. You can find your key at ..."
    with ScriptedChatServer([error(401, echo)]) as server:
        model = make(server, env)
        with pytest.raises(ModelError) as info:
            model.call(context)
    err = info.value
    for text in (str(err), repr(err), err.message, repr(model), str(pickle.loads(pickle.dumps(err)))):
        assert secret not in text
    assert "Incorrect API key provided" in str(err)


def test_a_reply_slower_than_the_timeout(context: Context, env, sleeps) -> None:
    with ScriptedChatServer([delayed(5.0, chat_completion("too late"))]) as server:
        with pytest.raises(ModelError) as info:
            make(server, env, sleeps, timeout_s=0.2, max_retries=0).call(context)
        assert len(server.requests) == 1
    assert (info.value.kind, info.value.retryable, info.value.attempts) == ("timeout", True, 1)
    assert "0.2 s" in str(info.value)


def test_a_timeout_is_retried(context: Context, env, sleeps) -> None:
    with ScriptedChatServer([delayed(5.0, chat_completion("too late")), chat_completion("in time")]) as server:
        response = make(server, env, sleeps, timeout_s=0.2, max_retries=1).call(context)
        assert len(server.requests) == 2
    assert response.text == "in time" and len(sleeps) == 1


def test_connection_refused_is_a_retried_connection_error(context: Context, env, sleeps) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago, and now has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = {
        "provider": "openai",
        "model": "m",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "api_key_env": None,
        "max_retries": 1,
        "retry_base_delay_s": 0.001,
    }
    with pytest.raises(ModelError) as info:
        build_model(cfg, sleep=sleeps).call(context)
    assert (info.value.kind, info.value.attempts) == ("connection", 2)
    assert f"127.0.0.1:{port}" in str(info.value)


def test_an_error_object_in_a_200_reply_is_retried(context: Context, env, sleeps) -> None:
    gateway_error = {"error": {"code": 502, "message": "upstream provider failed"}}
    with ScriptedChatServer([gateway_error, chat_completion("ok")]) as server:
        assert make(server, env, sleeps).call(context).text == "ok"
        assert len(server.requests) == 2


@pytest.mark.parametrize(
    "body",
    [Step(body="<html>gateway</html>"), {"id": "x", "choices": []}, {"unexpected": True}],
    ids=["not-json", "no-choices", "no-fields"],
)
def test_unusable_replies_are_bad_response_errors(context: Context, env, body: Any) -> None:
    with ScriptedChatServer([body]) as server:
        with pytest.raises(ModelError) as info:
            make(server, env).call(context)
        assert len(server.requests) == 1
    assert info.value.kind == "bad_response" and not info.value.retryable


def test_servers_without_an_api_key_get_a_placeholder(context: Context) -> None:
    with ScriptedChatServer([chat_completion("hi")]) as server:
        model = build_model({"provider": "openai", "model": "local", "base_url": server.base_url, "api_key_env": None}, getenv=lambda name: None)
        assert model.call(context).text == "hi"
        assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_usage_adds_up_and_missing_usage_is_zero(context: Context, env) -> None:
    script = [chat_completion("a", usage=(100, 10)), chat_completion("b", usage=(150, 20)), chat_completion("c", usage=None)]
    with ScriptedChatServer(script) as server:
        model = make(server, env)
        usages = [model.call(context).usage for _ in range(3)]
    assert usages[2] == Usage()
    assert sum(usages, Usage()) == Usage(250, 30, 280)


def test_acall_runs_concurrently_inside_an_event_loop(context: Context, env) -> None:
    with ScriptedChatServer([chat_completion(f"reply {i}") for i in range(3)]) as server:
        model = make(server, env)

        async def main() -> list[ModelResponse]:
            return list(await asyncio.gather(*(model.acall(context) for _ in range(3))))

        responses = asyncio.run(main())
        assert len(server.requests) == 3
    assert sorted(r.text for r in responses) == ["reply 0", "reply 1", "reply 2"]


def test_acall_retries_and_raises_model_error(context: Context, env, sleeps) -> None:
    with ScriptedChatServer([error(503, "down")] * 2) as server:
        model = make(server, env, sleeps, max_retries=1)
        with pytest.raises(ModelError) as info:
            asyncio.run(model.acall(context))
    assert (info.value.kind, info.value.attempts) == ("server_error", 2)


def test_malformed_messages_are_a_model_error_not_a_crash(env) -> None:
    bad = Context(messages=[{"role": "user", "content": object()}])
    with ScriptedChatServer([chat_completion("never")]) as server:
        with pytest.raises(ModelError) as info:
            make(server, env).call(bad)
        assert server.requests == []
    assert info.value.kind == "bad_request"


def test_responses_feed_the_parsers(context: Context, tools, env) -> None:
    """The agent's path: native calls through the ``openai`` parser, text through ``json``."""
    parsers = pytest.importorskip("sr_dist.parsers")
    good = tool_call("evaluate_formulas", {"formulas": ["a*x"]}, id="c1")
    broken = tool_call("evaluate_formulas", '{"formulas": [', id="c2")
    json_reply = '{"tool": "evaluate_formulas", "params": {"formulas": ["a*x"]}}'
    with ScriptedChatServer([chat_completion(tool_calls=[good, broken]), chat_completion(json_reply)]) as server:
        native = make(server, env).call(context, tools)
        prompted = make(server, env, tool_mode="json").call(context, tools)
    parsed = parsers.get_parser("openai").parse(native.text, native_calls=native.tool_calls)
    assert [c.name for c in parsed.calls] == ["evaluate_formulas"]
    assert dict(parsed.calls[0].arguments) == {"formulas": ["a*x"]}
    assert len(parsed.errors) == 1  # the unreadable arguments are reported to the model
    # One outcome per native call, in order, each under the id the provider gave it.
    assert [type(o).__name__ for o in parsed.outcomes] == ["ToolCall", "UnreadableCall"]
    assert [o.id for o in parsed.outcomes] == ["c1", "c2"]
    unreadable = parsed.outcomes[1]
    assert isinstance(unreadable, parsers.UnreadableCall) and unreadable.name == "evaluate_formulas"
    assert "(id c2)" in unreadable.reason and parsed.problems == ()
    from_text = parsers.get_parser("json").parse(prompted.text)
    assert [(c.name, dict(c.arguments)) for c in from_text.calls] == [("evaluate_formulas", {"formulas": ["a*x"]})]


def test_the_server_lists_models_and_records_every_request() -> None:
    import urllib.request

    with ScriptedChatServer(models=("m1", "m2")) as server:
        with urllib.request.urlopen(server.base_url + "/models", timeout=5) as reply:
            listing = json.load(reply)
        assert [m["id"] for m in listing["data"]] == ["m1", "m2"]
        assert [(r.method, r.path) for r in server.requests] == [("GET", "/v1/models")]
        assert server.completion_requests == []
