"""Conformance table for the tool-call parsers: (parser, reply, native calls) -> outcomes and errors.

Each case states the exact readable calls expected (name, arguments, id), the unreadable calls
(position among the outcomes, tool name or None, id) and how many errors in all: every
unreadable call's reason, then the reply-level problems. Where an error's wording matters to
the model, ``error_has`` lists fragments that must appear in it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletionMessageFunctionToolCall


@dataclass(frozen=True)
class Case:
    id: str
    parser: str
    text: Any
    calls: tuple[tuple[str, dict[str, Any], str], ...] = ()
    errors: int = 0
    #: (position among all outcomes, tool name or None, id) of each unreadable call, in order.
    unreadable: tuple[tuple[int, str | None, str], ...] = ()
    native: Any = None
    error_has: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


def sdk_call(call_id: str, name: str, arguments: str) -> ChatCompletionMessageFunctionToolCall:
    """A real OpenAI SDK tool-call object, as the client returns it."""
    return ChatCompletionMessageFunctionToolCall.model_validate(
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    )


def chat_call(call_id: str | None, name: Any, arguments: Any, kind: str = "function") -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        out["id"] = call_id
    return out


FIT = "evaluate_formulas"
PROSE = "I think the relation is quadratic in x; let me look at the residuals before fitting anything."

CASES: list[Case] = [
    # ---------------------------------------------------------------- prose: nothing, no errors
    *[
        Case(f"prose-{p}", p, PROSE)
        for p in ("openai", "json", "text")
    ],
    *[Case(f"empty-{p}", p, "") for p in ("openai", "json", "text")],
    *[Case(f"none-text-{p}", p, None) for p in ("openai", "json", "text")],
    Case("json-prose-with-braces", "json", "The set {x, y} and the map {a: 1} are not calls."),
    Case("json-data-object-not-a-call", "json", 'The data looks like {"x": [1, 2], "y": [3, 4]}.'),
    Case("json-record-with-name-field", "json", 'Row: {"name": "Ada", "age": 36} is a record.'),
    Case("json-record-with-name-and-type", "json", '{"name": "pendulum", "type": "dataset"}'),
    Case("json-python-dict-in-prose", "json", "Python would print {'x': 1} here."),
    Case("json-fenced-data-not-a-call", "json", '```json\n{"x": 1, "y": 2}\n```'),
    Case("json-other-language-fence", "json", "```python\nd = {'a': 1}\nprint(d)\n```"),
    Case("text-prose-mentions-tag", "text", "I could use a `<tool_call>` block, but not yet."),
    Case("text-word-action-midline", "text", "My next Action: is to think. Also, Actions: none."),
    Case("text-python-call-in-prose", "text", "Calling fit(x=1) would be premature."),
    # ---------------------------------------------------------------- json: accepted shapes
    Case(
        "json-fenced-tool-params",
        "json",
        f'Let me fit it.\n```json\n{{"tool": "{FIT}", "params": {{"formulas": ["c0*x**2"]}}}}\n```\n',
        calls=((FIT, {"formulas": ["c0*x**2"]}, "call_0"),),
    ),
    Case(
        "json-bare-name-arguments",
        "json",
        'Calling {"name": "describe_data", "arguments": {"columns": ["x", "y"]}} now.',
        calls=(("describe_data", {"columns": ["x", "y"]}, "call_0"),),
    ),
    Case(
        "json-untagged-fence",
        "json",
        '```\n{"tool": "a", "params": {}}\n```',
        calls=(("a", {}, "call_0"),),
    ),
    Case(
        "json-many-in-one-fence",
        "json",
        '```json\n{"tool": "a", "params": {"k": 1}}\n{"tool": "b", "params": {"k": 2}}\n```',
        calls=(("a", {"k": 1}, "call_0"), ("b", {"k": 2}, "call_1")),
    ),
    Case(
        "json-list-in-fence",
        "json",
        '```json\n[{"tool": "a", "params": {}}, {"name": "b", "arguments": {"z": null}}]\n```',
        calls=(("a", {}, "call_0"), ("b", {"z": None}, "call_1")),
    ),
    Case(
        "json-fenced-and-bare-in-order",
        "json",
        'First {"tool": "one"} then\n```json\n{"tool": "two", "params": {"v": 2.5}}\n```\nand {"tool": "three", "params": {}}',
        calls=(("one", {}, "call_0"), ("two", {"v": 2.5}, "call_1"), ("three", {}, "call_2")),
    ),
    Case(
        "json-tool-without-params",
        "json",
        '{"tool": "list_datasets"}',
        calls=(("list_datasets", {}, "call_0"),),
    ),
    Case(
        "json-params-null",
        "json",
        '{"tool": "list_datasets", "params": null}',
        calls=(("list_datasets", {}, "call_0"),),
    ),
    Case(
        "json-arguments-as-json-string",
        "json",
        '{"name": "fit", "arguments": "{\\"formula\\": \\"x*y\\"}"}',
        calls=(("fit", {"formula": "x*y"}, "call_0"),),
    ),
    Case(
        "json-given-id-kept",
        "json",
        '{"tool": "a", "params": {}, "id": "mine"} {"tool": "b", "params": {}}',
        calls=(("a", {}, "mine"), ("b", {}, "call_1")),
    ),
    Case(
        "json-openai-shaped-object",
        "json",
        '{"id": "c9", "type": "function", "function": {"name": "fit", "arguments": {"k": 1}}}',
        calls=(("fit", {"k": 1}, "c9"),),
    ),
    Case(
        "json-braces-inside-strings",
        "json",
        '{"tool": "note", "params": {"text": "a } and { inside"}}',
        calls=(("note", {"text": "a } and { inside"}, "call_0"),),
    ),
    Case(
        "json-nested-call-inside-params-is-data",
        "json",
        '{"tool": "outer", "params": {"inner": {"tool": "x", "params": {}}}}',
        calls=(("outer", {"inner": {"tool": "x", "params": {}}}, "call_0"),),
    ),
    Case(
        "json-unicode-and-escapes",
        "json",
        '{"tool": "say", "params": {"msg": "caf\\u00e9 \\"q\\" ∑"}}',
        calls=(("say", {"msg": 'café "q" ∑'}, "call_0"),),
    ),
    Case(
        "json-call-in-tool_call-tags",
        "json",
        '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>',
        calls=(("a", {"x": 1}, "call_0"),),
    ),
    Case(
        "json-call-in-python-fence-read-as-prose",
        "json",
        '```python\n{"tool": "a", "params": {"x": 1}}\n```',
        calls=(("a", {"x": 1}, "call_0"),),
    ),
    Case(
        "json-unclosed-fence-with-complete-call",
        "json",
        '```json\n{"tool": "a", "params": {"x": 1}}\n',
        calls=(("a", {"x": 1}, "call_0"),),
    ),
    Case(
        "json-native-calls-also-read",
        "json",
        '{"tool": "b", "params": {}}',
        native=[chat_call("n1", "a", '{"x": 1}')],
        calls=(("a", {"x": 1}, "n1"), ("b", {}, "call_1")),
    ),
    Case(
        "json-crlf-line-endings",
        "json",
        'Fit:\r\n```json\r\n{"tool": "a", "params": {"k": 1}}\r\n```\r\nDone {"tool": "b"}',
        calls=(("a", {"k": 1}, "call_0"), ("b", {}, "call_1")),
    ),
    # ---------------------------------------------------------------- json: errors for the model
    Case(
        "json-fenced-block-broken",
        "json",
        '```json\n{"tool": "fit", "params": {"formula": "x" "y"}}\n```',
        errors=1,
        error_has=("line 1", "could not be read", '"tool": "<name>"'),
    ),
    Case(
        "json-fenced-block-unclosed-and-broken",
        "json",
        '```json\n{"tool": "fit", "params": {',
        errors=1,
        error_has=("never closed",),
    ),
    Case(
        "json-bare-call-missing-brace",
        "json",
        'Run {"tool": "fit", "params": {"a": 1}',
        errors=1,
        unreadable=((0, "fit", "call_0"),),
    ),
    Case(
        "json-bare-single-quotes",
        "json",
        "{'tool': 'fit', 'params': {'a': 1}}",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("double quotes",),
    ),
    Case(
        "json-trailing-comma",
        "json",
        '{"tool": "fit", "params": {"a": 1,}}',
        errors=1,
        unreadable=((0, "fit", "call_0"),),
    ),
    Case(
        "json-params-is-list",
        "json",
        '{"tool": "fit", "params": [1, 2]}',
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("'fit'", "must be a JSON object", "a list"),
    ),
    Case(
        "json-params-is-string-not-json",
        "json",
        '{"tool": "fit", "params": "x*y"}',
        errors=1,
        unreadable=((0, "fit", "call_0"),),
    ),
    Case(
        "json-arguments-string-is-list",
        "json",
        '{"name": "fit", "arguments": "[1]"}',
        errors=1,
        unreadable=((0, "fit", "call_0"),),
    ),
    Case(
        "json-tool-name-not-string",
        "json",
        '{"tool": 3, "params": {}}',
        errors=1,
        unreadable=((0, None, "call_0"),),
        error_has=('"tool"',),
    ),
    Case("json-tool-name-empty", "json", '{"tool": "  ", "params": {}}', errors=1, unreadable=((0, None, "call_0"),)),
    Case(
        "json-tool-and-name",
        "json",
        '{"tool": "a", "name": "b", "params": {}}',
        errors=1,
        unreadable=((0, "a", "call_0"),),
        error_has=("not both",),
    ),
    Case(
        "json-params-and-arguments",
        "json",
        '{"tool": "a", "params": {}, "arguments": {}}',
        errors=1,
        unreadable=((0, "a", "call_0"),),
    ),
    Case(
        "json-arguments-at-top-level",
        "json",
        '{"tool": "fit", "formula": "x*y"}',
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("'formula'", '"params"'),
    ),
    Case(
        "json-duplicate-argument-key",
        "json",
        '{"tool": "fit", "params": {"a": 1, "a": 2}}',
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("duplicate key",),
    ),
    Case(
        "json-good-and-bad-both-reported",
        "json",
        '{"tool": "ok", "params": {}}\n```json\n{"tool": "bad", "params": [}\n```\n{"tool": "ok2"}',
        calls=(("ok", {}, "call_0"), ("ok2", {}, "call_1")),
        errors=1,
    ),
    Case("json-huge-integer", "json", '```json\n{"tool": "a", "params": {"n": ' + "9" * 5000 + "}}\n```", errors=1),
    Case("json-deep-nesting-in-fence", "json", "```json\n" + "[" * 50_000 + "\n```", errors=1, error_has=("nested too deeply",)),
    Case(
        "json-deep-nesting-bare",
        "json",
        '{"tool": "a", "params": ' + '{"k": ' * 1100,
        errors=1,
        unreadable=((0, "a", "call_0"),),
        error_has=("nested too deeply",),
    ),
    Case(
        "json-untagged-fence-broken-call-list",
        "json",
        '```\n[{"tool": "a", "params": {]\n```',
        errors=1,
        error_has=("JSON block at line 1",),
    ),
    Case("json-broken-data-not-a-call", "json", 'Data: {"x": [1, 2}, {"y": {"z": 1]}'),
    Case(
        "json-pathological-nesting-stops-with-notice",
        "json",
        '{"tool": "a", "params": ' + '{"k": ' * 20_000 + '\n{"tool": "late"}',
        errors=2,
        unreadable=((0, "a", "call_0"),),
        error_has=("nested too deeply", "was not read past line 1"),
    ),
    Case(
        "json-arguments-nested-too-deep",
        "json",
        '{"tool": "a", "params": {"k": ' + "[" * 70 + "]" * 70 + "}}",
        errors=1,
        unreadable=((0, "a", "call_0"),),
        error_has=("deeper than 64",),
    ),
    Case(
        "json-arguments-nested-at-limit",
        "json",
        '{"tool": "a", "params": {"k": ' + "[" * 63 + "]" * 63 + "}}",
        calls=(("a", {"k": json.loads("[" * 63 + "]" * 63)}, "call_0"),),
    ),
    Case(
        "text-action-nested-too-deep",
        "text",
        "Action: a(k=" + "[" * 70 + "]" * 70 + ")",
        errors=1,
        unreadable=((0, "a", "call_0"),),
        error_has=("deeper than 64",),
    ),
    Case(
        "openai-arguments-nested-too-deep",
        "openai",
        None,
        native=[chat_call("c1", "a", '{"k": ' + "[" * 70 + "]" * 70 + "}")],
        errors=1,
        unreadable=((0, "a", "c1"),),
        error_has=("deeper than 64",),
    ),
    Case(
        "json-error-cap",
        "json",
        '{"tool": "a", "params": [1]}\n' * 30,
        errors=11,
        unreadable=tuple((i, "a", f"call_{i}") for i in range(10)),
        error_has=("20 more",),
    ),
    # ---------------------------------------------------------------- text: Action lines
    Case(
        "text-action-json-values",
        "text",
        f'Thought: try a power law.\nAction: {FIT}(formulas=["c0*x**c1"], max_restarts=4, verbose=true, note=null)',
        calls=((FIT, {"formulas": ["c0*x**c1"], "max_restarts": 4, "verbose": True, "note": None}, "call_0"),),
    ),
    Case(
        "text-action-python-literals",
        "text",
        "Action: fit(formula='x*y', bounds=(0, 1.5), opts={'a': [True, None]}, neg=-2)",
        calls=(("fit", {"formula": "x*y", "bounds": [0, 1.5], "opts": {"a": [True, None]}, "neg": -2}, "call_0"),),
    ),
    Case(
        "text-action-mixed-json-and-python",
        "text",
        "Action: fit(opts={'flag': true, 'off': False, 'none': null}, xs=(1, None))",
        calls=(("fit", {"opts": {"flag": True, "off": False, "none": None}, "xs": [1, None]}, "call_0"),),
    ),
    Case("text-action-no-args", "text", "Action: list_datasets()", calls=(("list_datasets", {}, "call_0"),)),
    Case(
        "text-action-keys-kept-as-written",
        "text",
        "Action: f(maxIter=3, Max_iter=4, _x=5)",
        calls=(("f", {"maxIter": 3, "Max_iter": 4, "_x": 5}, "call_0"),),
    ),
    Case(
        "text-action-multiline",
        "text",
        'Action: fit(\n    formulas=[\n        "a*x",\n        "b*x**2",\n    ],\n    seed=1,\n)\nObservation pending.',
        calls=(("fit", {"formulas": ["a*x", "b*x**2"], "seed": 1}, "call_0"),),
    ),
    Case(
        "text-action-markdown-bold-and-backticks",
        "text",
        "**Action:** `fit(formula=\"x\")`",
        calls=(("fit", {"formula": "x"}, "call_0"),),
    ),
    Case(
        "text-action-parens-and-quotes-in-strings",
        "text",
        'Action: fit(formula="sin(x) + (y", note=\'it\\\'s ) fine\')',
        calls=(("fit", {"formula": "sin(x) + (y", "note": "it's ) fine"}, "call_0"),),
    ),
    Case(
        "text-action-hyphen-and-dot-names",
        "text",
        "Action: mcp.fs-read(path=\"/tmp/a\")",
        calls=(("mcp.fs-read", {"path": "/tmp/a"}, "call_0"),),
    ),
    Case(
        "text-two-actions-and-a-block-in-order",
        "text",
        'Action: a(k=1)\nsome text\n<tool_call>{"name": "b", "arguments": {"k": 2}}</tool_call>\nAction: c(k=3)',
        calls=(("a", {"k": 1}, "call_0"), ("b", {"k": 2}, "call_1"), ("c", {"k": 3}, "call_2")),
    ),
    Case(
        "text-action-json-string-escapes",
        "text",
        'Action: say(msg="caf\\u00e9 \\/ done")',
        calls=(("say", {"msg": "café / done"}, "call_0"),),
    ),
    Case(
        "text-action-trailing-prose-ignored",
        "text",
        "Action: fit(seed=2) because it is cheap",
        calls=(("fit", {"seed": 2}, "call_0"),),
    ),
    # ---------------------------------------------------------------- text: <tool_call> blocks
    Case(
        "text-tool-call-block",
        "text",
        '<tool_call>\n{"name": "fit", "arguments": {"formula": "x*y"}}\n</tool_call>',
        calls=(("fit", {"formula": "x*y"}, "call_0"),),
    ),
    Case(
        "text-tool-call-block-fenced-inside",
        "text",
        '<tool_call>\n```json\n{"name": "fit", "arguments": {}}\n```\n</tool_call>',
        calls=(("fit", {}, "call_0"),),
    ),
    Case(
        "text-tool-call-block-tool-params-keys",
        "text",
        '<TOOL_CALL>{"tool": "fit", "params": {"k": 1}, "id": "t1"}</TOOL_CALL>',
        calls=(("fit", {"k": 1}, "t1"),),
    ),
    Case(
        "text-tool-call-block-unclosed-but-complete",
        "text",
        '<tool_call>{"name": "fit", "arguments": {"k": 1}} and then I stop',
        calls=(("fit", {"k": 1}, "call_0"),),
    ),
    Case(
        "text-action-inside-block-not-double-read",
        "text",
        '<tool_call>{"name": "a", "arguments": {"s": "x\\nAction: b()"}}</tool_call>',
        calls=(("a", {"s": "x\nAction: b()"}, "call_0"),),
    ),
    Case(
        "text-crlf-line-endings",
        "text",
        'Thought: go\r\nAction: a(k=1)\r\nAction: b(s="x",\r\n  t=2)\r\n',
        calls=(("a", {"k": 1}, "call_0"), ("b", {"s": "x", "t": 2}, "call_1")),
    ),
    Case(
        "text-action-in-code-fence",
        "text",
        "```\nAction: a(k=[1, 2])\n```",
        calls=(("a", {"k": [1, 2]}, "call_0"),),
    ),
    Case(
        "text-native-calls-also-read",
        "text",
        "Action: b()",
        native=[sdk_call("n1", "a", "{}")],
        calls=(("a", {}, "n1"), ("b", {}, "call_1")),
    ),
    Case(
        "text-action-non-ascii-values",
        "text",
        'Action: say(msg="π ≈ 3.14", note=\'naïve\')',
        calls=(("say", {"msg": "π ≈ 3.14", "note": "naïve"}, "call_0"),),
    ),
    Case(
        "text-action-too-large",
        "text",
        "Action: fit(a=[" + "1, " * 100_000 + "])",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("over the limit",),
    ),
    # ---------------------------------------------------------------- text: errors for the model
    Case(
        "text-action-unquoted-string",
        "text",
        "Action: fit(formula=x*y)",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("'formula'", "put text in quotes", "Action: tool_name(key=value"),
    ),
    Case(
        "text-action-positional",
        "text",
        'Action: fit("x*y")',
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("positional",),
    ),
    Case(
        "text-action-star-kwargs",
        "text",
        "Action: fit(**{'a': 1})",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("**",),
    ),
    Case(
        "text-action-duplicate-kwarg",
        "text",
        "Action: fit(a=1, a=2)",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("twice",),
    ),
    Case(
        "text-action-duplicate-dict-key",
        "text",
        "Action: fit(a={'k': 1, 'k': 2})",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("duplicate key",),
    ),
    Case(
        "text-action-unclosed",
        "text",
        "Action: fit(a=[1, 2\nThought: oops",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("never closed",),
    ),
    Case(
        "text-action-unterminated-string",
        "text",
        'Action: fit(a="abc)',
        errors=1,
        unreadable=((0, "fit", "call_0"),),
    ),
    Case(
        "text-action-not-a-call",
        "text",
        "Action: fit the data",
        errors=1,
        unreadable=((0, None, "call_0"),),
        error_has=("'fit the data'",),
    ),
    Case(
        "text-action-set-literal",
        "text",
        "Action: fit(a={1, 2})",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("set",),
    ),
    Case(
        "text-action-bytes-literal",
        "text",
        "Action: fit(a=b'x')",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("bytes",),
    ),
    Case(
        "text-action-complex-literal",
        "text",
        "Action: fit(a=1+2j)",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("complex",),
    ),
    Case(
        "text-action-non-string-dict-key",
        "text",
        "Action: fit(a={1: 2})",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("keys must be strings",),
    ),
    Case(
        "text-action-function-call-value",
        "text",
        "Action: fit(a=__import__('os').system('x'))",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
    ),
    Case("text-action-fstring", "text", 'Action: fit(a=f"{x}")', errors=1, unreadable=((0, "fit", "call_0"),)),
    Case(
        "text-action-syntax-error",
        "text",
        "Action: fit(a=1 b=2)",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
        error_has=("syntax error",),
    ),
    Case(
        "text-action-deep-parens",
        "text",
        "Action: fit(a=" + "(" * 300 + "1" + ")" * 300 + ")",
        errors=1,
        unreadable=((0, "fit", "call_0"),),
    ),
    Case(
        "text-tool-call-block-broken-json",
        "text",
        '<tool_call>{"name": "fit", "arguments": {}</tool_call>',
        errors=1,
        unreadable=((0, None, "call_0"),),
    ),
    Case(
        "text-tool-call-block-empty",
        "text",
        "<tool_call>  </tool_call>",
        errors=1,
        unreadable=((0, None, "call_0"),),
        error_has=("empty",),
    ),
    Case(
        "text-tool-call-block-not-a-call",
        "text",
        '<tool_call>{"formula": "x"}</tool_call>',
        errors=1,
        unreadable=((0, None, "call_0"),),
        error_has=("not a tool call",),
    ),
    Case(
        "text-tool-call-block-args-list",
        "text",
        '<tool_call>{"name": "a", "arguments": [1]}</tool_call>',
        errors=1,
        unreadable=((0, "a", "call_0"),),
    ),
    Case(
        "text-tool-call-unclosed-broken",
        "text",
        '<tool_call>{"name": "a", "argu',
        errors=1,
        unreadable=((0, None, "call_0"),),
        error_has=("never closed",),
    ),
    Case(
        "text-good-and-bad-both-reported",
        "text",
        "Action: good(k=1)\nAction: bad(k=)\nAction: good2()",
        calls=(("good", {"k": 1}, "call_0"), ("good2", {}, "call_2")),
        errors=1,
        unreadable=((1, "bad", "call_1"),),
        error_has=("line 2",),
    ),
    # ---------------------------------------------------------------- openai: native calls
    Case(
        "openai-dict-call",
        "openai",
        "",
        native=[chat_call("call_abc", FIT, '{"formulas": ["x"]}')],
        calls=((FIT, {"formulas": ["x"]}, "call_abc"),),
    ),
    Case(
        "openai-sdk-objects",
        "openai",
        "Let me check two ideas.",
        native=[sdk_call("c1", "a", '{"k": 1}'), sdk_call("c2", "b", "{}")],
        calls=(("a", {"k": 1}, "c1"), ("b", {}, "c2")),
    ),
    Case("openai-empty-arguments", "openai", None, native=[chat_call("c1", "a", "")], calls=(("a", {}, "c1"),)),
    Case("openai-blank-arguments", "openai", None, native=[chat_call("c1", "a", "  \n")], calls=(("a", {}, "c1"),)),
    Case("openai-none-arguments", "openai", None, native=[chat_call("c1", "a", None)], calls=(("a", {}, "c1"),)),
    Case("openai-dict-arguments", "openai", None, native=[chat_call("c1", "a", {"k": [1]})], calls=(("a", {"k": [1]}, "c1"),)),
    Case("openai-missing-id-assigned", "openai", None, native=[chat_call(None, "a", "{}")], calls=(("a", {}, "call_0"),)),
    Case(
        "openai-flat-responses-item",
        "openai",
        None,
        native=[{"type": "function_call", "call_id": "fc1", "name": "a", "arguments": '{"k": 2}'}],
        calls=(("a", {"k": 2}, "fc1"),),
    ),
    Case(
        "openai-anthropic-tool-use",
        "openai",
        None,
        native=[{"type": "tool_use", "id": "tu1", "name": "a", "input": {"k": 3}}],
        calls=(("a", {"k": 3}, "tu1"),),
    ),
    Case("openai-single-call-not-in-list", "openai", None, native=chat_call("c1", "a", "{}"), calls=(("a", {}, "c1"),)),
    Case(
        "openai-invalid-json-arguments",
        "openai",
        None,
        native=[chat_call("c1", "fit", '{"formula": "x*y"')],
        errors=1,
        unreadable=((0, "fit", "c1"),),
        error_has=("id c1", "'fit'", "could not be read", '{"formula": "x*y"'),
    ),
    Case(
        "openai-list-arguments",
        "openai",
        None,
        native=[sdk_call("c1", "fit", "[1, 2]")],
        errors=1,
        unreadable=((0, "fit", "c1"),),
        error_has=("must be a JSON object", "a list"),
    ),
    Case(
        "openai-number-arguments",
        "openai",
        None,
        native=[chat_call("c1", "fit", 3)],
        errors=1,
        unreadable=((0, "fit", "c1"),),
    ),
    Case(
        "openai-missing-name",
        "openai",
        None,
        native=[chat_call("c1", None, "{}")],
        errors=1,
        unreadable=((0, None, "c1"),),
        error_has=("no tool name",),
    ),
    Case(
        "openai-custom-tool-type",
        "openai",
        None,
        native=[{"id": "c1", "type": "custom", "custom": {}}],
        errors=1,
        unreadable=((0, None, "c1"),),
    ),
    Case(
        "openai-duplicate-argument-key",
        "openai",
        None,
        native=[chat_call("c1", "a", '{"k": 1, "k": 2}')],
        errors=1,
        unreadable=((0, "a", "c1"),),
    ),
    Case(
        "openai-good-and-bad-mixed",
        "openai",
        None,
        native=[chat_call("c1", "a", "{}"), chat_call("c2", "b", "{oops"), chat_call("c3", "c", '{"z": 0}')],
        calls=(("a", {}, "c1"), ("c", {"z": 0}, "c3")),
        errors=1,
        unreadable=((1, "b", "c2"),),
        error_has=("id c2",),
    ),
    Case("openai-non-list-native", "openai", None, native=42, errors=1),
    Case("openai-string-native", "openai", None, native="call it", errors=1),
    Case("openai-item-not-a-call", "openai", None, native=[7], errors=1, unreadable=((0, None, "call_0"),)),
    Case(
        "openai-text-call-ignored-by-default",
        "openai",
        '{"tool": "a", "params": {}}',
    ),
    Case(
        "openai-text-fallback",
        "openai",
        'Here: <tool_call>{"name": "a", "arguments": {"k": 1}}</tool_call>',
        calls=(("a", {"k": 1}, "call_0"),),
        options={"text_fallback": True},
    ),
    Case(
        "openai-text-fallback-not-used-when-native",
        "openai",
        '{"tool": "b", "params": {}}',
        native=[chat_call("c1", "a", "{}")],
        calls=(("a", {}, "c1"),),
        options={"text_fallback": True},
    ),
    # ---------------------------------------------------------------- outcomes: ids and order
    Case(
        "json-unreadable-keeps-its-id-and-place",
        "json",
        '{"tool": "a"} {"tool": "b", "params": [1], "id": "mine"} {"tool": "c"}',
        calls=(("a", {}, "call_0"), ("c", {}, "call_2")),
        errors=1,
        unreadable=((1, "b", "mine"),),
    ),
    Case(
        "json-broken-fence-is-a-reply-problem",
        "json",
        '{"tool": "a"}\n```json\n{"tool": "b", "params": {]\n```\n{"tool": "c", "params": 3}',
        calls=(("a", {}, "call_0"),),
        errors=2,
        unreadable=((1, "c", "call_1"),),
    ),
    Case(
        "text-tool-call-block-unreadable-keeps-id",
        "text",
        '<tool_call>{"name": "a", "arguments": [1], "id": "t9"}</tool_call>\nAction: b()',
        calls=(("b", {}, "call_1"),),
        errors=1,
        unreadable=((0, "a", "t9"),),
    ),
    Case(
        "json-native-unreadable-before-text-calls",
        "json",
        '{"tool": "b"}',
        native=[chat_call(None, "a", "{oops")],
        calls=(("b", {}, "call_1"),),
        errors=1,
        unreadable=((0, "a", "call_0"),),
    ),
    Case(
        "openai-unreadable-without-id-gets-one",
        "openai",
        None,
        native=[chat_call(None, "a", "[1]"), chat_call(None, "b", "{}")],
        calls=(("b", {}, "call_1"),),
        errors=1,
        unreadable=((0, "a", "call_0"),),
    ),
    Case(
        "openai-every-unreadable-native-call-kept-past-the-cap",
        "openai",
        None,
        native=[chat_call(f"c{i}", "a", "[1]") for i in range(12)],
        errors=12,
        unreadable=tuple((i, "a", f"c{i}") for i in range(12)),
    ),
    Case(
        "openai-text-fallback-unreadable",
        "openai",
        '<tool_call>{"name": "a", "arguments": "x"}</tool_call>',
        errors=1,
        unreadable=((0, "a", "call_0"),),
        options={"text_fallback": True},
    ),
    Case(
        "openai-oversize-text-still-reads-native-calls",
        "openai",
        "a" * 2_000_001,
        native=[chat_call("c1", "a", "{}"), chat_call("c2", "b", "{oops")],
        calls=(("a", {}, "c1"),),
        errors=2,
        unreadable=((1, "b", "c2"),),
        error_has=("over the limit", "id c2"),
    ),
    # ---------------------------------------------------------------- odd inputs, all parsers
    *[Case(f"bytes-text-{p}", p, b"just prose \xff") for p in ("openai", "json", "text")],
    *[Case(f"int-text-{p}", p, 12345, errors=1, error_has=("not str",)) for p in ("openai", "json", "text")],
    *[
        Case(f"oversize-text-{p}", p, "a" * 2_000_001, errors=1, error_has=("over the limit",))
        for p in ("openai", "json", "text")
    ],
]
