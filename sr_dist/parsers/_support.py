"""Small pure helpers shared by the parsers: limits, strict JSON, error wording, id assignment.

Kept apart from the parsers so each parser module holds only the grammar it reads.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, TypeVar

from sr_dist.parsers.outcomes import CallOutcome, UnreadableCall

__all__ = [
    "MAX_TEXT_CHARS",
    "MAX_BLOCK_CHARS",
    "MAX_ERRORS",
    "MAX_DEPTH",
    "nesting_exceeds",
    "Problems",
    "DuplicateKeyError",
    "strict_loads",
    "strict_raw_decode",
    "describe_exception",
    "to_json_value",
    "snippet",
    "LineIndex",
    "assign_ids",
]

#: A model reply longer than this is refused as a whole (no scan at all).
MAX_TEXT_CHARS = 2_000_000
#: One call-shaped block (a JSON object, a fenced block, an Action call) longer than this is refused.
MAX_BLOCK_CHARS = 1_000_000
#: Arguments nested deeper than this are refused: no tool needs them, and deeper values would
#: strain every recursive consumer downstream (validation, json.dumps, the recorder).
MAX_DEPTH = 64
#: At most this many problems are reported per reply; the rest are counted, not listed.
MAX_ERRORS = 10


class Problems:
    """Collects one ``parse`` call's unreadable calls and reply-level problems, capped at ``MAX_ERRORS``.

    Past the cap, problems are counted, not worded, and the count is reported once at the end.
    Unreadable calls that must be answered (native ones: the provider expects a reply to every
    ``tool_call_id``) are always kept, so the loop can answer each; they still count toward the cap.
    """

    __slots__ = ("_messages", "_shown", "_dropped")

    def __init__(self) -> None:
        self._messages: list[str] = []
        self._shown = 0
        self._dropped = 0

    @property
    def full(self) -> bool:
        """True once the cap is reached: callers may skip work spent only on wording errors."""
        return self._shown >= MAX_ERRORS

    @property
    def any(self) -> bool:
        """Whether anything at all was reported (shown or only counted)."""
        return bool(self._shown or self._dropped)

    def add(self, message: str) -> None:
        """Report a problem of the whole reply, one that belongs to no single call."""
        if self.full:
            self._dropped += 1
        else:
            self._messages.append(message)
            self._shown += 1

    def unreadable(
        self, reason: str, *, name: str | None = None, call_id: str | None = None, must_answer: bool = False
    ) -> UnreadableCall | None:
        """An unreadable call to return in line with the readable ones; ``None`` (counted) past the cap."""
        if self.full and not must_answer:
            self._dropped += 1
            return None
        self._shown += 1
        return UnreadableCall(id=call_id, name=name, reason=reason)

    def count_unshown(self) -> None:
        """Count a problem without wording it (used once :attr:`full`, to skip the work)."""
        self._dropped += 1

    def result(self) -> tuple[str, ...]:
        """The reply-level problems, then how many problems were not shown, if any."""
        if self._dropped:
            return (*self._messages, f"... and {self._dropped} more problem(s) not shown.")
        return tuple(self._messages)


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice; the later value would silently win."""


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"duplicate key {key!r}")
        out[key] = value
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_reject_duplicate_keys)


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses duplicate keys (a silent overwrite would lose an argument)."""
    value, end = _DECODER.raw_decode(text, _skip_ws(text, 0))
    if _skip_ws(text, end) != len(text):
        raise json.JSONDecodeError("Extra data after the JSON value", text, _skip_ws(text, end))
    return value


def strict_raw_decode(text: str, index: int) -> tuple[Any, int]:
    """Decode one JSON value starting exactly at ``index``; return it and the index after it."""
    return _DECODER.raw_decode(text, index)


def _skip_ws(text: str, index: int) -> int:
    n = len(text)
    while index < n and text[index] in " \t\r\n":
        index += 1
    return index


def describe_exception(exc: BaseException, start: int = 0) -> str:
    """A one-line, model-readable account of why a block could not be read.

    For JSON errors the line and column are counted from ``start``, where the block begins in
    the decoded document, so the model is pointed into its own call rather than the whole reply.
    """
    if isinstance(exc, json.JSONDecodeError):
        start = min(max(0, start), exc.pos)
        before = exc.doc[start : exc.pos]
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        return f"invalid JSON: {exc.msg} (line {line}, column {column})"
    if isinstance(exc, DuplicateKeyError):
        return f"invalid JSON: {exc}"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    if isinstance(exc, MemoryError):
        return "it is too large"
    if isinstance(exc, SyntaxError):
        where = f" (column {exc.offset})" if exc.offset else ""
        return f"syntax error: {exc.msg}{where}"
    text = str(exc).strip() or type(exc).__name__
    return text[:200]


def to_json_value(value: Any) -> Any:
    """Turn a Python literal into plain JSON data (tuples become lists); refuse what JSON lacks.

    Raises ``ValueError`` naming the offending value, so the model can be told what to change.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"object keys must be strings, got {key!r}")
            out[key] = to_json_value(item)
        return out
    kind = {set: "a set", frozenset: "a set", bytes: "bytes", complex: "a complex number"}.get(type(value))
    if value is Ellipsis:
        kind = "'...'"
    raise ValueError(f"{kind or type(value).__name__} is not a JSON value; use a list, object, string, number, true/false or null")


def nesting_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists/dicts in ``value`` nest deeper than ``limit`` (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def snippet(text: str, limit: int = 120) -> str:
    """The start of ``text`` on one line, shortened with an ellipsis, for quoting back to the model."""
    flat = " ".join(text[: limit * 4].split())  # only the head is shown, so only the head is read
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class LineIndex:
    """1-based line numbers for positions in one text; the newlines are found once, on first use.

    Counting newlines afresh for every error would make a reply full of errors quadratic to read.
    """

    __slots__ = ("_text", "_starts")

    def __init__(self, text: str) -> None:
        self._text = text
        self._starts: list[int] | None = None

    def line(self, index: int) -> int:
        if self._starts is None:
            self._starts = [m.end() for m in _NEWLINE.finditer(self._text)]
        return bisect.bisect_right(self._starts, index) + 1


_NEWLINE = re.compile("\n")


_Outcome = TypeVar("_Outcome", bound=CallOutcome)


def assign_ids(outcomes: Iterable[_Outcome]) -> tuple[_Outcome, ...]:
    """Give every call without an id, or with the id of an earlier call of the turn (a provider
    that repeats one), a unique ``call_<position>`` id, so results can be matched back.

    Readable and unreadable calls share one sequence of positions: the model's third call is
    ``call_2`` whether or not it could be read.
    """
    ordered = list(outcomes)
    used = {c.id for c in ordered if c.id}
    kept: set[str] = set()
    out: list[_Outcome] = []
    for index, call in enumerate(ordered):
        if call.id and call.id not in kept:
            kept.add(call.id)
            out.append(call)
            continue
        candidate = f"call_{index}"
        suffix = 1
        while candidate in used:
            candidate = f"call_{index}_{suffix}"
            suffix += 1
        used.add(candidate)
        out.append(replace(call, id=candidate))
    return tuple(out)
