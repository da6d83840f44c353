"""``BaseTool``: a tool written as a class with ``metadata`` and an ``execute`` method.

The class supplies everything but the work: schema and description inference from ``execute``,
a by-name class registry (``@BaseTool.register``/``BaseTool.create``), and calls that always
return a ``ToolCallResult`` (``tool(**arguments)`` or ``await tool.acall(**arguments)``).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from jsonschema import Draft202012Validator

from sr_dist.tools.execution import CallPlan, context_cancel_event, is_cancel_requested, run_async, run_sync
from sr_dist.tools.formatting import format_result_dict
from sr_dist.tools.metadata import ToolMetadata
from sr_dist.tools.schema import infer_parameters, parse_docstring
from sr_dist.tools.types import ToolCallResult, ToolSpec
from sr_dist.tools.validation import compile_parameters, compile_schema

__all__ = ["BaseTool"]

ToolClass = TypeVar("ToolClass", bound="type[BaseTool]")


@dataclass(frozen=True)
class _ClassInfo:
    """A tool class's resolved description, compiled once per class."""

    metadata: ToolMetadata
    input_validator: Draft202012Validator
    output_validator: Draft202012Validator | None
    signature: inspect.Signature


def _resolve(cls: type[BaseTool]) -> _ClassInfo:
    declared = getattr(cls, "metadata", None)
    if not isinstance(declared, ToolMetadata):
        raise ValueError(f"{cls.__qualname__} needs `metadata = ToolMetadata(name=...)` or @BaseTool.register(name)")
    if cls.execute is BaseTool.execute:
        raise TypeError(f"{cls.__qualname__} must implement execute(...)")
    description = declared.description
    if description is None:
        description, _ = parse_docstring(inspect.getdoc(cls.execute))
        if not description and cls.__doc__:
            description = parse_docstring(inspect.getdoc(cls))[0]
    parameters = declared.parameters
    if parameters is None:
        try:
            parameters = infer_parameters(cls.execute)
        except ValueError as exc:
            raise ValueError(f"tool {declared.name!r}: {exc}") from None
    metadata = declared.with_(description=description or "", parameters=parameters)
    input_validator = compile_parameters(parameters, what=f"tool {declared.name!r} input schema")
    output_validator = (
        compile_schema(declared.output_schema, what=f"tool {declared.name!r} output schema")
        if declared.output_schema is not None
        else None
    )
    signature = inspect.signature(cls.execute)
    signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return _ClassInfo(metadata, input_validator, output_validator, signature)


class BaseTool:
    """Subclass, set ``metadata = ToolMetadata(name=...)``, implement ``execute(...) -> dict``.

    ``execute`` may be ``def`` or ``async def``; its annotated keyword parameters are what the
    model supplies. Run-time objects (dataset, evaluator, recorder, ``cancel_event``) come from
    ``self.context``, never from the model. Override :meth:`format_result` to change the text the
    model sees without changing ``result``, and :meth:`cancel` to stop work actively.
    """

    #: The declared metadata; on an instance, the resolved one (description/parameters filled in).
    metadata: ToolMetadata

    _classes: ClassVar[dict[str, type[BaseTool]]] = {}
    _classes_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, context: Mapping[str, Any] | None = None) -> None:
        info = type(self)._info()
        self.metadata = info.metadata
        #: Shared (not copied) run-time mapping; ``cancel_event`` stops calls before/after execute.
        self.context: Mapping[str, Any] = context if context is not None else {}
        self._plan = CallPlan(
            metadata=info.metadata,
            input_validator=info.input_validator,
            output_validator=info.output_validator,
            signature=info.signature,
            formatter=self.format_result,
            context=self.context,
            on_cancel=self.cancel,
        )

    # --- class registry --------------------------------------------------------------------

    @classmethod
    def register(cls, name: str) -> Callable[[ToolClass], ToolClass]:
        """Class decorator: make the tool class creatable by ``name``; its schema is checked now."""

        def decorate(tool_cls: ToolClass) -> ToolClass:
            if not (isinstance(tool_cls, type) and issubclass(tool_cls, BaseTool)):
                raise TypeError(f"@BaseTool.register({name!r}) decorates BaseTool subclasses, got {tool_cls!r}")
            own = tool_cls.__dict__.get("metadata")
            if own is None:
                inherited = getattr(tool_cls, "metadata", None)
                own = inherited.with_(name=name) if isinstance(inherited, ToolMetadata) else ToolMetadata(name=name)
                tool_cls.metadata = own
            elif not isinstance(own, ToolMetadata):
                raise ValueError(f"{tool_cls.__qualname__}.metadata must be a ToolMetadata")
            elif own.name != name:
                raise ValueError(
                    f"@BaseTool.register({name!r}) on {tool_cls.__qualname__} whose metadata.name is {own.name!r}"
                )
            if "_sr_info" in tool_cls.__dict__:
                delattr(tool_cls, "_sr_info")  # metadata may have just been set: resolve afresh
            tool_cls._info()  # eager: a bad signature or schema fails at import, not mid-run
            with BaseTool._classes_lock:
                previous = BaseTool._classes.get(name)
                same = previous is not None and (
                    previous.__module__,
                    previous.__qualname__,
                ) == (tool_cls.__module__, tool_cls.__qualname__)
                if previous is not None and previous is not tool_cls and not same:
                    raise ValueError(
                        f"tool name {name!r} is already registered by {previous.__module__}.{previous.__qualname__}"
                    )
                BaseTool._classes[name] = tool_cls
            return tool_cls

        return decorate

    @classmethod
    def known_tools(cls) -> tuple[str, ...]:
        """Names registered with ``@BaseTool.register``, sorted."""
        with BaseTool._classes_lock:
            return tuple(sorted(BaseTool._classes))

    @classmethod
    def lookup(cls, name: str) -> type[BaseTool]:
        """The class registered as ``name``; ``ValueError`` listing the known names otherwise."""
        with BaseTool._classes_lock:
            found = BaseTool._classes.get(name)
            known = sorted(BaseTool._classes)
        if found is None:
            raise ValueError(f"unknown tool {name!r}; known tools: {', '.join(known) or '(none registered)'}")
        return found

    @classmethod
    def create(cls, name: str, context: Mapping[str, Any] | None = None, **kwargs: Any) -> BaseTool:
        """An instance of the class registered as ``name``, bound to ``context``."""
        return cls.lookup(name)(context=context, **kwargs)

    @classmethod
    def _info(cls) -> _ClassInfo:
        info = cls.__dict__.get("_sr_info")
        if info is None:
            info = _resolve(cls)
            cls._sr_info = info  # type: ignore[attr-defined]
        return info

    # --- the tool contract -----------------------------------------------------------------

    def execute(self, **kwargs: Any) -> Any:
        """The work. Override with annotated keyword parameters; return a structured dict."""
        raise NotImplementedError

    def __call__(self, /, **arguments: Any) -> ToolCallResult:
        """Run synchronously (works inside or outside a running event loop)."""
        return run_sync(self.execute, arguments, self._plan)

    async def acall(self, /, **arguments: Any) -> ToolCallResult:
        """Run asynchronously; a sync ``execute`` runs in a worker thread."""
        return await run_async(self.execute, arguments, self._plan)

    def cancel(self) -> None:
        """Hook called when a call times out or its awaiting task is cancelled; default: nothing.

        Override to stop work actively (kill a subprocess, close a connection). Long loops in
        ``execute`` should also poll :attr:`cancel_requested`.
        """

    def format_result(self, result: Any) -> str:
        """The model-readable text for ``result`` (bounded and ANSI-stripped afterwards)."""
        return format_result_dict(result)

    @property
    def cancel_requested(self) -> bool:
        """True once the run's ``context["cancel_event"]`` is set."""
        return is_cancel_requested(context_cancel_event(self.context))

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def spec(self) -> ToolSpec:
        return self.metadata.spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.metadata.name!r})"
