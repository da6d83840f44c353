"""The run-time context a tool reads: its type parameter and the one way to look a value up.

A tool's context holds what the model must not repeat in every call (dataset, evaluator,
recorder, ``cancel_event``). User tools pass a plain mapping; typed tools (the SR domain's
frozen episode context) pass an object with attributes. :func:`context_value` reads both, so the
call runner and the ``BaseTool`` helpers never care which one a tool chose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from typing_extensions import TypeVar

__all__ = ["ContextT", "context_value"]

#: A tool's context type; a plain ``Mapping[str, Any]`` unless the tool names another.
ContextT = TypeVar("ContextT", default=Mapping[str, Any])


def context_value(context: object, key: str, default: Any = None) -> Any:
    """``context[key]`` for a mapping, ``context.key`` for any other object; ``default`` if absent."""
    if context is None:
        return default
    if isinstance(context, Mapping):
        return context.get(key, default)
    return getattr(context, key, default)
