"""The ``text`` format: ``Action: name(key=value, ...)`` lines and ``<tool_call>`` blocks.

``Action:`` calls take keyword arguments only; each value is a JSON or Python literal
(``true``/``false``/``null`` work as well as ``True``/``False``/``None``), and the call may run
over several lines. The argument list is parsed with :mod:`ast` and each value read with
``json.loads`` or ``ast.literal_eval``: nothing the model writes is ever evaluated.
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks hold JSON call objects, as
Hermes- and Qwen-style models write them. Calls are returned in the order they appear; an
``Action:`` or ``<tool_call>`` block that cannot be used is an unreadable call in that order.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sr_dist.parsers._support import (
    MAX_BLOCK_CHARS,
    MAX_DEPTH,
    DuplicateKeyError,
    LineIndex,
    Problems,
    describe_exception,
    nesting_exceeds,
    snippet,
    strict_loads,
    strict_raw_decode,
    to_json_value,
)
from sr_dist.parsers.base import PromptedParser, SpecLike, example_arguments, render_tool_list
from sr_dist.parsers.call_objects import call_identity, read_call_object
from sr_dist.parsers.json_calls import decode_sequence
from sr_dist.parsers.native_calls import read_native_calls
from sr_dist.parsers.outcomes import CallOutcome, ParseResult
from sr_dist.tools.types import ToolCall

__all__ = ["TextParser", "ToolCallBlock", "find_tool_call_blocks", "read_action_call"]

ACTION_HINT = "Action: tool_name(key=value, ...) with keyword arguments and JSON or Python literal values"
BLOCK_HINT = '<tool_call>{"name": "<tool>", "arguments": {<arguments>}}</tool_call>'

_TAG_OPEN = re.compile(r"<tool_call\s*>", re.I)
_TAG_CLOSE = re.compile(r"</tool_call\s*>", re.I)
_ACTION = re.compile(r"^[ \t]*(?:[-*>][ \t]*)?(?:\*\*|__)?Action(?:\*\*|__)?[ \t]*:(?:\*\*|__)?[ \t]*", re.M)
_CALL_HEAD = re.compile(r"`?([A-Za-z_][\w.\-]*)[ \t]*\(")
_JSON_NAMES = {"true": True, "false": False, "null": None}
#: An Action call is parsed into a Python AST, which costs far more time and memory per character
#: than JSON; so it gets a tighter size limit than ``MAX_BLOCK_CHARS``.
MAX_ACTION_CHARS = 256_000


@dataclass(frozen=True, slots=True)
class ToolCallBlock:
    """One ``<tool_call>`` block: its span in the text, its content, and whether it was closed."""

    start: int
    end: int
    content: str
    closed: bool


def find_tool_call_blocks(text: str) -> list[ToolCallBlock]:
    """Every ``<tool_call>`` block in order. An unclosed one runs to the next opening tag or the end."""
    opens = list(_TAG_OPEN.finditer(text))
    closes = list(_TAG_CLOSE.finditer(text))
    blocks: list[ToolCallBlock] = []
    ci = 0
    for i, opener in enumerate(opens):
        if blocks and opener.start() < blocks[-1].end:
            continue  # an opening tag written inside the previous block's content
        next_open = opens[i + 1].start() if i + 1 < len(opens) else len(text)
        while ci < len(closes) and closes[ci].start() < opener.end():
            ci += 1
        if ci < len(closes) and closes[ci].start() < next_open:
            closer = closes[ci]
            blocks.append(ToolCallBlock(opener.start(), closer.end(), text[opener.end() : closer.start()], True))
            ci += 1
        else:
            blocks.append(ToolCallBlock(opener.start(), next_open, text[opener.end() : next_open], False))
    return blocks


def _strip_fence(content: str) -> str:
    """Models sometimes wrap the JSON inside the tags in a ```json fence; drop it."""
    stripped = content.strip()
    if stripped.startswith(("```", "~~~")):
        first_newline = stripped.find("\n")
        stripped = stripped[first_newline + 1 :] if first_newline != -1 else ""
        stripped = stripped.rstrip()
        if stripped.endswith(("```", "~~~")):
            stripped = stripped.rstrip("`~").rstrip()
    return stripped


def _read_block(lines: LineIndex, block: ToolCallBlock, problems: Problems) -> list[CallOutcome]:
    """The calls of one block; a block that cannot be used is one unreadable call (the tag says it is a call)."""
    where = f"line {lines.line(block.start)}"
    body = _strip_fence(block.content)
    if not block.closed and not body.startswith("{"):
        return []  # the tag mentioned in prose, not a call
    if len(body) > MAX_BLOCK_CHARS:
        reason = (
            f"The <tool_call> block at {where} is {len(body)} characters long, over the limit of "
            f"{MAX_BLOCK_CHARS}; it was not read. Send smaller calls."
        )
        return _kept(problems.unreadable(reason))
    if not body:
        return _kept(problems.unreadable(f"The <tool_call> block at {where} is empty. Expected: {BLOCK_HINT}."))
    try:
        values = decode_sequence(body) if block.closed else [strict_raw_decode(body, 0)[0]]
    except Exception as exc:  # JSONDecodeError, RecursionError, ValueError (huge int), MemoryError
        unclosed = "" if block.closed else " (and it is never closed with </tool_call>)"
        reason = (
            f"The <tool_call> block at {where} could not be read{unclosed}: {describe_exception(exc)}. "
            f"It starts: {snippet(body)!r}. Expected: {BLOCK_HINT}."
        )
        return _kept(problems.unreadable(reason))
    outcomes: list[CallOutcome] = []
    for value in values:
        read = read_call_object(value)
        if isinstance(read, ToolCall):
            outcomes.append(read)
            continue
        if isinstance(read, str):
            reason = f"The <tool_call> block at {where} cannot be used: {read}. Expected: {BLOCK_HINT}."
        else:
            reason = (
                f"The <tool_call> block at {where} holds JSON that is not a tool call (it needs a \"name\"): "
                f"{snippet(body, 60)!r}. Expected: {BLOCK_HINT}."
            )
        name, call_id = call_identity(value)
        outcomes.extend(_kept(problems.unreadable(reason, name=name, call_id=call_id)))
    return outcomes


def _kept(outcome: CallOutcome | None) -> list[CallOutcome]:
    """``[outcome]``, or nothing once the problem cap dropped it."""
    return [] if outcome is None else [outcome]


def _matching_paren(text: str, open_index: int, limit: int) -> int | None:
    """Index of the ``)`` closing ``text[open_index]``, skipping Python/JSON strings; None if unclosed."""
    depth = 0
    index = open_index
    stop = min(len(text), open_index + limit)
    while index < stop:
        ch = text[index]
        if ch in "\"'":
            triple = text.startswith(ch * 3, index)
            quote = ch * 3 if triple else ch
            index += len(quote)
            while index < stop:
                if text[index] == "\\":
                    index += 2
                    continue
                if text.startswith(quote, index):
                    break
                if not triple and text[index] == "\n":
                    return None  # a one-line string left open
                index += 1
            else:
                return None
            index += len(quote)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return index if ch == ")" else None
        index += 1
    return None


class _JsonNames(ast.NodeTransformer):
    """Let ``true``/``false``/``null`` stand for their Python constants, so JSON values read too."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _JSON_NAMES:
            return ast.copy_location(ast.Constant(_JSON_NAMES[node.id]), node)
        return node


def _duplicate_dict_key(node: ast.AST) -> Any:
    """The first constant key written twice in a dict literal inside ``node``, else None."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            seen: set[Any] = set()
            for key in sub.keys:
                if isinstance(key, ast.Constant):
                    marker = (type(key.value), key.value)
                    if marker in seen:
                        return key.value
                    seen.add(marker)
    return None


class _SourceMap:
    """Source text of AST nodes. ``ast.get_source_segment`` re-splits the whole source on every
    call in pure Python, which made one large call quadratic; here the lines are split once."""

    __slots__ = ("_source", "_starts")

    def __init__(self, source: str) -> None:
        self._source = source
        # The tokenizer ends lines at \r\n, \r or \n only (str.splitlines knows more breaks).
        self._starts = [0, *(m.end() for m in _LINE_BREAK.finditer(source))]

    def _index(self, lineno: int, byte_col: int) -> int:
        start = self._starts[lineno - 1]
        end = self._starts[lineno] if lineno < len(self._starts) else len(self._source)
        line = self._source[start:end]
        if line.isascii():
            return start + byte_col
        return start + len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def segment(self, node: ast.AST) -> str:
        end_lineno, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        if end_lineno is None or end_col is None:
            return ""
        start = self._index(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        return self._source[start : self._index(end_lineno, end_col)]


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _read_value(source: _SourceMap, key: str, node: ast.expr) -> Any:
    """One argument value, as JSON or else as a Python literal. Raises ``ValueError`` with the reason."""
    written = source.segment(node)
    try:
        return strict_loads(written)
    except DuplicateKeyError as exc:
        raise ValueError(f"argument {key!r}: {exc}") from None
    except Exception:
        pass  # not JSON; try it as a Python literal
    duplicate = _duplicate_dict_key(node)
    if duplicate is not None:
        raise ValueError(f"argument {key!r}: duplicate key {duplicate!r}")
    try:
        value = ast.literal_eval(_JsonNames().visit(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        hint = " (put text in quotes)" if isinstance(node, (ast.Name, ast.BinOp, ast.Attribute, ast.Call)) else ""
        raise ValueError(f"argument {key!r}: {snippet(written, 60)!r} is not a JSON or Python literal{hint}") from None
    try:
        return to_json_value(value)
    except ValueError as exc:
        raise ValueError(f"argument {key!r}: {exc}") from None


def _read_arguments(args_source: str) -> dict[str, Any] | str:
    """``key=value, ...`` as a dict (keys exactly as written), or the reason it cannot be read."""
    source = "_(" + args_source + "\n)"
    if len(source) > MAX_ACTION_CHARS:
        return f"the call is over the limit of {MAX_ACTION_CHARS} characters; send smaller calls"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in strings warn, they are not errors
            tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        # Point into what the model wrote, not into the "_(" wrapper added above.
        column = exc.offset - 2 if exc.lineno == 1 and exc.offset and exc.offset > 2 else exc.offset
        where = f" (line {exc.lineno}, column {column})" if exc.lineno and column else ""
        return f"the arguments could not be read: syntax error: {exc.msg}{where}"
    except Exception as exc:  # RecursionError, MemoryError, ValueError (NUL bytes)
        return f"the arguments could not be read: {describe_exception(exc)}"
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_"):
        return "the arguments could not be read as key=value pairs"
    if call.args:
        return f"{len(call.args)} positional value(s) given; write every argument as key=value"
    arguments: dict[str, Any] = {}
    source_map = _SourceMap(source)
    for keyword in call.keywords:
        if keyword.arg is None:
            return "'**' unpacking is not allowed; write every argument as key=value"
        written = source_map.segment(keyword) or keyword.arg
        key = written.split("=", 1)[0].strip() or keyword.arg
        if key in arguments:
            return f"argument {key!r} is given twice"
        try:
            arguments[key] = _read_value(source_map, key, keyword.value)
        except ValueError as exc:
            return str(exc)
        except RecursionError:
            return f"argument {key!r} is nested too deeply"
    return arguments


def read_action_call(segment: str) -> ToolCall | str:
    """Read the text after ``Action:`` as one call, or say why it cannot be read."""
    head = _CALL_HEAD.match(segment)
    if head is None:
        first_line = segment.split("\n", 1)[0]
        return f"{snippet(first_line, 80)!r} is not a tool call"
    open_index = head.end() - 1
    close_index = _matching_paren(segment, open_index, MAX_ACTION_CHARS)
    if close_index is None:
        if len(segment) - open_index > MAX_ACTION_CHARS:
            return f"the call is over the limit of {MAX_ACTION_CHARS} characters (or never closed); send smaller calls"
        return "the argument list is never closed with ')' (check brackets and quotes)"
    arguments = _read_arguments(segment[open_index + 1 : close_index])
    if isinstance(arguments, str):
        return f"tool {head.group(1)!r}: {arguments}"
    if nesting_exceeds(arguments):
        return f"tool {head.group(1)!r}: the arguments are nested deeper than {MAX_DEPTH} levels"
    return ToolCall(name=head.group(1), arguments=arguments)


def _inside(blocks: Sequence[ToolCallBlock], starts: Sequence[int], index: int) -> bool:
    """Whether ``index`` falls inside one of the (sorted, disjoint) ``blocks``."""
    i = bisect.bisect_right(starts, index) - 1
    return i >= 0 and index < blocks[i].end


def scan_text_calls(text: str, problems: Problems) -> list[tuple[int, CallOutcome]]:
    """Every call of the ``<tool_call>`` blocks and ``Action:`` lines in ``text``, readable or not, with its position."""
    found: list[tuple[int, CallOutcome]] = []
    lines = LineIndex(text)
    blocks = find_tool_call_blocks(text)
    for block in blocks:
        found.extend((block.start, call) for call in _read_block(lines, block, problems))
    block_starts = [b.start for b in blocks]
    actions = [m for m in _ACTION.finditer(text) if not _inside(blocks, block_starts, m.start())]
    boundaries = sorted({m.start() for m in actions} | set(block_starts) | {len(text)})
    for match in actions:
        # The call may span lines, but never runs into the next Action line or <tool_call> block.
        end = boundaries[bisect.bisect_right(boundaries, match.start())]
        read = read_action_call(text[match.end() : end])
        if isinstance(read, ToolCall):
            found.append((match.start(), read))
            continue
        head = _CALL_HEAD.match(text, match.end(), end)
        reason = f"The Action at line {lines.line(match.start())} could not be read: {read}. Expected: {ACTION_HINT}."
        found.extend((match.start(), o) for o in _kept(problems.unreadable(reason, name=head.group(1) if head else None)))
    found.sort(key=lambda item: item[0])
    return found


class TextParser(PromptedParser):
    """ReAct-style ``Action:`` lines and ``<tool_call>`` blocks, for endpoints without native tools."""

    name = "text"

    def format_tools(self, specs: Iterable[SpecLike]) -> str:
        tools, listing = render_tool_list(specs)
        if not tools:
            return ""
        example_args = example_arguments(tools[0])
        rendered = ", ".join(f"{k}={json.dumps(v)}" for k, v in example_args.items())
        block = json.dumps({"name": tools[0].name, "arguments": example_args})
        return (
            "You can call the following tools.\n\n"
            f"{listing}\n\n"
            "To call a tool, write a line starting with \"Action:\" followed by the tool name and its "
            "arguments as key=value pairs, values written as JSON (strings in double quotes):\n"
            f"Action: {tools[0].name}({rendered})\n"
            "or, equivalently, a JSON block:\n"
            f"{block.join(('<tool_call>', '</tool_call>'))}\n"
            "Write one Action line per call; several calls run in the order written. Everything else is "
            "read as your reasoning. The results come back in the next message, each under its call id "
            "(call_0, call_1, ...)."
        )

    def _parse(self, text: str, native_calls: Sequence[Any] | None) -> ParseResult:
        problems = Problems()
        native = read_native_calls(native_calls, problems)
        found = scan_text_calls(text, problems)
        return ParseResult(outcomes=(*native, *(outcome for _, outcome in found)), problems=problems.result())
