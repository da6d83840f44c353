"""The three tool-call parsers under hostile replies: errors as values, nothing executed.

tests/parsers proves ``parse`` never raises. Here every parse runs under the audit guard with
payloads planted where each format carries arguments (JSON strings, bare Python in ``Action:``
calls, ``<tool_call>`` blocks, native ``arguments`` strings), and every string the parsers hand
on is then read by ``parse_formula`` (what ``evaluate_formulas`` does first) under the guard too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sr_dist.formula import FormulaError, parse_formula
from sr_dist.parsers import ParseResult, get_parser
from tests.robustness.guard import PAYLOADS, assert_no_sentinel, watching

PARSERS = {
    "openai": get_parser("openai"),
    "openai+text": get_parser("openai", text_fallback=True),
    "json": get_parser("json"),
    "text": get_parser("text"),
}
VARIABLES = ("x", "y")


def _wrap(payload: str, style: str) -> tuple[str, list[dict[str, Any]] | None]:
    """Plant ``payload`` in one of the places a model reply carries arguments."""
    quoted = json.dumps(payload)
    native = None
    text = {
        "json-string": '{"tool": "evaluate_formulas", "params": {"expressions": [' + quoted + "]}}",
        "json-bare": '{"tool": "evaluate_formulas", "params": {"expressions": [' + payload + "]}}",
        "json-fenced": "```json\n{\"name\": \"submit_formula\", \"arguments\": {\"expression\": " + quoted + "}}\n```",
        "action-bare": f"Action: evaluate_formulas(expressions=[{payload}])",
        "action-kw": f"Action: submit_formula(expression={payload})",
        "action-quoted": f"Action: submit_formula(expression={quoted})",
        "action-name": f"Action: {payload}",
        "tag": "<tool_call>{\"name\": \"submit_formula\", \"arguments\": {\"expression\": " + payload + "}}</tool_call>",
        "tag-python": "<tool_call>submit_formula(expression=" + payload + ")</tool_call>",
        "native": "",
    }[style]
    if style == "native":
        native = [{"id": "c1", "type": "function",
                   "function": {"name": "evaluate_formulas", "arguments": payload}},
                  {"id": "c2", "type": "function",
                   "function": {"name": "submit_formula", "arguments": json.dumps({"expression": payload})}}]
    return text, native


STYLES = ("json-string", "json-bare", "json-fenced", "action-bare", "action-kw", "action-quoted",
          "action-name", "tag", "tag-python", "native")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _read_all(text: str, native: Any) -> list[ParseResult]:
    """Parse with every parser, then read every argument string as a formula."""
    results = []
    for parser in PARSERS.values():
        result = parser.parse(text, native)
        assert isinstance(result, ParseResult)
        for error in result.errors:
            assert isinstance(error, str) and error.strip()
        for call in result.calls:
            for s in _strings(call.arguments):
                try:
                    parse_formula(s, VARIABLES)
                except FormulaError:
                    pass
        results.append(result)
    return results


# Warm up lazy imports (json decoder paths, ast) before anything is watched.
for _style in STYLES:
    _read_all(*_wrap("x*y", _style))


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("payload", PAYLOADS, ids=[f"p{i}" for i in range(len(PAYLOADS))])
def test_payloads_in_every_argument_slot_are_data_or_errors(payload: str, style: str) -> None:
    text, native = _wrap(payload, style)
    with watching(allow_compile=True) as events:
        results = _read_all(text, native)
    assert events == [], events
    assert_no_sentinel()
    for result in results:
        # Whatever was accepted is plain JSON data; a payload survives at most as a string.
        for call in result.calls:
            json.dumps(call.arguments)
        # A payload written as bare Python is never turned into a value: it is an error or prose.
        if style in ("action-bare", "action-kw", "tag-python") and result.calls:
            for call in result.calls:
                assert all(isinstance(v, (str, int, float, bool, list, dict, type(None)))
                           for v in call.arguments.values())


FRAGMENTS = [
    '{"tool": "evaluate_formulas", "params": {"expressions": [', "]}}", "Action: evaluate_formulas(",
    "expressions=[", ")", "<tool_call>", "</tool_call>", "```json\n", "\n```", '"', "'", ",",
    "__import__", "('os')", ".system(", "lambda:", "exec(", "eval(", "open(", "__class__",
    "__subclasses__()", "[0]", "**", "\\", "\n", "{", "}", "x*y", "sin(x)",
]
soup = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(PAYLOADS), st.text(max_size=5)),
                max_size=30).map("".join)
native_soup = st.one_of(
    st.none(),
    st.lists(st.fixed_dictionaries({
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": st.sampled_from(["evaluate_formulas", "submit_formula", "x"]),
                                           "arguments": soup}),
    }), max_size=3),
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=soup, native=native_soup)
def test_fuzzed_replies_run_nothing(text: str, native: Any) -> None:
    with watching(allow_compile=True) as events:
        _read_all(text, native)
    assert events == [], (text, events)
    assert_no_sentinel()


def test_payload_arguments_reach_the_model_as_errors() -> None:
    """Bare Python in an Action call is reported back, naming the argument, not run."""
    text, _ = _wrap(PAYLOADS[2], "action-kw")
    result = PARSERS["text"].parse(text)
    assert result.calls == ()
    assert any("'expression'" in e and "not a JSON or Python literal" in e for e in result.errors), result.errors
    text, native = _wrap(PAYLOADS[0], "native")
    result = PARSERS["openai"].parse(text, native)
    assert [c.name for c in result.calls] == ["submit_formula"]
    assert result.calls[0].arguments == {"expression": PAYLOADS[0]}  # a string, nothing more
    assert len(result.errors) == 1 and "evaluate_formulas" in result.errors[0]
