"""Tools made from plain callables: explicit schemas (``function_tool``, ``BuiltinTool``) or
schemas inferred from an annotated signature (``FunctionTool.from_function``, used by
``ToolRegistry.tool``). They run under the same contract as ``BaseTool``.

A jharness-style function ``fn(call: ToolCall, context: ToolContext) -> ToolResult`` is
recognised by its annotations and adapted (see :mod:`sr_dist.tools.kernel`). A
``post_condition`` is a hidden check run after each call: its verdict goes to
``meta_data["post_condition"]`` (recorded in the tool history), never to the model's text.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from sr_dist.tools.execution import (
    CallPlan,
    run_async,
    run_coroutine_blocking,
    run_sync,
)
from sr_dist.tools.formatting import format_result_dict
from sr_dist.tools.kernel import (
    ToolExecution,
    adapt_kernel_function,
    is_kernel_function,
)
from sr_dist.tools.metadata import ToolMetadata
from sr_dist.tools.outcomes import exception_reason, with_meta
from sr_dist.tools.schema import infer_description, infer_parameters
from sr_dist.tools.types import ToolCallResult, ToolSpec
from sr_dist.tools.validation import compile_parameters, compile_schema

__all__ = ["FunctionTool", "BuiltinTool", "function_tool", "PostCondition"]

#: ``post_condition(arguments, result)`` returns ``True``/``False`` or ``(ok, detail)``.
PostCondition = Callable[[Mapping[str, Any], ToolCallResult], Any]

#: Results of calls that never reached the tool's code, or whose run is stopping: not checked.
_UNCHECKED_KINDS = frozenset({"invalid_tool_call", "cancelled"})


def _verdict(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"ok": value, "detail": None}
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], bool):
        return {"ok": value[0], "detail": value[1]}
    return {
        "ok": False,
        "detail": f"the post-condition returned {type(value).__name__}; expected True/False or (ok, detail)",
    }


def _raised_verdict(exc: Exception) -> dict[str, Any]:
    return {"ok": False, "detail": f"the post-condition raised {exception_reason(exc)}", "exception": type(exc).__name__}


def _execution_policy(
    name: str | None, idempotent: bool, timeout_s: float | None, execution: ToolExecution | None
) -> tuple[bool, float | None]:
    """``idempotent``/``timeout_s`` merged with a jharness ``ToolExecution``; a contradiction is an error."""
    if execution is None:
        return idempotent, timeout_s
    if not isinstance(execution, ToolExecution):
        raise TypeError(f"tool {name!r}: execution must be a ToolExecution, got {type(execution).__name__}")
    if idempotent and not execution.idempotent:
        raise ValueError(
            f"tool {name!r}: idempotent=True contradicts execution=ToolExecution(idempotent=False); give only one"
        )
    if timeout_s is not None and execution.timeout_seconds is not None and timeout_s != execution.timeout_seconds:
        raise ValueError(
            f"tool {name!r}: timeout_s={timeout_s!r} contradicts "
            f"ToolExecution(timeout_seconds={execution.timeout_seconds!r}); give only one"
        )
    return execution.idempotent, timeout_s if timeout_s is not None else execution.timeout_seconds


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no introspectable signature
        return None


class FunctionTool:
    """A callable ``fn(**arguments)`` (sync or async) with its metadata; immutable once built.

    ``fn`` returns a dict (a ``{"success": False, "reason": ...}`` envelope is a model-visible
    failure) or any value ``format_result_dict`` can render. ``evaluated=True`` requires a
    non-empty ``run_id`` in each success; ``post_condition(arguments, result)`` is the hidden
    check described in the module docstring; ``execution`` takes jharness's ``ToolExecution``.
    """

    __slots__ = ("_fn", "_target", "_metadata", "_context", "_plan", "_post_condition")

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
        evaluated: bool = False,
        post_condition: PostCondition | None = None,
        execution: ToolExecution | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"tool {name!r}: fn must be callable, got {type(fn).__name__}")
        if input_schema is None:
            raise ValueError(f"tool {name!r}: input_schema is required (use ToolRegistry.tool to infer one)")
        if post_condition is not None and not callable(post_condition):
            raise TypeError(f"tool {name!r}: post_condition must be callable, got {type(post_condition).__name__}")
        idempotent, timeout_s = _execution_policy(name, idempotent, timeout_s, execution)
        metadata = ToolMetadata(
            name=name,
            description=description or "",
            parameters=dict(input_schema),
            output_schema=dict(output_schema) if output_schema is not None else None,
            idempotent=idempotent,
            read_only=read_only,
            timeout_s=timeout_s,
            max_result_chars=max_result_chars,
            evaluated=evaluated,
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
        self._post_condition = post_condition
        self._target = adapt_kernel_function(fn, name, self._context) if is_kernel_function(fn) else fn
        self._plan = CallPlan(
            metadata=metadata,
            input_validator=input_validator,
            output_validator=output_validator,
            signature=_signature(self._target),
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
            description = infer_description(fn)
        if input_schema is None and is_kernel_function(fn):
            raise ValueError(
                f"tool {tool_name!r}: a jharness-style function (call, context) has no signature to infer a "
                "schema from; give input_schema (function_tool(input_schema=...))"
            )
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
            evaluated=m.evaluated,
            post_condition=self._post_condition,
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

    @property
    def post_condition(self) -> PostCondition | None:
        return self._post_condition

    def __call__(self, /, **arguments: Any) -> ToolCallResult:
        result = run_sync(self._target, arguments, self._plan)
        if self._check_for(result) is None:
            return result
        return run_coroutine_blocking(self._checked(arguments, result))

    async def acall(self, /, **arguments: Any) -> ToolCallResult:
        return await self._checked(arguments, await run_async(self._target, arguments, self._plan))

    async def _checked(self, arguments: Mapping[str, Any], result: ToolCallResult) -> ToolCallResult:
        """``result`` with the post-condition's verdict in its ``meta_data`` (when one applies)."""
        check = self._check_for(result)
        if check is None:
            return result
        try:
            verdict = check(arguments, result)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:  # noqa: BLE001 - a broken check is recorded, never crashes the call
            return with_meta(result, post_condition=_raised_verdict(exc))
        return with_meta(result, post_condition=_verdict(verdict))

    def _check_for(self, result: ToolCallResult) -> PostCondition | None:
        """The post-condition to run on this result; none for calls that never reached the code."""
        return None if result.error_kind in _UNCHECKED_KINDS else self._post_condition

    def cancel(self) -> None:
        """Forwarded to ``fn.cancel`` when the callable has one."""
        hook = getattr(self._fn, "cancel", None)
        if callable(hook):
            hook()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._metadata.name!r})"


class BuiltinTool(FunctionTool):
    """Thea's explicit-schema tool: ``BuiltinTool(name=, description=, input_schema=, fn=)``,
    optionally ``post_condition=`` (hidden check) and ``evaluated=True`` (needs ``run_id``)."""

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
    execution: ToolExecution | None = None,
    evaluated: bool = False,
    post_condition: PostCondition | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]:
    """Decorator: build a :class:`FunctionTool` with an explicit input (and optional output) schema.

    The schema is never inferred here (jharness style); ``name`` defaults to the function's name
    and ``description`` to its docstring summary. ``execution=ToolExecution(idempotent=True)``
    is jharness's spelling of ``idempotent=True`` (and ``timeout_seconds`` of ``timeout_s``).
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
            execution=execution,
            evaluated=evaluated,
            post_condition=post_condition,
        )

    return decorate
