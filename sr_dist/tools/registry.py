"""``ToolRegistry`` (mutable, thread-safe) and ``ToolCatalog`` (its immutable snapshot).

An agent opens a catalog at the start of a run and uses only that: what the model is shown
(``specs``/``openai_tools``) and what it may call (``bind``/``invoke``) cannot change under it,
whatever is registered later. Every schema is compiled when its tool is registered.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, overload

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # jsonschema ships no type stubs

from sr_dist.tools.execution import call_tool_async, call_tool_sync
from sr_dist.tools.function import FunctionTool
from sr_dist.tools.metadata import Tool, ToolMetadata
from sr_dist.tools.outcomes import failure_result, with_meta
from sr_dist.tools.types import ErrorKind, ToolCall, ToolCallResult, ToolError, ToolSpec
from sr_dist.tools.validation import check_arguments, compile_parameters, compile_schema, output_errors

__all__ = ["ToolRegistry", "ToolCatalog", "BoundCall"]

_EMPTY_OBJECT: Mapping[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class _Entry:
    """One registered tool with private copies of its schemas and their compiled validators."""

    tool: Tool
    metadata: ToolMetadata
    parameters: dict[str, Any]
    input_validator: Draft202012Validator
    output_validator: Draft202012Validator | None

    def spec(self) -> ToolSpec:
        return ToolSpec(self.metadata.name, self.metadata.description or "", copy.deepcopy(self.parameters))


def _entry_for(tool: Any) -> _Entry:
    if not isinstance(tool, Tool):
        raise TypeError(
            f"cannot register {tool!r}: a tool needs `metadata` (ToolMetadata) and `async acall(**arguments)`"
        )
    metadata = tool.metadata
    if not isinstance(metadata, ToolMetadata):
        raise TypeError(f"cannot register {tool!r}: its metadata is {type(metadata).__name__}, not ToolMetadata")
    parameters = copy.deepcopy(dict(metadata.parameters if metadata.parameters is not None else _EMPTY_OBJECT))
    input_validator = compile_parameters(parameters, what=f"tool {metadata.name!r} input schema")
    output_validator = (
        compile_schema(metadata.output_schema, what=f"tool {metadata.name!r} output schema")
        if metadata.output_schema is not None
        else None
    )
    return _Entry(tool, metadata, parameters, input_validator, output_validator)


@dataclass(frozen=True)
class BoundCall:
    """A call checked against a catalog: the tool exists and the arguments fit its schema."""

    call: ToolCall
    spec: ToolSpec
    tool: Tool
    arguments: Mapping[str, Any]
    output_validator: Draft202012Validator | None = None

    def invoke(self) -> ToolCallResult:
        """Run the bound call synchronously; never raises except ``ToolRunAbort``."""
        start = time.perf_counter()
        return self._settle(call_tool_sync(self.tool, self.arguments, self.spec.parameters), start)

    async def ainvoke(self) -> ToolCallResult:
        """Run the bound call asynchronously; never raises except ``ToolRunAbort``/cancellation."""
        start = time.perf_counter()
        return self._settle(await call_tool_async(self.tool, self.arguments, self.spec.parameters), start)

    def _settle(self, result: ToolCallResult, start: float) -> ToolCallResult:
        if result.ok and self.output_validator is not None:
            problems = output_errors(self.output_validator, result.result)
            if problems:
                result = failure_result(
                    self.spec.name,
                    ErrorKind.TOOL_ERROR,
                    f"tool {self.spec.name!r} returned output that breaks its declared schema: " + "; ".join(problems),
                    elapsed_s=result.meta_data.get("elapsed_s", time.perf_counter() - start),
                    max_chars=self.tool.metadata.max_result_chars,
                    result=result.result,
                    output_invalid=True,
                )
        return with_meta(result, call_id=self.call.id) if self.call.id is not None else result


class ToolCatalog:
    """An immutable snapshot of a registry: what the model sees and what it may call."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, _Entry]) -> None:
        self._entries: Mapping[str, _Entry] = MappingProxyType(dict(entries))

    # --- what the model is shown -----------------------------------------------------------

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Name, description and input schema of every tool, in registration order (copies)."""
        return tuple(entry.spec() for entry in self._entries.values())

    def with_notes(self, notes: Mapping[str, str]) -> ToolCatalog:
        """A copy whose tools named in ``notes`` have the note appended to their description
        (what the model sees in native tool schemas and in tool-mode prompt text); calls are
        unchanged. Names the catalog lacks are ignored."""
        entries: dict[str, _Entry] = {}
        for name, entry in self._entries.items():
            note = str(notes.get(name) or "").strip()
            if note:
                described = entry.metadata.with_(description=f"{(entry.metadata.description or '').rstrip()}\n\n{note}")
                entry = dataclasses.replace(entry, metadata=described)
            entries[name] = entry
        return ToolCatalog(entries)

    def openai_tools(self) -> list[dict[str, Any]]:
        """The OpenAI function-tool list: ``[{"type": "function", "function": {...}}]``."""
        return [{"type": "function", "function": spec.to_dict()} for spec in self.specs()]

    def get(self, name: str) -> Tool | None:
        entry = self._entries.get(name)
        return entry.tool if entry is not None else None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ToolCatalog({', '.join(self._entries)})"

    def __await__(self) -> Generator[Any, None, ToolCatalog]:
        """``await registry.open_catalog()`` (jharness's spelling) is the catalog itself.

        Opening a snapshot never waits, so the sync call stays the primary one; this only lets
        async code written for jharness await it.
        """
        return self
        yield  # pragma: no cover - makes this a generator; never reached

    # --- what the model may call -----------------------------------------------------------

    def bind(self, call: ToolCall) -> BoundCall:
        """Check ``call`` before anything runs; ``ToolError`` for an unknown tool or bad arguments.

        ``BoundCall.arguments`` are what the tool will receive: a whole float such as ``5.0``
        where the schema wants an integer is ``5`` there (see :func:`check_arguments`).
        """
        entry = self._entries.get(call.name)
        if entry is None:
            known = ", ".join(self._entries) or "(none)"
            raise ToolError(
                f"unknown tool {call.name!r}; known tools: {known}",
                tool=call.name,
                reasons=(f"unknown tool {call.name!r}",),
            )
        checked = check_arguments(entry.input_validator, call.arguments)
        if checked.reasons:
            raise ToolError(
                f"invalid call to {call.name!r}: " + "; ".join(checked.reasons), tool=call.name, reasons=checked.reasons
            )
        return BoundCall(
            call=call,
            spec=entry.spec(),
            tool=entry.tool,
            arguments=dict(checked.arguments),
            output_validator=entry.output_validator,
        )

    def _refused(self, call: ToolCall, exc: ToolError) -> ToolCallResult:
        entry = self._entries.get(call.name)
        max_chars = entry.metadata.max_result_chars if entry is not None else 8000
        meta: dict[str, Any] = {"call_id": call.id} if call.id is not None else {}
        return failure_result(
            call.name, ErrorKind.INVALID_TOOL_CALL, str(exc), elapsed_s=0.0, max_chars=max_chars, model_visible=True, **meta
        )

    def invoke(self, call: ToolCall) -> ToolCallResult:
        """Bind and run ``call``; unknown tools and bad arguments come back as ``ok=False``."""
        try:
            bound = self.bind(call)
        except ToolError as exc:
            return self._refused(call, exc)
        return bound.invoke()

    async def ainvoke(self, call: ToolCall) -> ToolCallResult:
        """Async :meth:`invoke`."""
        try:
            bound = self.bind(call)
        except ToolError as exc:
            return self._refused(call, exc)
        return await bound.ainvoke()


class ToolRegistry:
    """Thread-safe set of tool instances, unique by name; ``open_catalog()`` snapshots it."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> Tool:
        """Add ``tool`` (any object with ``metadata`` and ``acall``); returns it.

        ``ValueError`` for an invalid schema, an unresolvable ``$ref`` or a duplicate name.
        """
        entry = _entry_for(tool)  # compile outside the lock; it is the slow part
        with self._lock:
            if entry.metadata.name in self._entries:
                raise ValueError(f"a tool named {entry.metadata.name!r} is already registered")
            self._entries[entry.metadata.name] = entry
        return tool

    @overload
    def tool(self, fn: Callable[..., Any], /) -> FunctionTool: ...

    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        description: str | None = None,
        name: str | None = None,
        **policy: Any,
    ) -> Callable[[Callable[..., Any]], FunctionTool]: ...

    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        description: str | None = None,
        name: str | None = None,
        **policy: Any,
    ) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
        """Decorator: register an annotated function, its schema inferred from the signature.

        ``@registry.tool`` or ``@registry.tool(description=..., name=..., idempotent=...)``;
        returns the :class:`FunctionTool` (the plain function stays available as ``.fn``).
        """

        def decorate(func: Callable[..., Any]) -> FunctionTool:
            built = FunctionTool.from_function(func, name=name, description=description, **policy)
            self.register(built)
            return built

        return decorate(fn) if fn is not None else decorate

    def open_catalog(self) -> ToolCatalog:
        """An immutable snapshot; later registrations do not change it (also awaitable)."""
        with self._lock:
            return ToolCatalog(self._entries)

    def names(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._entries)

    def get(self, name: str) -> Tool | None:
        with self._lock:
            entry = self._entries.get(name)
        return entry.tool if entry is not None else None

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
