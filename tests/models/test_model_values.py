"""The pure core: response values, errors, the retry policy, and reading chat completions."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest

from sr_dist.models import ModelError, ModelResponse, RetryPolicy, Usage
from sr_dist.models.openai_compat import OpenAIConfig, build_chat_request, parse_chat_completion
from sr_dist.models.retry import call_with_retries, classify_status, parse_retry_after
from tests.support.chat_server import chat_completion, tool_call


def test_usage_adds_and_fills_a_missing_total() -> None:
    assert Usage(1, 2, 3) + Usage(10, 20, 30) == Usage(11, 22, 33)
    assert Usage.of(7, None) == Usage(7, 0, 7)
    assert Usage.from_dict({"prompt_tokens": 4, "completion_tokens": 1}) == Usage(4, 1, 5)
    assert Usage.from_dict(None) == Usage()


def test_model_response_is_frozen_owns_its_calls_and_round_trips() -> None:
    calls: list[dict[str, Any]] = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    response = ModelResponse(text="t", tool_calls=calls, usage=Usage(1, 1, 2), finish_reason="tool_calls", raw={"big": 1})  # type: ignore[arg-type]
    calls[0]["function"]["name"] = "changed"
    assert response.tool_calls[0]["function"]["name"] == "f"
    with pytest.raises(dataclasses.FrozenInstanceError):
        response.text = "x"  # type: ignore[misc]
    again = ModelResponse.from_dict(response.to_dict())
    assert again == response and again.raw is None  # raw takes no part in equality
    assert not response.truncated and ModelResponse(finish_reason="length").truncated


def test_model_error_survives_pickling_and_reports_attempts() -> None:
    err = ModelError("boom", kind="server_error", status=503, retryable=True, retry_after_s=2.0).with_attempts(3)
    back = pickle.loads(pickle.dumps(err))
    assert (back.message, back.kind, back.status, back.retryable, back.attempts, back.retry_after_s) == ("boom", "server_error", 503, True, 3, 2.0)
    assert str(back) == "boom [server_error, HTTP 503, after 3 attempts]"


#: (attempt, retry_after_s, rand) -> seconds, for RetryPolicy(base 0.5, cap 8, jitter 0.2, retry-after cap 60)
DELAYS = [
    (1, None, 0.0, 0.5),
    (2, None, 0.0, 1.0),
    (3, None, 0.0, 2.0),
    (6, None, 0.0, 8.0),  # capped
    (2, None, 0.5, 0.9),  # jitter shortens by up to 20 %
    (2, 3.0, 0.9, 3.0),  # the server's hint wins, without jitter
    (1, 500.0, 0.0, 60.0),  # ... but is capped
    (1, 0.0, 0.0, 0.0),
]


@pytest.mark.parametrize(("attempt", "retry_after", "rand", "expected"), DELAYS)
def test_backoff_delays(attempt: int, retry_after: float | None, rand: float, expected: float) -> None:
    assert RetryPolicy().delay_s(attempt, retry_after, rand) == pytest.approx(expected)


def test_policy_rejects_nonsense() -> None:
    for bad in ({"max_attempts": 0}, {"base_delay_s": -1}, {"jitter": 1.5}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)  # type: ignore[arg-type]
    assert RetryPolicy.from_retries(2).max_attempts == 3


STATUSES = [
    (400, "bad_request", False),
    (401, "auth", False),
    (403, "auth", False),
    (404, "not_found", False),
    (408, "timeout", True),
    (409, "transient", True),
    (413, "bad_request", False),
    (422, "bad_request", False),
    (425, "transient", True),
    (429, "rate_limited", True),
    (500, "server_error", True),
    (503, "server_error", True),
    (529, "server_error", True),
]


@pytest.mark.parametrize(("status", "kind", "retryable"), STATUSES)
def test_status_classification(status: int, kind: str, retryable: bool) -> None:
    assert classify_status(status) == (kind, retryable)


NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
RETRY_AFTER = [
    ({"Retry-After": "3"}, 3.0),
    ({"retry-after": "0.25"}, 0.25),
    ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
    ({"Retry-After": "Wed, 01 Jan 2025 12:00:30 GMT"}, 30.0),
    ({"Retry-After": "Wed, 01 Jan 2025 11:00:00 GMT"}, 0.0),  # in the past: go now
    ({"Retry-After": "soon"}, None),
    ({"Retry-After": "-4"}, None),
    ({}, None),
]


@pytest.mark.parametrize(("headers", "expected"), RETRY_AFTER)
def test_retry_after_parsing(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


def test_retry_loop_stops_on_success_or_a_permanent_error() -> None:
    outcomes: list[Any] = [
        ModelError("a", kind="rate_limited", retryable=True, retry_after_s=1.5),
        ModelError("b", kind="server_error", retryable=True),
        "done",
    ]
    sleeps: list[float] = []

    def attempt() -> str:
        item = outcomes.pop(0)
        if isinstance(item, ModelError):
            raise item
        return item

    policy = RetryPolicy(max_attempts=5, base_delay_s=0.1, jitter=0.0)
    assert call_with_retries(attempt, policy, sleep=sleeps.append) == "done"
    assert sleeps == [1.5, 0.2]

    outcomes[:] = [ModelError("no", kind="auth", status=401)]
    with pytest.raises(ModelError) as info:
        call_with_retries(attempt, policy, sleep=sleeps.append)
    assert info.value.attempts == 1 and sleeps == [1.5, 0.2]


def _msg(**message: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}]}


#: chat completion body -> (text, [(name, arguments)], finish_reason) or the ModelError kind it raises
COMPLETIONS: list[tuple[str, Any, Any]] = [
    ("text", chat_completion("hi"), ("hi", [], "stop")),
    ("tool-calls", chat_completion(tool_calls=[tool_call("f", {"a": 1}), tool_call("g", {})]), ("", [("f", '{"a": 1}'), ("g", "{}")], "tool_calls")),
    ("bad-arguments-verbatim", chat_completion(tool_calls=[tool_call("f", "{'a': 1")]), ("", [("f", "{'a': 1")], "tool_calls")),
    ("object-arguments-serialised", _msg(tool_calls=[{"id": "1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]), ("", [("f", '{"a": 1}')], "stop")),
    ("missing-arguments", _msg(tool_calls=[{"id": "1", "function": {"name": "f"}}]), ("", [("f", "{}")], "stop")),
    ("content-parts", _msg(content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]), ("ab", [], "stop")),
    (
        "legacy-function-call",
        {"choices": [{"message": {"content": None, "function_call": {"name": "f", "arguments": "{}"}}, "finish_reason": "function_call"}]},
        ("", [("f", "{}")], "tool_calls"),
    ),
    ("length", chat_completion("cut", finish_reason="length"), ("cut", [], "length")),
    ("no-choices", {"choices": []}, "bad_response"),
    ("not-an-object", ["x"], "bad_response"),
    ("error-in-200", {"error": {"message": "upstream", "code": 429}}, "rate_limited"),
    ("error-without-code", {"error": {"message": "upstream"}}, "server_error"),
]


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in COMPLETIONS], ids=[c[0] for c in COMPLETIONS])
def test_reading_chat_completions(body: Any, expected: Any) -> None:
    if isinstance(expected, str):
        with pytest.raises(ModelError) as info:
            parse_chat_completion(body)
        assert info.value.kind == expected
        return
    response = parse_chat_completion(body)
    text, calls, finish = expected
    assert response.text == text and response.finish_reason == finish
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in response.tool_calls] == calls
    for call in response.tool_calls:
        assert call["type"] == "function" and isinstance(call["id"], str) and call["id"]


def test_generated_call_ids_are_unique() -> None:
    body = _msg(tool_calls=[{"function": {"name": "f", "arguments": "{}"}}] * 3)
    ids = [c["id"] for c in parse_chat_completion(body).tool_calls]
    assert len(set(ids)) == 3


def test_request_body_by_tool_mode() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    messages = [{"role": "user", "content": "x"}]
    native = build_chat_request(OpenAIConfig(model="m"), messages, tools)
    assert native == {"model": "m", "messages": messages, "tools": tools, "tool_choice": "auto"}
    for mode in ("json", "text"):
        assert build_chat_request(OpenAIConfig(model="m", tool_mode=mode), messages, tools) == {"model": "m", "messages": messages}
