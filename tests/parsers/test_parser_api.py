"""The parser API around ``parse``: lookup, tool prompts, result messages, history, ids."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from sr_dist.parsers import (
    PARSER_NAMES,
    BaseParser,
    JsonParser,
    OpenAIParser,
    ParseResult,
    SpecLike,
    TextParser,
    get_parser,
    normalize_spec,
    openai_tools,
)
from sr_dist.parsers._support import MAX_ERRORS, assign_ids
from sr_dist.tools.types import ToolCall, ToolCallResult, ToolSpec

FIT_SCHEMA = {
    "type": "object",
    "properties": {
        "formulas": {"type": "array", "items": {"type": "string"}, "description": "Candidates."},
        "restarts": {"type": "integer"},
        "name": {"type": "string"},
    },
    "required": ["formulas", "restarts"],
}
SPECS: list[SpecLike] = [
    ToolSpec("evaluate_formulas", "Fit constants and score formulas.", FIT_SCHEMA),
    {"name": "describe_data", "description": "Summarize the dataset.", "parameters": {"type": "object", "properties": {}}},
]


def ok(text: str) -> ToolCallResult:
    return ToolCallResult(ok=True, result={"observation": text}, result_str=text, meta_data={"tool": "t"})


def failed(reason: str, kind: str) -> ToolCallResult:
    return ToolCallResult(ok=False, result=None, result_str=reason, meta_data={"tool": "t", "error_kind": kind})


# ------------------------------------------------------------------------------- get_parser


@pytest.mark.parametrize(("name", "cls"), [("openai", OpenAIParser), ("json", JsonParser), ("text", TextParser)])
def test_get_parser_returns_each_format(name: str, cls: type) -> None:
    parser = get_parser(name)
    assert isinstance(parser, cls) and isinstance(parser, BaseParser)
    assert parser.name == name


def test_parser_names_listed() -> None:
    assert set(PARSER_NAMES) == {"openai", "json", "text"}


@pytest.mark.parametrize("bad", ["xml", "JSON", "", None, 3])
def test_get_parser_rejects_unknown_names(bad: Any) -> None:
    with pytest.raises(ValueError, match="openai, json, text"):
        get_parser(bad)


def test_get_parser_passes_and_checks_options() -> None:
    fallback, plain = get_parser("openai", text_fallback=True), get_parser("openai")
    assert isinstance(fallback, OpenAIParser) and isinstance(plain, OpenAIParser)
    assert fallback.text_fallback is True and plain.text_fallback is False
    with pytest.raises(ValueError, match="text_fallback"):
        get_parser("json", text_fallback=True)


# ------------------------------------------------------------------------------- format_tools


def test_openai_format_tools_is_empty_but_checks_specs() -> None:
    assert get_parser("openai").format_tools(SPECS) == ""
    with pytest.raises(ValueError, match="name"):
        get_parser("openai").format_tools([{"description": "no name"}])


@pytest.mark.parametrize("name", ["json", "text"])
def test_prompted_format_tools_lists_every_tool_and_schema(name: str) -> None:
    prompt = get_parser(name).format_tools(SPECS)
    for spec in map(normalize_spec, SPECS):
        assert f"### {spec.name}" in prompt
        assert spec.description in prompt
        assert json.dumps(dict(spec.parameters)) in prompt
    syntax = '"tool"' if name == "json" else "Action:"
    assert syntax in prompt


@pytest.mark.parametrize("name", ["json", "text"])
def test_format_tools_accepts_specs_dicts_and_openai_wrappers(name: str) -> None:
    parser = get_parser(name)
    as_specs = [normalize_spec(s) for s in SPECS]
    as_dicts = [s.to_dict() for s in as_specs]
    as_openai = openai_tools(as_specs)
    assert parser.format_tools(as_specs) == parser.format_tools(as_dicts) == parser.format_tools(as_openai)


@pytest.mark.parametrize("name", ["openai", "json", "text"])
def test_format_tools_of_nothing_is_empty(name: str) -> None:
    assert get_parser(name).format_tools([]) == ""


@pytest.mark.parametrize(
    "bad",
    [{"name": ""}, {"name": "x", "parameters": [1]}, {"name": "x", "description": 5}, "evaluate", 7],
)
def test_malformed_specs_are_refused(bad: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        get_parser("json").format_tools([bad])


@pytest.mark.parametrize(("name", "expected_calls"), [("json", 1), ("text", 2)])
def test_the_prompt_example_parses_back_to_a_valid_call(name: str, expected_calls: int) -> None:
    """The syntax the prompt teaches is exactly what the parser reads, with schema-valid arguments."""
    parser = get_parser(name)
    result = parser.parse(parser.format_tools(SPECS))
    assert result.errors == ()
    assert len(result.calls) == expected_calls
    for call in result.calls:
        assert call.name == "evaluate_formulas"
        jsonschema.validate(dict(call.arguments), FIT_SCHEMA)


def test_openai_tools_shape() -> None:
    tools = openai_tools(SPECS)
    assert tools[0] == {
        "type": "function",
        "function": {"name": "evaluate_formulas", "description": "Fit constants and score formulas.", "parameters": FIT_SCHEMA},
    }
    assert tools[1]["function"]["name"] == "describe_data"


# ------------------------------------------------------------------------------- result_messages

CALLS = (ToolCall("fit", {"f": "x"}, id="call_a"), ToolCall("describe", {}, id="call_b"))
RESULTS = (ok("nmse=0.01"), failed("timed out after 5 s", "timeout"))


def test_openai_result_messages_answer_each_tool_call_id() -> None:
    messages = get_parser("openai").result_messages(CALLS, RESULTS)
    assert messages == [
        {"role": "tool", "tool_call_id": "call_a", "content": "nmse=0.01"},
        {"role": "tool", "tool_call_id": "call_b", "content": "ERROR (timeout): timed out after 5 s"},
    ]


def test_openai_result_messages_append_parse_errors_as_a_user_message() -> None:
    messages = get_parser("openai").result_messages(CALLS[:1], RESULTS[:1], errors=["Tool call #2 was bad."])
    assert [m["role"] for m in messages] == ["tool", "user"]
    assert "Tool call #2 was bad." in messages[1]["content"]


def test_failure_without_reason_or_kind_is_still_explicit() -> None:
    bare = ToolCallResult(ok=False, result=None, result_str="  ", meta_data={})
    content = get_parser("openai").result_messages([ToolCall("t", {}, id="x")], [bare])[0]["content"]
    assert content.startswith("ERROR (tool_error): ") and "without giving a reason" in content


@pytest.mark.parametrize("name", ["json", "text"])
def test_prompted_result_messages_are_one_user_message(name: str) -> None:
    messages = get_parser(name).result_messages(CALLS, RESULTS, errors=["The Action at line 3 could not be read."])
    assert len(messages) == 1 and messages[0]["role"] == "user"
    content = messages[0]["content"]
    assert "[call_a] fit: ok\nnmse=0.01" in content
    assert "[call_b] describe: failed\nERROR (timeout): timed out after 5 s" in content
    assert content.index("call_a") < content.index("call_b")
    assert "- The Action at line 3 could not be read." in content


@pytest.mark.parametrize("name", ["openai", "json", "text"])
def test_no_calls_no_errors_no_messages(name: str) -> None:
    assert get_parser(name).result_messages([], []) == []


@pytest.mark.parametrize("name", ["openai", "json", "text"])
def test_result_messages_need_one_result_per_call(name: str) -> None:
    with pytest.raises(ValueError, match="pair up"):
        get_parser(name).result_messages(CALLS, RESULTS[:1])


@pytest.mark.parametrize("name", ["openai", "json", "text"])
def test_calls_without_ids_are_answered_by_position(name: str) -> None:
    calls = [ToolCall("a", {}), ToolCall("b", {})]
    messages = get_parser(name).result_messages(calls, [ok("1"), ok("2")])
    text = json.dumps(messages)
    assert "call_0" in text and "call_1" in text


# ------------------------------------------------------------------------------- history


def test_openai_assistant_message_round_trips_through_parse() -> None:
    parser = get_parser("openai")
    result = parser.parse("thinking", [{"id": "c7", "type": "function", "function": {"name": "fit", "arguments": '{"k": [1, 2]}'}}])
    message = parser.assistant_message("thinking", result.calls)
    assert message["role"] == "assistant" and message["content"] == "thinking"
    assert message["tool_calls"][0]["id"] == "c7"
    again = parser.parse(message["content"], message["tool_calls"])
    assert again == result


def test_openai_assistant_message_keeps_native_calls_as_sent() -> None:
    """The history shows what the model wrote, broken arguments included, under the ids parse returned."""
    parser = get_parser("openai")
    native = [
        {"id": "c1", "type": "function", "function": {"name": "fit", "arguments": '{"k":1}'}},
        {"id": "c2", "type": "function", "function": {"name": "fit", "arguments": '{"k": '}},
    ]
    result = parser.parse("", native)
    message = parser.assistant_message("", result.outcomes, native_calls=native)
    assert message["tool_calls"] == native and message["tool_calls"][0] is not native[0]
    assert [c["id"] for c in message["tool_calls"]] == [o.id for o in result.outcomes]


def test_openai_assistant_message_renders_unreadable_text_calls_under_their_ids() -> None:
    parser = get_parser("openai", text_fallback=True)
    result = parser.parse('{"tool": "a", "params": {"k": 1}} {"tool": "b", "params": [1]}')
    assert [type(o).__name__ for o in result.outcomes] == ["ToolCall", "UnreadableCall"]
    message = parser.assistant_message("text", result.outcomes)
    assert message["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "a", "arguments": '{"k": 1}'}},
        {"id": "call_1", "type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]


def test_only_openai_answers_each_call_in_its_own_message() -> None:
    assert get_parser("openai").answers_each_call is True
    assert get_parser("json").answers_each_call is False and get_parser("text").answers_each_call is False


def test_openai_assistant_message_without_calls_keeps_its_text_as_a_string() -> None:
    assert get_parser("openai").assistant_message("", []) == {"role": "assistant", "content": ""}
    assert get_parser("openai").assistant_message("prose", []) == {"role": "assistant", "content": "prose"}
    with_call = get_parser("openai").assistant_message("", [ToolCall("a", id="c1")])
    assert with_call["content"] is None and with_call["tool_calls"][0]["id"] == "c1"


@pytest.mark.parametrize("name", ["json", "text"])
def test_prompted_assistant_message_keeps_text(name: str) -> None:
    assert get_parser(name).assistant_message("Action: a()", [ToolCall("a")]) == {"role": "assistant", "content": "Action: a()"}


def test_errors_message() -> None:
    parser = get_parser("text")
    assert parser.errors_message([]) is None
    message = parser.errors_message(["bad one", "bad two"])
    assert message is not None and message["role"] == "user"
    assert "- bad one\n- bad two" in message["content"]


# ------------------------------------------------------------------------------- ids


def test_assigned_ids_never_collide_with_given_ones() -> None:
    calls = assign_ids([ToolCall("a"), ToolCall("b", id="call_0"), ToolCall("c"), ToolCall("d", id="call_2")])
    ids = [c.id for c in calls]
    assert ids[1] == "call_0" and ids[3] == "call_2"
    assert len(set(ids)) == 4 and all(ids)


def test_text_calls_get_positional_ids() -> None:
    result = get_parser("text").parse("Action: a()\nAction: b()\nAction: c()")
    assert [c.id for c in result.calls] == ["call_0", "call_1", "call_2"]


# ------------------------------------------------------------------------------- never raises


class _Exploding:
    """An SDK-like call object whose attribute access fails, as a broken provider object might."""

    type = "function"
    id = "boom"

    @property
    def function(self) -> Any:
        raise RuntimeError("provider object is broken")


def test_a_broken_native_object_is_an_error_and_the_rest_still_parse() -> None:
    native = [{"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}}, _Exploding()]
    result = get_parser("openai").parse("", native)
    assert [c.id for c in result.calls] == ["c1"]
    assert len(result.errors) == 1 and "#2" in result.errors[0]


class _BuggyParser(BaseParser):
    name = "buggy"

    def format_tools(self, specs: Any) -> str:
        return ""

    def _parse(self, text: str, native_calls: Sequence[Any] | None) -> ParseResult:
        raise KeyError("a bug")

    def result_messages(self, calls: Any, results: Any, *, errors: Any = ()) -> list[dict[str, Any]]:
        return []


def test_parse_turns_an_internal_bug_into_an_error() -> None:
    result = _BuggyParser().parse("anything")
    assert result.calls == () and len(result.errors) == 1 and "KeyError" in result.errors[0]


def test_an_internal_bug_still_answers_every_native_call_by_id() -> None:
    """The loop answers native calls by id, so even a parser bug leaves none unanswered."""
    result = _BuggyParser().parse("anything", [{"id": "n1", "function": {}}, {"id": " "}, 7])
    assert [(type(o).__name__, o.id) for o in result.outcomes] == [
        ("UnreadableCall", "n1"),
        ("UnreadableCall", "call_1"),
        ("UnreadableCall", "call_2"),
    ]
    assert all("KeyError" in u.reason for u in result.unreadable) and result.problems == ()


def test_a_refused_reply_text_still_reads_the_native_calls() -> None:
    native = [{"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}}]
    result = get_parser("json").parse(12345, native)
    assert [c.id for c in result.calls] == ["c1"]
    assert len(result.problems) == 1 and "not str" in result.problems[0]


def test_action_values_are_never_evaluated(tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    text = f"Action: fit(a=open({str(marker)!r}, 'w').write('x'))\nAction: fit(b=__import__('os').system('touch {marker}'))"
    result = get_parser("text").parse(text)
    assert result.calls == () and len(result.errors) == 2
    assert not marker.exists()


def test_error_count_is_capped_with_a_summary() -> None:
    result = get_parser("text").parse("Action: oops\n" * (MAX_ERRORS + 5))
    assert len(result.errors) == MAX_ERRORS + 1
    assert "5 more" in result.errors[-1]


def test_parse_result_is_frozen() -> None:
    result = ParseResult()
    with pytest.raises(AttributeError):
        result.calls = (ToolCall("x"),)  # type: ignore[misc]
    assert result.ok and not ParseResult(problems=("e",)).ok
