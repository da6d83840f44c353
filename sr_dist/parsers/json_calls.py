"""The ``json`` format: calls written as JSON objects, fenced or bare, one or many.

Accepted call objects: ``{"tool": name, "params": {...}}`` or ``{"name": name, "arguments":
{...}}`` (an ``id`` is kept; ``arguments`` may also be a JSON string, as in OpenAI's wire format).
A ```` ```json ```` block may hold one object, several, or a list of them. Objects outside
fences are found by scanning the prose. JSON that is not a call (no ``tool``/``name`` key) is
left alone. A call-shaped object that cannot be used is an unreadable call, in line with the
readable ones; a fenced JSON block that does not parse is a problem of the reply (it may have
held any number of calls).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sr_dist.parsers._support import (
    MAX_BLOCK_CHARS,
    LineIndex,
    Problems,
    describe_exception,
    snippet,
    strict_raw_decode,
)
from sr_dist.parsers.base import PromptedParser, SpecLike, example_arguments, render_tool_list
from sr_dist.parsers.call_objects import NotACall, call_identity, looks_like_call, read_call_object
from sr_dist.parsers.native_calls import read_native_calls
from sr_dist.parsers.outcomes import CallOutcome, ParseResult
from sr_dist.tools.types import ToolCall

__all__ = ["JsonParser", "Fence", "find_fences", "decode_sequence", "scan_json_calls"]

JSON_HINT = 'write each call as {"tool": "<name>", "params": {<arguments>}} in a ```json block'

_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\n`]*)$", re.M)
_FENCE_CLOSE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t\r]*$", re.M)
_JSON_TAGS = frozenset({"json", "jsonc", "json5", "jsonl"})
#: The tool name at the head of a broken call object, so its answer can still name the tool.
_WRITTEN_NAME = re.compile(r"""\{\s*["']?(?:tool|name)["']?\s*:\s*["']([A-Za-z_][\w.\-]*)["']""")


@dataclass(frozen=True, slots=True)
class Fence:
    """A Markdown code block: its span, its content span, its info string, and whether it closed."""

    start: int
    end: int
    content_start: int
    content_end: int
    info: str
    closed: bool

    @property
    def tag(self) -> str:
        return self.info.split()[0].lower() if self.info.split() else ""


def find_fences(text: str) -> list[Fence]:
    """All fenced code blocks in order. An unclosed fence runs to the end of the text."""
    fences: list[Fence] = []
    pos = 0
    while True:
        opener = _FENCE_OPEN.search(text, pos)
        if opener is None:
            return fences
        marker = opener.group(1)
        content_start = min(opener.end() + 1, len(text))
        close_pos = content_start
        closer = None
        while True:
            candidate = _FENCE_CLOSE.search(text, close_pos)
            if candidate is None:
                break
            found = candidate.group(1)
            if found[0] == marker[0] and len(found) >= len(marker):
                closer = candidate
                break
            close_pos = candidate.end() + 1
        info = opener.group(2).strip()
        if closer is None:
            fences.append(Fence(opener.start(), len(text), content_start, len(text), info, False))
            return fences
        fences.append(Fence(opener.start(), closer.end(), content_start, max(content_start, closer.start()), info, True))
        pos = closer.end()


def decode_sequence(text: str) -> list[Any]:
    """Every JSON value in ``text``, separated by whitespace or commas (JSON lines work too).

    Raises ``ValueError`` (``json.JSONDecodeError``) on the first thing that is not JSON.
    """
    values: list[Any] = []
    index, n = 0, len(text)
    while True:
        while index < n and text[index] in " \t\r\n,":
            index += 1
        if index >= n:
            return values
        value, index = strict_raw_decode(text, index)
        values.append(value)


def _calls_in_value(value: Any) -> list[Any]:
    """A decoded block is one value or a list of values; return the candidates it holds."""
    return list(value) if isinstance(value, list) else [value]


def _balanced_end(text: str, start: int, limit: int) -> int | None:
    """Index just past the brace that closes ``text[start]`` (quote-aware), or None if none by ``limit``."""
    depth = 0
    quote = ""
    index = start
    stop = min(len(text), start + limit)
    while index < stop:
        ch = text[index]
        if quote:
            if ch == "\\":
                index += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


#: Decoding a candidate object first looks this far ahead, then further only if the object is longer.
#: A failed ``json`` decode costs time in proportion to its offset in the document, so trying every
#: ``{`` of a long reply against the whole reply would be quadratic; short windows keep it linear.
_WINDOWS = (256, 16_384)
#: Work allowance per reply, in characters examined, as a multiple of its length (plus a floor).
_BUDGET_FACTOR = 64
_BUDGET_FLOOR = 16_000_000
_RECURSION_COST = 16_384


class _Scan:
    """The scratch state of one scan: where outcomes and problems go, and how much work is left.

    Every decode is charged against a budget proportional to the reply's length, so a reply built
    to be slow (thousands of nested, never-closed objects) costs bounded time; once it runs out
    the rest of the reply is skipped and the model is told so.
    """

    def __init__(self, text: str, problems: Problems) -> None:
        self.text = text
        self.lines = LineIndex(text)
        self.problems = problems
        self.found: list[tuple[int, CallOutcome]] = []
        self.budget = _BUDGET_FACTOR * len(text) + _BUDGET_FLOOR
        self.stopped_at: int | None = None

    def where(self, index: int) -> str:
        return f"line {self.lines.line(index)}"

    def read_values(self, values: Iterable[Any], index: int) -> None:
        for value in values:
            for candidate in _calls_in_value(value):
                read = read_call_object(candidate)
                if isinstance(read, ToolCall):
                    self.found.append((index, read))
                elif isinstance(read, str):
                    self.unusable(index, candidate, f"The tool call at {self.where(index)} cannot be used: {read}. Expected: {JSON_HINT}.")

    def unusable(self, index: int, value: Any, reason: str, name: str | None = None) -> None:
        """Record a call that was written but cannot be run, keeping what it says of its name and id."""
        given_name, call_id = call_identity(value)
        outcome = self.problems.unreadable(reason, name=name or given_name, call_id=call_id)
        if outcome is not None:
            self.found.append((index, outcome))

    def fence(self, fence: Fence) -> None:
        content = self.text[fence.content_start : fence.content_end]
        tagged = fence.tag in _JSON_TAGS
        stripped = content.strip()
        if not tagged and (fence.tag or not stripped.startswith(("{", "["))):
            # Another language, or plain text: read it like prose, so a bare call inside still counts.
            self.bare(fence.content_start, fence.content_end)
            return
        if len(content) > MAX_BLOCK_CHARS:
            self.problems.add(
                f"The JSON block at {self.where(fence.start)} is {len(content)} characters long, over the "
                f"limit of {MAX_BLOCK_CHARS}; it was not read. Send smaller calls."
            )
            return
        self.budget -= 2 * len(content)
        try:
            values = decode_sequence(content)
        except Exception as exc:  # JSONDecodeError, RecursionError, ValueError (huge int), MemoryError
            if tagged or looks_like_call(stripped.lstrip("[ \t\r\n")):
                closed = "" if fence.closed else " (the block is never closed with ```)"
                self.problems.add(
                    f"The JSON block at {self.where(fence.start)} could not be read{closed}: "
                    f"{describe_exception(exc)}. Block starts: {snippet(stripped)!r}. Expected: {JSON_HINT}."
                )
            return
        self.read_values(values, fence.start)

    def decode_at(self, segment: str, index: int) -> tuple[Any, int] | str:
        """The JSON value starting at ``segment[index]`` and the index after it, or why it is not one."""
        rest = len(segment) - index
        for size in _WINDOWS:
            if size >= rest:
                break
            self.budget -= size
            try:
                value, end = strict_raw_decode(segment[index : index + size], 0)
                return value, index + end
            except json.JSONDecodeError as exc:
                if exc.pos < size - 16 and not exc.msg.startswith("Unterminated string"):
                    return describe_exception(exc)  # the fault lies inside the window; more text cannot fix it
            except RecursionError:
                self.budget -= _RECURSION_COST  # nested past the limit inside the window: genuine
                return describe_exception(RecursionError())
            except Exception as exc:  # duplicate keys, huge integers: also faults inside the window
                return describe_exception(exc)
        try:
            value, end = strict_raw_decode(segment, index)
        except json.JSONDecodeError as exc:
            self.budget -= exc.pos
            return describe_exception(exc, index)
        except RecursionError:
            self.budget -= _RECURSION_COST
            return describe_exception(RecursionError())
        except Exception as exc:
            self.budget -= rest
            return describe_exception(exc)
        self.budget -= end - index
        return value, end

    def bare(self, start: int, end: int) -> None:
        """Find the top-level JSON objects in ``text[start:end]`` (prose around them is ignored)."""
        segment = self.text[start:end]
        index = segment.find("{")
        while index != -1:
            if self.budget <= 0:
                self.stopped_at = start + index if self.stopped_at is None else self.stopped_at
                return
            decoded: tuple[Any, int] | str
            after_brace = _skip_blank(segment, index + 1)
            if after_brace < len(segment) and segment[after_brace] not in "\"}":
                decoded = "invalid JSON: expected a key in double quotes after '{'"  # cheap reject: prose, sets, Python dicts
            else:
                decoded = self.decode_at(segment, index)
            if isinstance(decoded, str):
                index = segment.find("{", self.unreadable(segment, start, index, decoded))
                continue
            value, after = decoded
            if after - index > MAX_BLOCK_CHARS and not isinstance(read_call_object(value), NotACall):
                self.unusable(
                    start + index,
                    value,
                    f"The tool call at {self.where(start + index)} is {after - index} characters long, over the "
                    f"limit of {MAX_BLOCK_CHARS}; it was not used. Send smaller calls.",
                )
            else:
                self.read_values([value], start + index)
            index = segment.find("{", after)

    def unreadable(self, segment: str, start: int, index: int, reason: str) -> int:
        """Report a brace that does not open JSON if it looks like a call; return where to resume."""
        fragment = segment[index : index + 300]
        if not looks_like_call(fragment):
            return index + 1
        if self.problems.full:
            self.problems.count_unshown()
            return index + 1
        written = _WRITTEN_NAME.match(fragment)
        self.unusable(
            start + index,
            None,
            f"The tool call at {self.where(start + index)} could not be read: {reason}. "
            f"It starts: {snippet(fragment)!r}. Expected: {JSON_HINT}.",
            name=written.group(1) if written else None,
        )
        skip_to = _balanced_end(segment, index, MAX_BLOCK_CHARS)
        self.budget -= (skip_to if skip_to is not None else len(segment)) - index
        return skip_to if skip_to is not None else index + 1


def _skip_blank(text: str, index: int) -> int:
    n = len(text)
    while index < n and text[index] in " \t\r\n":
        index += 1
    return index


def scan_json_calls(text: str, problems: Problems) -> list[tuple[int, CallOutcome]]:
    """Every JSON call in ``text``, readable or not, with its position: fenced blocks and bare objects."""
    scan = _Scan(text, problems)
    pos = 0
    for fence in find_fences(text):
        scan.bare(pos, fence.start)
        scan.fence(fence)
        pos = fence.end
    scan.bare(pos, len(text))
    if scan.stopped_at is not None:
        problems.add(
            f"Your reply was not read past {scan.where(scan.stopped_at)}: it holds too many broken or deeply "
            "nested braces to search for tool calls. Send short replies with well-formed calls."
        )
    scan.found.sort(key=lambda item: item[0])
    return scan.found


class JsonParser(PromptedParser):
    """Tool calls as JSON objects in the reply text, for endpoints without native tool calling."""

    name = "json"

    def format_tools(self, specs: Iterable[SpecLike]) -> str:
        tools, listing = render_tool_list(specs)
        if not tools:
            return ""
        example = json.dumps({"tool": tools[0].name, "params": example_arguments(tools[0])})
        return (
            "You can call the following tools.\n\n"
            f"{listing}\n\n"
            "To call a tool, write a JSON object with the tool's name under \"tool\" and its arguments "
            "(an object matching the tool's parameter schema) under \"params\", in a ```json block:\n"
            f"```json\n{example}\n```\n"
            "To call several tools at once, put several objects (or a JSON list of them) in the block; "
            "they run in the order written. Everything outside the JSON is read as your reasoning. "
            "The results come back in the next message, each under its call id (call_0, call_1, ...)."
        )

    def _parse(self, text: str, native_calls: Sequence[Any] | None) -> ParseResult:
        problems = Problems()
        native = read_native_calls(native_calls, problems)
        found = scan_json_calls(text, problems)
        return ParseResult(outcomes=(*native, *(outcome for _, outcome in found)), problems=problems.result())
