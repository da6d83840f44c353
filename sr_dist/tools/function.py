"""Tools made from plain callables: explicit schemas (``function_tool``, ``BuiltinTool``) or
schemas inferred from an annotated signature (``FunctionTool.from_function``, used by
``ToolRegistry.tool``). They run under the same contract as ``BaseTool``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from sr_dist.tools.execution import CallPlan, run_async, run_sync
from sr_dist.tools.formatting import format_result_dict
from sr_dist.tools.metadata import ToolMetadata
from sr_dist.tools.schema import infer_parameters, parse_docstring
from sr_dist.tools.types import ToolCallResult, ToolSpec
from sr_dist.tools.validation import compile_parameters, compile_schema

__all__ = ["FunctionTool", "BuiltinTool", "function_tool"]


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no introspectable signature
        return None


class FunctionTool:
    """A callable ``fn(**arguments)`` (sync or async) with its metadata; immutable once built.

    ``fn`` returns a dict (a ``{"success": False, "reason": ...}`` envelope is a model-visible
    failure) or any value ``format_result_dict`` can render.
    """

    __slots__ = ("_fn", "_metadata", "_context", "_plan")

    def __init__(
        self,
        *,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        fn: Callable[..., Any],
        output_schema: Mapping[str, Any] | None = None,
        idempotent: bool = False,
        read_only: bool = False,
        timeout_s: float | None = None,
        max_result_chars: int = 8000,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"tool {name!r}: fn must be callable, got {type(fn).__name__}")
        if input_schema is None:
            raise ValueError(f"tool {name!r}: input_schema is required (use ToolRegistry.tool to infer one)")
        metadata = ToolMetadata(
            name=name,
            description=description or "",
            parameters=dict(input_schema),
            output_schema=dict(output_schema) if output_schema is not None else None,
            idempotent=idempotent,
            read_only=read_only,
            timeout_s=timeout_s,
            max_result_chars=max_result_chars,
        )
        input_validator = compile_parameters(metadata.parameters or {}, what=f"tool {name!r} input schema")
        output_validator = (
            compile_schema(metadata.output_schema, what=f"tool {name!r} output schema")
            if metadata.output_schema is not None
            else None
        )
        self._fn = fn
        self._metadata = metadata
        self._context: Mapping[str, Any] = context if context is not None else {}
        self._plan = CallPlan(
            metadata=metadata,
            input_validator=input_validator,
            output_validator=output_validator,
            signature=_signature(fn),
            formatter=format_result_dict,
            context=self._context,
        )

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        **policy: Any,
    ) -> FunctionTool:
        """Infer what is not given: name from ``fn.__name__``, description and schema from
        the docstring and annotated signature."""
        if not callable(fn):
            raise TypeError(f"expected a function, got {type(fn).__name__}")
        tool_name: str = name or str(getattr(fn, "__name__", ""))
        if description is None:
            description = parse_docstring(inspect.getdoc(fn))[0]
        if input_schema is None:
            try:
                input_schema = infer_parameters(fn)
            except ValueError as exc:
                raise ValueError(f"tool {tool_name!r}: {exc}") from None
        return cls(name=tool_name, description=description, input_schema=input_schema, fn=fn, **policy)

    def with_context(self, context: Mapping[str, Any]) -> FunctionTool:
        """A copy bound to ``context`` (its ``cancel_event`` is honoured)."""
        m = self._metadata
        return type(self)(
            name=m.name,
            description=m.description or "",
            input_schema=m.parameters or {},
            fn=self._fn,
            output_schema=m.output_schema,
            idempotent=m.idempotent,
            read_only=m.read_only,
            timeout_s=m.timeout_s,
            max_result_chars=m.max_result_chars,
            context=context,
        )

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    @property
    def spec(self) -> ToolSpec:
        return self._metadata.spec

    @property
    def name(self) -> str:
        return self._metadata.name

    @property
    def fn(self) -> Callable[..., Any]:
        """The wrapped callable, for calling it as plain Python."""
        return self._fn

    @property
    def context(self) -> Mapping[str, Any]:
        return self._context

    def __call__(self, /, **arguments: Any) -> ToolCallResult:
        return run_sync(self._fn, arguments, self._plan)

    async def acall(self, /, **arguments: Any) -> ToolCallResult:
        return await run_async(self._fn, arguments, self._plan)

    def cancel(self) -> None:
        """Forwarded to ``fn.cancel`` when the callable has one."""
        hook = getattr(self._fn, "cancel", None)
        if callable(hook):
            hook()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._metadata.name!r})"


class BuiltinTool(FunctionTool):
    """Thea's explicit-schema tool: ``BuiltinTool(name=, description=, input_schema=, fn=)``."""

    __slots__ = ()


def function_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any],
    output_schema: Mapping[str, Any] | None = None,
    idempotent: bool = False,
    read_only: bool = False,
    timeout_s: float | None = None,
    max_result_chars: int = 8000,
) -> Callable[[Callable[..., Any]], FunctionTool]:
    """Decorator: build a :class:`FunctionTool` with an explicit input (and optional output) schema.

    The schema is never inferred here (jharness style); ``name`` defaults to the function's name
    and ``description`` to its docstring summary.
    """

    if input_schema is None:
        raise ValueError("function_tool needs an explicit input_schema (ToolRegistry.tool infers one)")

    def decorate(fn: Callable[..., Any]) -> FunctionTool:
        return FunctionTool.from_function(
            fn,
            name=name,
            description=description,
            input_schema=input_schema,
            output_schema=output_schema,
            idempotent=idempotent,
            read_only=read_only,
            timeout_s=timeout_s,
            max_result_chars=max_result_chars,
        )

    return decorate
