"""Pure translations between MCP and sr-dist's tool contract.

How an MCP tool is named in the catalog and described (``ToolMetadata``), how long a call may
take, and how a ``CallToolResult`` becomes a ``ToolCallResult``. No I/O, no event loop: these are
tested against tables.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types

from sr_dist.tools.formatting import format_result_dict
from sr_dist.tools.mcp.config import MCPConfigError, MCPServerConfig
from sr_dist.tools.metadata import TOOL_NAME_PATTERN, ToolMetadata
from sr_dist.tools.outcomes import failure_result, is_envelope_failure, success_result, value_result
from sr_dist.tools.types import ToolCallResult

__all__ = [
    "catalog_name",
    "tool_metadata",
    "timeout_arguments",
    "call_timeout_s",
    "content_text",
    "call_result",
    "TIMEOUT_ARGUMENT",
    "TIMEOUT_ARGUMENTS",
]

#: The argument name that lets a call extend its own timeout (sr-dist's spelling).
TIMEOUT_ARGUMENT = "timeout_s"
#: Every argument name that does so: ours and Thea's seed's ``timeout_sec``.
TIMEOUT_ARGUMENTS = (TIMEOUT_ARGUMENT, "timeout_sec")
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def catalog_name(prefix: str, remote_name: str, *, server: str) -> str:
    """The name a server's tool gets in the catalog: ``prefix + name``, with characters that
    providers refuse (such as ``.`` or ``/``) replaced by ``_``. ``MCPConfigError`` when the
    result is empty or longer than 64 characters."""
    name = prefix + _UNSAFE_NAME_CHARS.sub("_", remote_name)
    if not TOOL_NAME_PATTERN.match(name):
        raise MCPConfigError(
            f"MCP server {server!r}: tool {remote_name!r} cannot be named {name!r} in the catalog "
            "(1-64 letters, digits, '_' or '-'); use a shorter prefix"
        )
    return name


def timeout_arguments(parameters: Mapping[str, Any]) -> tuple[str, ...]:
    """Which of :data:`TIMEOUT_ARGUMENTS` the input schema declares as properties."""
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return ()
    return tuple(name for name in TIMEOUT_ARGUMENTS if name in properties)


def _requested_s(value: Any) -> float | None:
    """A usable requested timeout: a finite number of seconds above 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def call_timeout_s(config: MCPServerConfig, parameters: Mapping[str, Any], arguments: Mapping[str, Any]) -> float:
    """How long one call may take before it counts as timed out.

    ``call_timeout_s``, extended to ``T + timeout_argument_margin_s`` when the tool's schema
    declares a ``timeout_s`` or ``timeout_sec`` argument and the call passes a larger ``T`` (the
    larger of the two if it passes both); never above ``max_call_timeout_s`` (the model chooses
    the argument, so it must not make the wait unbounded).
    """
    bound = float(config.call_timeout_s)
    requested = [t for t in (_requested_s(arguments.get(n)) for n in timeout_arguments(parameters)) if t is not None]
    if requested:
        bound = max(bound, max(requested) + float(config.timeout_argument_margin_s))
    return min(bound, float(config.max_call_timeout_s))


def tool_metadata(config: MCPServerConfig, tool: mcp_types.Tool, *, name: str | None = None) -> ToolMetadata:
    """What the catalog knows about a server's tool: its schema as given, and its hints.

    The servers are trusted launch configuration, so their ``readOnlyHint`` and
    ``idempotentHint`` annotations are believed (a read-only tool is idempotent too); the agent
    runs read-only, idempotent calls of one turn side by side.
    """
    annotations = tool.annotations
    read_only = bool(annotations is not None and annotations.read_only_hint)
    idempotent = read_only or bool(annotations is not None and annotations.idempotent_hint)
    title = tool.title or (annotations.title if annotations is not None else None)
    description = (tool.description or title or f"Tool {tool.name!r} of MCP server {config.name!r}.").strip()
    parameters = dict(tool.input_schema) if isinstance(tool.input_schema, Mapping) else {}
    parameters.setdefault("type", "object")
    return ToolMetadata(
        name=name or catalog_name(config.prefix, tool.name, server=config.name),
        description=description,
        parameters=parameters,
        idempotent=idempotent,
        read_only=read_only,
        timeout_s=float(config.call_timeout_s),
    )


def _block_text(block: Any) -> str:
    """One content block as text the model can read (binary content is described, not inlined)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(getattr(block, "data", "") or "") * 3 // 4
        return f"[{kind}: {getattr(block, 'mime_type', 'unknown type')}, about {size} bytes]"
    if kind == "resource_link":
        return f"[resource: {block.uri}" + (f" ({block.name})" if getattr(block, "name", None) else "") + "]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[resource: {resource.uri}, binary]"
    return f"[{kind or 'unknown'} content]"


def content_text(content: Sequence[Any]) -> str:
    """The result's content blocks joined into one text (text blocks verbatim, in order)."""
    return "\n".join(_block_text(block) for block in content)


def call_result(
    tool: str,
    server: str,
    result: mcp_types.CallToolResult,
    *,
    elapsed_s: float,
    max_chars: int,
) -> ToolCallResult:
    """A ``CallToolResult`` as a ``ToolCallResult``.

    ``result`` is ``structuredContent`` when the server sent an object, else ``{"text": ...}``
    (plus ``structured`` for a non-object value); ``result_str`` is the content text (the
    structured value rendered when there is none). ``isError`` is a failure the model reads
    (``tool_error``, ``model_visible``) with the server's text as the reason.
    """
    text = content_text(result.content).strip()
    if result.is_error:
        reason = text or f"MCP server {server!r} reported an error in tool {tool!r} without a message"
        return failure_result(
            tool,
            "tool_error",
            reason,
            elapsed_s=elapsed_s,
            max_chars=max_chars,
            model_visible=True,
            mcp_is_error=True,
            mcp_server=server,
        )
    structured = result.structured_content
    if isinstance(structured, Mapping):
        value: dict[str, Any] = dict(structured)
    else:
        value = {"text": text}
        if structured is not None:
            value["structured"] = structured
    if is_envelope_failure(value):  # Thea's envelope in structured content: a model-visible failure
        return value_result(tool, value, elapsed_s=elapsed_s, max_chars=max_chars, mcp_server=server)
    shown = text or format_result_dict(value)
    return success_result(tool, value, elapsed_s=elapsed_s, max_chars=max_chars, formatter=lambda _: shown, mcp_server=server)
