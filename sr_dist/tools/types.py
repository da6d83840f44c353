"""Values that cross the tool boundary: calls in, results out.

They are frozen so a call or a result can be logged, recorded and replayed without anyone
changing it on the way; parsers, the registry, the agent loop and the recorder all share them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["ToolCall", "ToolCallResult", "ToolError", "ToolRunAbort", "ToolSpec", "ErrorKind", "ERROR_KINDS"]


class ErrorKind(StrEnum):
    """Why a call failed: the closed set ``ToolCallResult.meta_data["error_kind"]`` draws from.

    Members are ``str``s equal to their values, so results, logs and Parquet columns keep the
    plain strings (``ErrorKind.TIMEOUT == "timeout"``); code compares members, never prefixes.
    """

    #: Unknown tool, arguments that break the schema or the signature, an unreadable call.
    INVALID_TOOL_CALL = "invalid_tool_call"
    #: The implementation raised, returned a failure envelope, or broke its output schema.
    TOOL_ERROR = "tool_error"
    #: A result that breaks Thea's envelope rules (see ``sr_dist.tools.outcomes``).
    TOOL_PROTOCOL_VIOLATION = "tool_protocol_violation"
    #: The call ran past its timeout.
    TIMEOUT = "timeout"
    #: A circuit breaker refused the call without running it.
    CIRCUIT_OPEN = "circuit_open"
    #: The run's cancellation event was set.
    CANCELLED = "cancelled"
    #: An MCP server timed out earlier; its state is unknown until it is restarted.
    MCP_STATUS_UNKNOWN = "mcp_status_unknown"


#: The values ``ToolCallResult.meta_data["error_kind"]`` may take when ``ok`` is False.
ERROR_KINDS: tuple[str, ...] = tuple(kind.value for kind in ErrorKind)


class ToolError(Exception):
    """A call that cannot be bound: unknown tool, or arguments that break the input schema.

    ``tool`` names the tool asked for and ``reasons`` lists each problem (one per failing
    argument); both are optional so ``ToolError("message")`` still works.
    """

    def __init__(self, message: str, *, tool: str | None = None, reasons: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.tool = tool
        self.reasons = tuple(reasons)

    def __reduce__(self) -> tuple[Any, ...]:  # keep tool/reasons when pickled (Ray, recorders)
        return (_rebuild_tool_error, (str(self), self.tool, self.reasons))


def _rebuild_tool_error(message: str, tool: str | None, reasons: tuple[str, ...]) -> ToolError:
    return ToolError(message, tool=tool, reasons=reasons)


class ToolRunAbort(Exception):
    """Control flow, not failure: a tool raises it to end the agent's run; never swallowed."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about one tool: its name, what it does, and its JSON Schema input."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One normalized request to run a tool, whatever format the model used to ask for it."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """What a tool call produced.

    ``result`` is the full structured value (for recording); ``result_str`` is the bounded,
    model-readable text; ``meta_data`` carries at least ``tool``, ``elapsed_s``, ``truncated``
    and, when ``ok`` is False, ``error_kind`` (an :class:`ErrorKind` value).
    """

    ok: bool
    result: Any
    result_str: str
    meta_data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def error_kind(self) -> str | None:
        return None if self.ok else self.meta_data.get("error_kind")

    def envelope(self) -> dict[str, Any]:
        """Thea's result envelope: ``{"success": True, ...}`` or ``{"success": False, "reason": ...}``."""
        if not self.ok:
            reason = self.result_str.strip() or str(self.meta_data.get("error_kind") or "tool failed")
            return {"success": False, "reason": reason}
        if isinstance(self.result, Mapping):
            body = {k: v for k, v in self.result.items() if k != "success"}
            if not body:
                body = {"observation": self.result_str}
            return {"success": True, **body}
        return {"success": True, "observation": self.result if self.result is not None else self.result_str}
