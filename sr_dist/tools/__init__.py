"""The tool layer: how sr-dist's agents describe, validate, call and harden their tools.

Every tool kind (a ``BaseTool`` subclass, a function tool, a ``BuiltinTool``, a resilience
wrapper, later an MCP-served tool) is called the same way, ``tool(**arguments)`` or
``await tool.acall(**arguments)``, and returns a ``ToolCallResult``. A ``ToolRegistry`` holds
tool instances; ``registry.open_catalog()`` is the immutable view an agent run uses. jharness's kernel
names live in :mod:`sr_dist.tools.kernel` (``from sr_dist.tools.kernel import ...``, as a port
of ``from jharness.kernel import ...`` reads). See ``docs/tools.md``.
"""

from sr_dist.tools.base import BaseTool
from sr_dist.tools.formatting import format_result_dict, strip_ansi, truncate
from sr_dist.tools.formula_helpers import ParsedFormula
from sr_dist.tools.function import BuiltinTool, FunctionTool, function_tool
from sr_dist.tools.metadata import Tool, ToolMetadata
from sr_dist.tools.outcomes import is_implementation_failure
from sr_dist.tools.registry import BoundCall, ToolCatalog, ToolRegistry
from sr_dist.tools.resilience import CircuitBreakingTool, RetryingTool
from sr_dist.tools.types import ERROR_KINDS, ErrorKind, ToolCall, ToolCallResult, ToolError, ToolRunAbort, ToolSpec

__all__ = [
    "BaseTool",
    "ToolMetadata",
    "ToolCall",
    "ToolCallResult",
    "ToolRunAbort",
    "ToolError",
    "ToolRegistry",
    "function_tool",
    "BuiltinTool",
    "RetryingTool",
    "CircuitBreakingTool",
    # also public
    "Tool",
    "ToolSpec",
    "ToolCatalog",
    "BoundCall",
    "FunctionTool",
    "ERROR_KINDS",
    "ErrorKind",
    "ParsedFormula",
    "format_result_dict",
    "strip_ansi",
    "truncate",
    "is_implementation_failure",
]
