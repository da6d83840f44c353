"""What a tool declares about itself, and the one protocol every tool kind satisfies.

``ToolMetadata`` is the single description shared by class tools, function tools, wrappers and
(later) MCP-served tools; ``Tool`` is the structural protocol the registry accepts, so anything
with ``metadata`` and an async ``acall`` joins the same catalog.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from sr_dist.tools.types import ToolCallResult, ToolSpec

__all__ = ["ToolMetadata", "Tool", "TOOL_NAME_PATTERN", "MIN_RESULT_CHARS", "NO_DESCRIPTION"]

#: Names every provider accepts (OpenAI function names are the strictest).
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: Below this a truncated ``result_str`` could not hold the truncation marker.
MIN_RESULT_CHARS = 64
#: What a class tool is described as when its ``execute`` has no docstring (never an inherited one).
NO_DESCRIPTION = "(no description provided)"


@dataclass(frozen=True, slots=True)
class ToolMetadata:
    """A tool's public description and run policy.

    ``description`` and ``parameters`` may be left ``None`` on a class tool: they are then inferred
    from ``execute`` (explicit values always win). ``idempotent`` allows :class:`RetryingTool` to
    retry; ``timeout_s`` bounds one call; ``max_result_chars`` bounds ``result_str``.
    ``evaluated`` marks a tool whose runs an evaluator checks afterwards (Thea's "evaluated
    physical tool"): each success must carry a non-empty ``run_id`` to check it by.
    """

    name: str
    description: str | None = None
    parameters: Mapping[str, Any] | None = None
    output_schema: Mapping[str, Any] | None = None
    idempotent: bool = False
    read_only: bool = False
    timeout_s: float | None = None
    max_result_chars: int = 8000
    evaluated: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME_PATTERN.match(self.name):
            raise ValueError(f"tool name {self.name!r} is invalid: use 1-64 letters, digits, '_' or '-'")
        if self.description is not None and not isinstance(self.description, str):
            raise ValueError(f"tool {self.name!r}: description must be a string")
        for field_name in ("parameters", "output_schema"):
            value = getattr(self, field_name)
            if value is not None and not isinstance(value, Mapping):
                raise ValueError(f"tool {self.name!r}: {field_name} must be a JSON Schema object (a mapping)")
        if not isinstance(self.evaluated, bool):
            raise ValueError(f"tool {self.name!r}: evaluated must be True or False, got {self.evaluated!r}")
        if self.timeout_s is not None and (
            isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0
        ):
            raise ValueError(f"tool {self.name!r}: timeout_s must be a positive number or None, got {self.timeout_s!r}")
        if (
            isinstance(self.max_result_chars, bool)
            or not isinstance(self.max_result_chars, int)
            or self.max_result_chars < MIN_RESULT_CHARS
        ):
            raise ValueError(
                f"tool {self.name!r}: max_result_chars must be an int >= {MIN_RESULT_CHARS}, "
                f"got {self.max_result_chars!r}"
            )

    def with_(self, **changes: Any) -> ToolMetadata:
        """A copy with some fields replaced (validated again)."""
        return replace(self, **changes)

    @property
    def spec(self) -> ToolSpec:
        """What the model is told: name, description and input schema."""
        return ToolSpec(
            name=self.name,
            description=self.description or "",
            parameters=dict(self.parameters) if self.parameters is not None else {"type": "object", "properties": {}},
        )


@runtime_checkable
class Tool(Protocol):
    """Anything the registry can hold: it describes itself and can be awaited with keywords.

    Every tool kind in sr-dist (``BaseTool`` subclasses, function tools, resilience wrappers, MCP
    tools) satisfies this; most also offer a sync ``__call__(**arguments)`` and ``cancel()``.
    """

    @property
    def metadata(self) -> ToolMetadata: ...

    async def acall(self, **arguments: Any) -> ToolCallResult: ...
