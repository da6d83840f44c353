"""Normalizing provider-native tool calls (dicts or SDK objects) to :class:`ToolCall`.

Accepted shapes, as dicts or as objects with the same attributes:

* OpenAI chat: ``{"id", "type": "function", "function": {"name", "arguments": "<json>"}}``;
* flat: ``{"id" or "call_id", "name", "arguments"}`` (OpenAI Responses ``function_call`` items);
* Anthropic ``tool_use`` blocks: ``{"id", "type": "tool_use", "name", "input": {...}}``.

``arguments`` may be a JSON string (empty means ``{}``) or already a dict. A call whose
arguments are not a JSON object becomes an :class:`UnreadableCall` with its id and a
model-facing reason; it is never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sr_dist.parsers._support import Problems, describe_exception, snippet
from sr_dist.parsers.call_objects import arguments_from, json_kind
from sr_dist.parsers.outcomes import CallOutcome
from sr_dist.tools.types import ToolCall

__all__ = ["read_native_calls"]

NATIVE_HINT = 'send the arguments as one JSON object matching the tool\'s parameters, e.g. {"key": "value"}'


def _field(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _as_id(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    return None


def _identity(item: Any) -> tuple[str | None, str | None]:
    """The call's id and tool name, where readable; never raises (SDK objects may misbehave)."""
    try:
        call_id = _as_id(_field(item, "id")) or _as_id(_field(item, "call_id"))
    except Exception:
        return None, None
    try:
        function = _field(item, "function")
        name = _field(function if function is not None else item, "name")
    except Exception:
        return call_id, None
    return call_id, name.strip() if isinstance(name, str) and name.strip() else None


def _read_one(item: Any, position: int) -> ToolCall | str:
    kind = _field(item, "type")
    if kind not in (None, "function", "function_call", "tool_use"):
        return f"Tool call #{position + 1} has type {kind!r}, which is not supported; use a function tool call."
    function = _field(item, "function")
    source = function if function is not None else item
    call_id = _as_id(_field(item, "id")) or _as_id(_field(item, "call_id"))
    name = _field(source, "name")
    raw_args = _field(source, "input") if kind == "tool_use" else _field(source, "arguments")
    label = f"Tool call #{position + 1}" + (f" (id {call_id})" if call_id else "")
    if not isinstance(name, str) or not name.strip():
        return f"{label} has no tool name (got {json_kind(name)}); name the tool to call."
    arguments = arguments_from(raw_args)
    if isinstance(arguments, str):
        shown = f" You sent: {snippet(raw_args)!r}." if isinstance(raw_args, str) else ""
        return f"{label} to {name.strip()!r} could not be used: {arguments}.{shown} Please {NATIVE_HINT}."
    return ToolCall(name=name.strip(), arguments=arguments, id=call_id)


def read_native_calls(native_calls: Any, problems: Problems) -> list[CallOutcome]:
    """One outcome per provider tool call, in order: a ``ToolCall``, or an ``UnreadableCall`` saying why.

    Unreadable native calls are always kept (never capped), because the provider expects an
    answer to every call id it sent.
    """
    if native_calls is None:
        return []
    if isinstance(native_calls, Mapping) or hasattr(native_calls, "function"):
        native_calls = [native_calls]  # one call passed on its own (SDK models are iterable: test first)
    elif isinstance(native_calls, (str, bytes)) or not isinstance(native_calls, Iterable):
        problems.add(f"Internal error: native tool calls came as {type(native_calls).__name__}, not a list.")
        return []
    outcomes: list[CallOutcome] = []
    for position, item in enumerate(native_calls):
        try:
            read = _read_one(item, position)
        except Exception as exc:  # an SDK object whose attributes misbehave, deep recursion, ...
            read = f"Tool call #{position + 1} could not be read ({describe_exception(exc)}). Please {NATIVE_HINT}."
        if isinstance(read, ToolCall):
            outcomes.append(read)
            continue
        call_id, name = _identity(item)
        unreadable = problems.unreadable(read, name=name, call_id=call_id, must_answer=True)
        if unreadable is not None:
            outcomes.append(unreadable)
    return outcomes
