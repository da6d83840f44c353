"""Deciding whether a decoded JSON value is a tool call, and reading it if so.

Shared by the ``json`` parser (bare and fenced objects), the ``text`` parser (``<tool_call>``
blocks) and the ``openai`` parser's optional text fallback, so all three accept the same shapes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sr_dist.parsers._support import MAX_DEPTH, describe_exception, nesting_exceeds, strict_loads
from sr_dist.tools.types import ToolCall

__all__ = [
    "NOT_A_CALL",
    "NotACall",
    "read_call_object",
    "call_identity",
    "arguments_from",
    "looks_like_call",
    "json_kind",
]

_NAME_KEYS = ("tool", "name")
_ARG_KEYS = ("params", "arguments")
_ALLOWED_KEYS = frozenset({*_NAME_KEYS, *_ARG_KEYS, "id", "type"})


@dataclass(frozen=True, slots=True)
class NotACall:
    """Marker: the value is ordinary data, not an attempt to call a tool."""


NOT_A_CALL = NotACall()


def arguments_from(raw: Any) -> dict[str, Any] | str:
    """Normalize a call's arguments to a dict, or return a reason they are unusable.

    ``None`` and an empty or blank string mean no arguments. A string is read as JSON, because
    models that imitate OpenAI's wire format send ``"arguments": "{...}"``. Arguments nested
    deeper than ``MAX_DEPTH`` are refused.
    """
    arguments = _arguments_dict(raw)
    if isinstance(arguments, dict) and nesting_exceeds(arguments):
        return f"the arguments are nested deeper than {MAX_DEPTH} levels"
    return arguments


def _arguments_dict(raw: Any) -> dict[str, Any] | str:
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = strict_loads(raw)
        except Exception as exc:  # JSONDecodeError, RecursionError, ValueError for huge ints, ...
            return f"the arguments could not be read ({describe_exception(exc)})"
        if not isinstance(raw, dict):
            return f"the arguments must be a JSON object, got {json_kind(raw)}"
        return raw
    if isinstance(raw, Mapping):
        bad = [k for k in raw if not isinstance(k, str)]
        if bad:
            return f"argument names must be strings, got {bad[0]!r}"
        return dict(raw)
    return f"the arguments must be a JSON object, got {json_kind(raw)}"


def read_call_object(value: Any) -> ToolCall | NotACall | str:
    """Read one decoded JSON value as a call.

    Returns a :class:`ToolCall`; :data:`NOT_A_CALL` for data that is not a call (no ``tool`` or
    ``name`` key, or a ``name`` among unrelated keys, such as ``{"name": "Ada", "age": 36}``);
    or a string saying why a call-shaped object cannot be used.
    """
    if not isinstance(value, dict):
        return NOT_A_CALL
    if "tool" not in value and "name" not in value:
        inner = value.get("function")
        wrapped = isinstance(inner, dict) and ("name" in inner or "tool" in inner)
        if isinstance(inner, dict) and wrapped and set(value) <= {"function", "id", "type"}:
            merged = dict(inner)
            if "id" in value and "id" not in merged:
                merged["id"] = value["id"]
            return read_call_object(merged)
        return NOT_A_CALL
    # "type" is accepted only as OpenAI's {"type": "function"}; any other type marks a record.
    allowed = _ALLOWED_KEYS if value.get("type", "function") == "function" else _ALLOWED_KEYS - {"type"}
    extra = sorted(k for k in value if k not in allowed)
    has_args_key = any(k in value for k in _ARG_KEYS)
    if "tool" not in value and not has_args_key and extra:
        return NOT_A_CALL  # a record that happens to have a "name" field
    if "tool" in value and "name" in value:
        return 'give the tool name under one key, "tool" or "name", not both'
    if all(k in value for k in _ARG_KEYS):
        return 'give the arguments under one key, "params" or "arguments", not both'
    if extra:
        shown = ", ".join(repr(k) for k in extra[:5])
        return f"unexpected key(s) {shown}; put the tool's arguments inside \"params\" (or \"arguments\")"
    name_key = "tool" if "tool" in value else "name"
    name = value[name_key]
    if not isinstance(name, str) or not name.strip():
        got = "a blank string" if isinstance(name, str) else json_kind(name)
        return f'"{name_key}" must be the tool name as a non-empty string, got {got}'
    args_key = next((k for k in _ARG_KEYS if k in value), None)
    arguments = arguments_from(value[args_key]) if args_key else {}
    if isinstance(arguments, str):
        return f"tool {name.strip()!r}: {arguments}"
    call_id = value.get("id")
    if isinstance(call_id, int) and not isinstance(call_id, bool):
        call_id = str(call_id)
    if not isinstance(call_id, str) or not call_id.strip():
        call_id = None
    return ToolCall(name=name.strip(), arguments=arguments, id=call_id)


def call_identity(value: Any) -> tuple[str | None, str | None]:
    """The tool name and id a call-shaped object gives, where they are usable, else ``None``.

    Used for a call that cannot be run, so its answer can still name the tool and keep the id.
    """
    if not isinstance(value, dict):
        return None, None
    inner = value.get("function")
    body = inner if "tool" not in value and "name" not in value and isinstance(inner, dict) else value
    name = body.get("tool", body.get("name"))
    call_id = value.get("id", body.get("id"))
    if isinstance(call_id, int) and not isinstance(call_id, bool):
        call_id = str(call_id)
    return (
        name.strip() if isinstance(name, str) and name.strip() else None,
        call_id if isinstance(call_id, str) and call_id.strip() else None,
    )


_CALL_HINT = re.compile(r"""\{\s*["']?(?:tool|name|params|arguments|function)["']?\s*:""")


def looks_like_call(fragment: str) -> bool:
    """Heuristic for unreadable text that starts with ``{``: was it meant as a tool call?

    True when the first key names a tool or its arguments (quoted or not), as every call the
    prompt teaches does; a nested ``"tool"`` key deeper in some data does not count.
    """
    return _CALL_HINT.match(fragment) is not None


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
