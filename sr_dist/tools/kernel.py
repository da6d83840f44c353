"""The jharness kernel names, so jharness-toolkit code runs on sr-dist's tool layer.

jharness writes a tool as ``async def tool(call: ToolCall, context: ToolContext) -> ToolResult``
and answers with ``SettledResult(ToolSuccess(content, structured_content=...))``. These are the
values it uses; :class:`FunctionTool` recognises such a function by its annotations and calls it
with the call and a context, then records ``structured_content`` (or the text parts) as the
result, so such a tool joins a ``ToolRegistry`` like any other. Only what jharness's Quick Start
uses is here; it is a compatibility layer, not a second tool model.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from sr_dist.tools import types as _types
from sr_dist.tools.execution import is_cancel_requested

__all__ = [
    "ContentPart",
    "SettledResult",
    "ToolCall",
    "ToolContext",
    "ToolExecution",
    "ToolFailure",
    "ToolResult",
    "ToolSuccess",
    "is_kernel_function",
    "adapt_kernel_function",
    "settled_value",
]


class ToolCall(_types.ToolCall):
    """jharness's ``ToolCall(id, name, arguments)``: the positional order differs, the value is
    an sr-dist :class:`~sr_dist.tools.types.ToolCall`, so catalogs and parsers take it as is."""

    __slots__ = ()

    def __init__(self, id: str | None, name: str, arguments: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=name, arguments=dict(arguments) if arguments is not None else {}, id=id)


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """A tool's run policy as jharness declares it; ``function_tool(execution=...)`` reads it."""

    idempotent: bool = False
    timeout_seconds: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.idempotent, bool):
            raise ValueError(f"ToolExecution.idempotent must be True or False, got {self.idempotent!r}")
        if self.timeout_seconds is not None and (
            isinstance(self.timeout_seconds, bool)
            or not isinstance(self.timeout_seconds, (int, float))
            or not self.timeout_seconds > 0
        ):
            raise ValueError(f"ToolExecution.timeout_seconds must be a positive number or None, got {self.timeout_seconds!r}")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a jharness-style tool gets beside its call: the tool's run-time context mapping."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def cancel_requested(self) -> bool:
        """True once the run's ``cancel_event`` is set; long tools should stop then."""
        return is_cancel_requested(self.values.get("cancel_event"))


@dataclass(frozen=True, slots=True)
class ContentPart:
    """One piece of model-visible content; only text parts exist here."""

    kind: str
    text: str = ""

    @classmethod
    def text_part(cls, text: str) -> ContentPart:
        return cls("text", str(text))


@dataclass(frozen=True, slots=True)
class ToolSuccess:
    """A tool that worked: its content parts and, optionally, a structured value."""

    content: tuple[ContentPart, ...] = ()
    structured_content: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolFailure:
    """A failure the model should read (sr-dist's ``{"success": False, "reason": ...}``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class SettledResult:
    """A finished call: ``SettledResult(ToolSuccess(...))`` or ``SettledResult(ToolFailure(...))``."""

    outcome: ToolSuccess | ToolFailure


#: What a jharness-style tool returns.
ToolResult: TypeAlias = SettledResult


def settled_value(result: Any) -> Any:
    """The value sr-dist records for a jharness result.

    ``structured_content`` when there is one (so a declared output schema checks it), else the
    text parts joined by newlines; a failure becomes the failure envelope. Anything else is a
    ``TypeError``, which the call turns into a ``tool_error`` result.
    """
    if not isinstance(result, SettledResult):
        raise TypeError(
            "a jharness-style tool must return SettledResult(ToolSuccess(...)) or "
            f"SettledResult(ToolFailure(...)), got {type(result).__name__}"
        )
    outcome = result.outcome
    if isinstance(outcome, ToolFailure):
        return {"success": False, "reason": outcome.reason}
    if not isinstance(outcome, ToolSuccess):
        raise TypeError(f"SettledResult holds a ToolSuccess or a ToolFailure, got {type(outcome).__name__}")
    if outcome.structured_content is not None:
        return dict(outcome.structured_content)
    return "\n".join(part.text for part in outcome.content if part.kind == "text")


def _annotation_is(annotation: Any, expected: type, name: str) -> bool:
    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] == name
    return isinstance(annotation, type) and issubclass(annotation, expected)


def is_kernel_function(fn: Callable[..., Any]) -> bool:
    """True for ``fn(call: ToolCall, context: ToolContext)``, jharness's tool signature."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    params = list(signature.parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(params) != 2 or any(p.kind not in positional for p in params):
        return False
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable names: fall back to the written annotations
        hints = {}
    first, second = (hints.get(p.name, p.annotation) for p in params)
    return _annotation_is(first, _types.ToolCall, "ToolCall") and _annotation_is(second, ToolContext, "ToolContext")


def adapt_kernel_function(fn: Callable[..., Any], name: str, context: Mapping[str, Any]) -> Callable[..., Any]:
    """A keyword callable (sync or async, like ``fn``) that runs a jharness-style ``fn``.

    The call it passes has no id (the catalog keeps the id in ``meta_data["call_id"]``).
    """
    tool_context = ToolContext(context)

    if inspect.iscoroutinefunction(fn):

        async def run_async(**arguments: Any) -> Any:
            return settled_value(await fn(ToolCall(None, name, arguments), tool_context))

        return run_async

    def run(**arguments: Any) -> Any:
        return settled_value(fn(ToolCall(None, name, arguments), tool_context))

    return run
