"""``BaseTool``: a tool written as a class with ``metadata`` and an ``execute`` method.

The class supplies everything but the work: schema and description inference from ``execute``,
a by-name class registry (``@BaseTool.register``/``BaseTool.create``), calls that always
return a ``ToolCallResult`` (``tool(**arguments)`` or ``await tool.acall(**arguments)``), and
SRHarness's formula helpers so formula tools share one boundary logic.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # jsonschema ships no type stubs

from sr_dist.tools import formula_helpers
from sr_dist.tools.contexts import ContextT, context_value
from sr_dist.tools.execution import CallPlan, is_cancel_requested, run_async, run_sync
from sr_dist.tools.formatting import format_result_dict
from sr_dist.tools.formula_helpers import ParsedFormula
from sr_dist.tools.metadata import NO_DESCRIPTION, ToolMetadata
from sr_dist.tools.schema import infer_parameters, own_docstring, parse_docstring
from sr_dist.tools.types import ToolCallResult, ToolSpec
from sr_dist.tools.validation import compile_parameters, compile_schema

if TYPE_CHECKING:
    from sr_dist.formula import Formula

__all__ = ["BaseTool"]

ToolClass = TypeVar("ToolClass", bound="type[BaseTool[Any]]")


@dataclass(frozen=True)
class _ClassInfo:
    """A tool class's resolved description, compiled once per class."""

    metadata: ToolMetadata
    input_validator: Draft202012Validator
    output_validator: Draft202012Validator | None
    signature: inspect.Signature


def _resolve(cls: type[BaseTool[Any]]) -> _ClassInfo:
    declared = getattr(cls, "metadata", None)
    if not isinstance(declared, ToolMetadata):
        raise ValueError(f"{cls.__qualname__} needs `metadata = ToolMetadata(name=...)` or @BaseTool.register(name)")
    if cls.execute is BaseTool.execute:
        raise TypeError(f"{cls.__qualname__} must implement execute(...)")
    description = declared.description
    if description is None:
        # Only the docstring of the execute that runs: BaseTool's own, a parent tool's or the
        # class docstring (written for developers) would tell the model something untrue.
        description = parse_docstring(own_docstring(cls.execute))[0] or NO_DESCRIPTION
    parameters = declared.parameters
    if parameters is None:
        try:
            parameters = infer_parameters(cls.execute)
        except ValueError as exc:
            raise ValueError(f"tool {declared.name!r}: {exc}") from None
    metadata = declared.with_(description=description, parameters=parameters)
    input_validator = compile_parameters(parameters, what=f"tool {declared.name!r} input schema")
    output_validator = (
        compile_schema(declared.output_schema, what=f"tool {declared.name!r} output schema")
        if declared.output_schema is not None
        else None
    )
    signature = inspect.signature(cls.execute)
    signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return _ClassInfo(metadata, input_validator, output_validator, signature)


class BaseTool(Generic[ContextT]):
    """Subclass, set ``metadata = ToolMetadata(name=...)``, implement ``execute(...) -> dict``.

    ``execute`` may be ``def`` or ``async def``; its annotated keyword parameters are what the
    model supplies. Run-time objects (dataset, evaluator, recorder, ``cancel_event``) come from
    ``self.context``, never from the model: a plain mapping unless the tool names its context
    type (``BaseTool[EpisodeContext]``). Override :meth:`format_result_dict` to change the text
    the model sees without changing ``result``, and :meth:`cancel` to stop work actively.
    """

    #: The declared metadata; on an instance, the resolved one (description/parameters filled in).
    metadata: ToolMetadata

    _classes: ClassVar[dict[str, type[BaseTool[Any]]]] = {}
    _classes_lock: ClassVar[threading.Lock] = threading.Lock()
    _sr_info: ClassVar[_ClassInfo]

    def __init__(self, context: ContextT | None = None) -> None:
        info = type(self)._info()
        self.metadata = info.metadata
        #: Shared (not copied) run-time context; ``cancel_event`` stops calls before/after execute.
        #: ``None`` gives an empty mapping, the default context type.
        self.context: ContextT = context if context is not None else cast(ContextT, {})
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
    def lookup(cls, name: str) -> type[BaseTool[Any]]:
        """The class registered as ``name``; ``ValueError`` listing the known names otherwise."""
        with BaseTool._classes_lock:
            found = BaseTool._classes.get(name)
            known = sorted(BaseTool._classes)
        if found is None:
            raise ValueError(f"unknown tool {name!r}; known tools: {', '.join(known) or '(none registered)'}")
        return found

    @classmethod
    def create(cls, name: str, context: Any = None, **kwargs: Any) -> BaseTool[Any]:
        """An instance of the class registered as ``name``, bound to ``context``."""
        return cls.lookup(name)(context=context, **kwargs)

    @classmethod
    def _info(cls) -> _ClassInfo:
        info = cls.__dict__.get("_sr_info")
        if info is None:
            info = _resolve(cls)
            cls._sr_info = info
        return info

    # --- the tool contract -----------------------------------------------------------------

    if TYPE_CHECKING:
        # Typed as "any callable" so a subclass's execute(expression: str, ...) -> dict is a
        # valid override under mypy --strict; the runtime default below only refuses to run.
        execute: Callable[..., Any]
    else:

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

    def format_result_dict(self, result: Any) -> str:
        """The model-readable text for ``result`` (SRHarness's name); bounded and ANSI-stripped afterwards.

        Override it to show the model a summary while ``ToolCallResult.result`` keeps the
        whole value. The default is :func:`sr_dist.tools.format_result_dict`.
        """
        return format_result_dict(result)

    def format_result(self, result: Any) -> str:
        """What the call runner formats with: :meth:`format_result_dict`, unless overridden.

        sr-dist's older name for the same hook, kept so existing tools that override it work.
        """
        return self.format_result_dict(result)

    @property
    def cancel_requested(self) -> bool:
        """True once the run's ``cancel_event`` (in ``self.context``) is set."""
        return is_cancel_requested(context_value(self.context, "cancel_event"))

    # --- formula helpers (SRHarness) -------------------------------------------------------

    def normalize_formula(self, text: str) -> str:
        """Model text cleaned for the parser: code fences, ``y =``, typographic operators, spaces.

        It does not parse; :meth:`parse_formula` does, on the text it is given.
        """
        return formula_helpers.normalize_formula(text)

    def parse_formula(self, text: str, variables: Sequence[str] | None = None) -> ParsedFormula:
        """Parse ``text`` in the restricted formula language; ``.to_str()`` gives the standard text.

        ``variables`` default to the feature names of the context's ``dataset``; with no dataset
        there are none, and every name that is not a function, ``pi`` or ``e`` is a free constant.
        Raises :class:`~sr_dist.formula.FormulaError` (a ``ValueError``), which the call turns
        into an ``ok=False`` result with the parser's message.
        """
        if variables is None:
            variables = formula_helpers.context_variables(self.context)
        return formula_helpers.parse_tool_formula(text, variables)

    def evaluate(self, expression: str | ParsedFormula | Formula) -> Any:
        """Fit ``expression``'s free constants on the training split with the context's ``evaluator``.

        Returns the evaluator's result for it (a :class:`~sr_dist.evaluator.FitResult`: status,
        constants, train/validation NMSE, complexity, error). A formula that does not parse is
        a result with status ``invalid``, not an exception; a context without an evaluator raises.
        """
        return self.evaluate_many([expression])[0]

    def evaluate_many(self, expressions: Iterable[str | ParsedFormula | Formula]) -> list[Any]:
        """:meth:`evaluate` for a batch in one evaluator call (one result per formula, in order)."""
        return formula_helpers.evaluate_expressions(self.context, expressions)

    def format_evaluation_result(self, result: Any) -> str:
        """Model-readable lines for a fit or a list of fits (status, NMSEs, complexity, constants)."""
        return formula_helpers.format_evaluation_result(result)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def spec(self) -> ToolSpec:
        return self.metadata.spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.metadata.name!r})"
