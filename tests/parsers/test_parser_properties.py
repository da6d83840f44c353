"""Property tests: the parsers never raise on any input, and every format round-trips its calls."""

from __future__ import annotations

import json
import keyword
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sr_dist.parsers import ParseResult, UnreadableCall, get_parser
from sr_dist.tools.types import ToolCall

PARSERS = [get_parser("openai"), get_parser("openai", text_fallback=True), get_parser("json"), get_parser("text")]

# Pieces of almost-calls: a random sequence of them is call-shaped text that is rarely valid.
FRAGMENTS = [
    "{", "}", "[", "]", "(", ")", '"', "'", '"""', "'''", "\\", ":", ",", "=", "\n", " ", "**",
    "true", "null", "NaN", "1e999", "-0", "9" * 40, "x*y",
    '{"tool": ', '{"name": "fit", "arguments": ', '"params": ', '"arguments": "', '{"tool": "fit", "params": {',
    '"id": ', '"type": "function"', '"function": {',
    "Action:", "Action: fit(", "Action: fit(a=", "**Action:** ", "Action: fit()", "a=[", "b={'k': ",
    "<tool_call>", "</tool_call>", "<TOOL_CALL >", "```json\n", "```\n", "~~~\n", "```python\n",
]

near_miss_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=40).map("".join)

# Deep nesting in every syntax the parsers read.
deep_text = st.builds(
    lambda prefix, opener, depth, suffix: prefix + opener * depth + suffix,
    st.sampled_from(["", "```json\n", "<tool_call>", "Action: fit(a=", '{"tool": "a", "params": ', "Action: f"]),
    st.sampled_from(["[", "{", "(", '{"k": ', "[{", '"', "{'a': "]),
    st.integers(min_value=1, max_value=3000),
    st.sampled_from(["", "]", "}", ")", "</tool_call>", "\n```"]),
)

any_text = st.one_of(st.text(max_size=300), near_miss_text, deep_text)

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**12), 10**12), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)

# Whatever a provider (or a broken adapter) might hand over as native calls.
native_item = st.one_of(
    json_value,
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["function", "custom", None]),
            "function": st.one_of(
                json_value,
                st.fixed_dictionaries(
                    {
                        "name": st.one_of(st.text(max_size=8), json_value),
                        "arguments": st.one_of(json_value.map(json.dumps), json_value, any_text),
                    }
                ),
            ),
        },
        optional={"id": json_value},
    ),
)
native_calls = st.one_of(st.none(), json_value, st.lists(native_item, max_size=4))


def check_shape(result: Any) -> None:
    assert isinstance(result, ParseResult)
    assert isinstance(result.calls, tuple) and isinstance(result.errors, tuple)
    for call in result.calls:
        assert isinstance(call, ToolCall)
        assert isinstance(call.name, str) and call.name.strip() == call.name and call.name
        assert isinstance(call.arguments, dict) and all(isinstance(k, str) for k in call.arguments)
        json.dumps(call.arguments)  # plain JSON data, nothing else
        assert isinstance(call.id, str) and call.id
    assert len({c.id for c in result.calls}) == len(result.calls)
    for outcome in result.outcomes:
        assert isinstance(outcome, (ToolCall, UnreadableCall))
        if isinstance(outcome, UnreadableCall):
            assert outcome.name is None or (isinstance(outcome.name, str) and outcome.name.strip())
            assert isinstance(outcome.reason, str) and outcome.reason.strip()
    ids = [o.id for o in result.outcomes]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids), ids
    for error in result.errors:
        assert isinstance(error, str) and error.strip()
        # The catch-all in BaseParser.parse is a last resort: the parsers themselves must not raise.
        assert "internal parser error" not in error, error


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text, native=native_calls)
def test_parse_never_raises_and_returns_well_formed_results(text: str, native: Any) -> None:
    for parser in PARSERS:
        first = parser.parse(text, native)
        check_shape(first)
        assert parser.parse(text, native) == first  # no hidden state between calls


@settings(max_examples=200, deadline=None)
@given(items=st.lists(native_item, max_size=6))
def test_every_native_call_gets_exactly_one_outcome_under_its_id(items: list[Any]) -> None:
    """The loop answers native calls by id, so none may be dropped, merged or renamed."""
    native = [{**item, "id": f"n{i}"} if isinstance(item, dict) else item for i, item in enumerate(items)]
    result = get_parser("openai").parse("", native)
    assert len(result.outcomes) == len(native)
    for i, (item, outcome) in enumerate(zip(native, result.outcomes)):
        assert outcome.id == (f"n{i}" if isinstance(item, dict) else f"call_{i}")


@settings(max_examples=100, deadline=None)
@given(junk=st.one_of(st.binary(max_size=50), st.integers(), st.floats(), st.lists(st.integers(), max_size=3)))
def test_parse_never_raises_on_non_text(junk: Any) -> None:
    for parser in PARSERS:
        check_shape(parser.parse(junk, junk))


# ----------------------------------------------------------------------------- round trips

tool_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
py_key = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True).filter(lambda k: not keyword.iskeyword(k))
arguments = st.dictionaries(py_key, json_value, max_size=4)
calls_strategy = st.lists(st.tuples(tool_name, arguments), min_size=1, max_size=4)
# Prose between calls: no braces, backticks, tags or Action lines, so it is plain reasoning.
prose = st.text(alphabet=st.characters(exclude_characters="{}`<>\r", exclude_categories=["Cs"]), max_size=40).filter(
    lambda s: "Action" not in s
)


def same_json(a: Any, b: Any) -> bool:
    """Equality that also holds for -0.0 vs 0.0 and int-valued floats written as ints by repr."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=0, abs_tol=0)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def assert_round_trip(result: ParseResult, calls: list[tuple[str, dict[str, Any]]]) -> None:
    assert result.errors == ()
    assert [c.name for c in result.calls] == [name for name, _ in calls]
    for call, (_, args) in zip(result.calls, calls):
        assert same_json(dict(call.arguments), args), (call.arguments, args)
    assert [c.id for c in result.calls] == [f"call_{i}" for i in range(len(calls))]


@settings(max_examples=150, deadline=None)
@given(calls=calls_strategy, gaps=st.lists(prose, min_size=5, max_size=5), fenced=st.booleans(), key=st.sampled_from(["tool", "name"]))
def test_json_round_trip(calls: list[tuple[str, dict[str, Any]]], gaps: list[str], fenced: bool, key: str) -> None:
    args_key = "params" if key == "tool" else "arguments"
    parts = []
    for i, (name, args) in enumerate(calls):
        obj = json.dumps({key: name, args_key: args})
        parts.append(gaps[i % len(gaps)])
        parts.append(f"\n```json\n{obj}\n```\n" if fenced else f" {obj} ")
    assert_round_trip(get_parser("json").parse("".join(parts)), calls)


@settings(max_examples=150, deadline=None)
@given(calls=calls_strategy, gaps=st.lists(prose, min_size=5, max_size=5), style=st.sampled_from(["json", "python", "block"]))
def test_text_round_trip(calls: list[tuple[str, dict[str, Any]]], gaps: list[str], style: str) -> None:
    lines = []
    for i, (name, args) in enumerate(calls):
        lines.append(gaps[i % len(gaps)].replace("\n", " "))
        if style == "block":
            lines.append("<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>")
        else:
            render = json.dumps if style == "json" else repr
            lines.append(f"Action: {name}(" + ", ".join(f"{k}={render(v)}" for k, v in args.items()) + ")")
    assert_round_trip(get_parser("text").parse("\n".join(lines)), calls)


@settings(max_examples=100, deadline=None)
@given(calls=calls_strategy, ids=st.booleans())
def test_openai_round_trip_through_history(calls: list[tuple[str, dict[str, Any]]], ids: bool) -> None:
    parser = get_parser("openai")
    native = [
        {"type": "function", "function": {"name": name, "arguments": json.dumps(args)}, **({"id": f"x{i}"} if ids else {})}
        for i, (name, args) in enumerate(calls)
    ]
    result = parser.parse(None, native)
    assert result.errors == ()
    assert [(c.name, c.arguments) for c in result.calls] == [(n, a) for n, a in calls]
    assert [c.id for c in result.calls] == [f"x{i}" if ids else f"call_{i}" for i in range(len(calls))]
    message = parser.assistant_message(None, result.calls)
    assert parser.parse(None, message["tool_calls"]) == result


def test_calls_that_repeat_an_id_get_unique_ones() -> None:
    """Found by the property above: two unreadable native calls sent with the same id."""
    parser = get_parser("openai")
    native = [{"type": "function", "function": None, "id": "0"},
              {"type": "function", "function": None, "id": "0"},
              {"type": "function", "function": {"name": "f", "arguments": "{}"}, "id": "0"}]
    ids = [o.id for o in parser.parse("", native_calls=native).outcomes]
    assert ids[0] == "0" and len(set(ids)) == 3, ids
