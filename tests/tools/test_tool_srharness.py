"""SRHarness's BaseTool contract (seed 000) as sr_dist.tools keeps it.

Descriptions come only from the execute that runs, ``format_result_dict`` is the formatting
hook, and the formula helpers (``normalize_formula``, ``parse_formula``, ``evaluate``,
``format_evaluation_result``) work on the tool's context: a plain mapping or a typed object.
The verbatim code sample is run by tests/seeds; these tests pin each promise on its own.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import pytest

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.formula import Formula, FormulaError, parse_formula
from sr_dist.tools import (
    BaseTool,
    ParsedFormula,
    RetryingTool,
    ToolCall,
    ToolMetadata,
    ToolRegistry,
)
from sr_dist.tools.execution import cancel_event_of
from sr_dist.tools.metadata import NO_DESCRIPTION
from tests.support.agent_problem import AsyncEvaluator


def _invoke(tool: Any, **arguments: Any) -> Any:
    registry = ToolRegistry()
    registry.register(tool)
    return registry.open_catalog().invoke(ToolCall(tool.metadata.name, arguments))


CALLERS = {
    "sync": lambda tool, **kw: tool(**kw),
    "async": lambda tool, **kw: asyncio.run(tool.acall(**kw)),
    "catalog": _invoke,
}


# --- 1. descriptions come from the execute that runs, or say there is none ------------------


class _Undocumented(BaseTool):
    metadata = ToolMetadata(name="srh_undocumented")

    def execute(self, x: int) -> dict[str, Any]:
        return {"x": x}


class _DocumentedParent(BaseTool):
    """Class docstring, written for developers."""

    metadata = ToolMetadata(name="srh_documented_parent")

    def execute(self, x: int) -> dict[str, Any]:
        """The parent's description.

        Args:
            x: The parent's x.
        """
        return {"x": x}


class _UndocumentedOverride(_DocumentedParent):
    metadata = ToolMetadata(name="srh_undocumented_override")

    def execute(self, x: int) -> dict[str, Any]:
        return {"x": -x}


class _InheritsExecute(_DocumentedParent):
    metadata = ToolMetadata(name="srh_inherits_execute")


class _ClassDocOnly(BaseTool):
    """Only the class has a docstring."""

    metadata = ToolMetadata(name="srh_class_doc_only")

    def execute(self) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize("tool_cls", [_Undocumented, _UndocumentedOverride, _ClassDocOnly])
def test_execute_without_docstring_is_described_as_having_none(tool_cls: type[BaseTool]) -> None:
    tool = tool_cls()
    assert tool.metadata.description == NO_DESCRIPTION == "(no description provided)"
    assert tool.spec.description == NO_DESCRIPTION
    assert "Override" not in tool.spec.description  # never BaseTool.execute's own docstring


def test_undocumented_override_does_not_inherit_the_parents_argument_docs() -> None:
    properties = _UndocumentedOverride().spec.parameters["properties"]
    assert properties["x"] == {"type": "integer"}
    assert _DocumentedParent().spec.parameters["properties"]["x"]["description"] == "The parent's x."


def test_an_inherited_execute_keeps_its_own_docstring() -> None:
    assert _InheritsExecute().spec.description == "The parent's description."


def test_registered_tool_without_docstring_and_explicit_description() -> None:
    @BaseTool.register("srh_registered_undocumented")
    class Registered(BaseTool):
        def execute(self) -> dict[str, Any]:
            return {}

    @BaseTool.register("srh_registered_explicit")
    class Explicit(BaseTool):
        metadata = ToolMetadata(name="srh_registered_explicit", description="Declared.")

        def execute(self) -> dict[str, Any]:
            return {}

    assert BaseTool.create("srh_registered_undocumented").spec.description == NO_DESCRIPTION
    assert BaseTool.create("srh_registered_explicit").spec.description == "Declared."


# --- 2. format_result_dict is the formatting hook -------------------------------------------


class _SummaryFormat(BaseTool):
    metadata = ToolMetadata(name="srh_summary_format")

    def execute(self, n: int) -> dict[str, Any]:
        """Count to n."""
        return {"items": list(range(n)), "n": n}

    def format_result_dict(self, result: dict[str, Any]) -> str:
        return f"{result['n']} items"


class _AsyncSummaryFormat(_SummaryFormat):
    metadata = ToolMetadata(name="srh_async_summary_format")

    async def execute(self, n: int) -> dict[str, Any]:
        """Count to n, asynchronously."""
        return {"items": list(range(n)), "n": n}


class _LegacyFormat(BaseTool):
    metadata = ToolMetadata(name="srh_legacy_format")

    def execute(self) -> dict[str, Any]:
        """Say hi."""
        return {"text": "hi"}

    def format_result(self, result: Any) -> str:
        return "legacy hook"


class _BrokenFormat(_SummaryFormat):
    metadata = ToolMetadata(name="srh_broken_format")

    def format_result_dict(self, result: dict[str, Any]) -> str:
        raise KeyError("missing")


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize("tool_cls", [_SummaryFormat, _AsyncSummaryFormat])
def test_overridden_format_result_dict_is_what_the_model_sees(caller: str, tool_cls: type[BaseTool]) -> None:
    result = CALLERS[caller](tool_cls(), n=3)
    assert result.ok, result
    assert result.result_str == "3 items"
    assert result.result == {"items": [0, 1, 2], "n": 3}  # the machine-readable value is whole


def test_the_older_format_result_override_still_wins() -> None:
    assert _LegacyFormat()().result_str == "legacy hook"


def test_a_raising_format_result_dict_is_a_tool_error() -> None:
    result = _BrokenFormat()(n=1)
    assert not result.ok and result.meta_data["error_kind"] == "tool_error"
    assert "KeyError" in result.result_str


# --- 3. formula helpers ------------------------------------------------------------------------


@BaseTool.register("srh_example_tool")
class ExampleTool(BaseTool):
    """The seed's example tool (registered under another name: tests/seeds runs it verbatim)."""

    metadata = ToolMetadata(name="srh_example_tool")

    def execute(self, expression: str, limit: int = 10) -> dict[str, Any]:
        """Inspect an expression.

        Args:
            expression: Expression supplied by the model.
            limit: Maximum number of returned items.

        Returns:
            Structured inspection results.
        """
        parsed = self.parse_formula(expression)
        return {"expression": parsed.to_str(), "limit": limit}


@pytest.mark.parametrize("caller", list(CALLERS))
def test_seed_example_tool_returns_the_parsed_expression(caller: str) -> None:
    result = CALLERS[caller](ExampleTool(), expression="2.5 * x ^ 2", limit=3)
    assert result.ok, result
    assert result.result == {"expression": "2.5*x**2", "limit": 3}
    spec = ExampleTool().spec
    assert spec.description == "Inspect an expression."
    assert spec.parameters["required"] == ["expression"]
    assert spec.parameters["properties"]["limit"] == {
        "type": "integer",
        "description": "Maximum number of returned items.",
        "default": 10,
    }


def test_a_formula_that_does_not_parse_is_a_failed_call_with_the_parsers_message() -> None:
    result = ExampleTool()(expression="x0 +")
    assert not result.ok and result.meta_data["exception"] == "FormulaError"
    assert "unexpected end of formula" in result.result_str


def test_parse_formula_takes_variables_from_the_context_dataset(agent_dataset: Dataset) -> None:
    tool = ExampleTool(context={"dataset": agent_dataset})
    parsed = tool.parse_formula("a*x0 + x1^2")
    assert isinstance(parsed, ParsedFormula) and isinstance(parsed.formula, Formula)
    assert parsed.variables == ("x0", "x1") and parsed.constants == ("a",)
    assert parsed.to_str() == str(parsed) == "a*x0 + x1**2"
    assert parsed.text == "a*x0 + x1^2" and parsed.complexity == 7
    assert parsed.canonical == parse_formula("x1**2 + b*x0", ("x0", "x1")).canonical


def test_parse_formula_without_a_dataset_has_no_variables_unless_given() -> None:
    tool = ExampleTool()
    assert tool.parse_formula("a*x0").variables == ()
    assert tool.parse_formula("a*x0").constants == ("a", "x0")
    given = tool.parse_formula("a*x0", variables=["x0"])
    assert given.variables == ("x0",) and given.constants == ("a",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  a*x0 + b  ", "a*x0 + b"),
        ("`a*x0`", "a*x0"),
        ("```python\ny = a*x0\n```", "a*x0"),
        ("```\nc*x0*x1\n```", "c*x0*x1"),
        ("y = 2.5 * x0 * x1", "2.5 * x0 * x1"),
        ("f(x0, x1) = x0 − x1", "x0 - x1"),
        ("a × x0 · x1", "a * x0 * x1"),
        ("x0 +\n  x1", "x0 + x1"),
        ("x0 == x1", "x0 == x1"),  # not an assignment: left for the parser to refuse
        ("y =", "y ="),  # nothing on the right: kept, the parser says what is wrong
    ],
)
def test_normalize_formula_cleans_model_text(text: str, expected: str) -> None:
    assert ExampleTool().normalize_formula(text) == expected


def test_normalized_text_parses_while_the_raw_text_does_not() -> None:
    tool = ExampleTool()
    raw = "```\ny = 2.5 * x0 * x1\n```"
    with pytest.raises(FormulaError):
        tool.parse_formula(raw, variables=["x0", "x1"])
    assert tool.parse_formula(tool.normalize_formula(raw), variables=["x0", "x1"]).to_str() == "2.5*x0*x1"


def test_normalize_formula_refuses_non_text() -> None:
    with pytest.raises(FormulaError, match="must be a string"):
        ExampleTool().normalize_formula(3)  # type: ignore[arg-type]


class _Fit(BaseTool):
    metadata = ToolMetadata(name="srh_fit")

    def execute(self, expression: str) -> dict[str, Any]:
        """Fit one formula."""
        fit = self.evaluate(self.parse_formula(self.normalize_formula(expression)))
        return {"status": fit.status, "val_nmse": fit.val_nmse, "text": self.format_evaluation_result(fit)}


def test_evaluate_fits_with_the_context_evaluator(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    tool = _Fit(context={"dataset": agent_dataset, "evaluator": agent_evaluator})
    fit = tool.evaluate("c*x0*x1")
    assert fit.ok and fit.constants["c"] == pytest.approx(2.5, rel=1e-4)
    assert fit.val_nmse < 1e-8 and fit.complexity == 5
    result = tool(expression="y = c*x0*x1")
    assert result.ok and result.result["status"] == "ok"
    assert result.result["text"].startswith("c*x0*x1: ok, val_nmse=")
    assert "complexity=5" in result.result["text"] and "constants c=2.5" in result.result["text"]


def test_evaluate_accepts_text_parsed_formulas_and_formulas(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    tool = _Fit(context={"dataset": agent_dataset, "evaluator": agent_evaluator})
    parsed = tool.parse_formula("c*x0*x1")
    fits = tool.evaluate_many(["c*x0*x1", parsed, parsed.formula, "x0 +"])
    assert [f.status for f in fits] == ["ok", "ok", "ok", "invalid"]
    assert "unexpected end of formula" in (fits[3].error or "")
    with pytest.raises(TypeError, match="must be text"):
        tool.evaluate(3)  # type: ignore[arg-type]


def test_evaluate_awaits_an_async_evaluator(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    tool = _Fit(context={"dataset": agent_dataset, "evaluator": AsyncEvaluator(agent_evaluator)})
    for caller in ("sync", "async"):
        result = CALLERS[caller](tool, expression="c*x0*x1")
        assert result.ok and result.result["status"] == "ok", result


def test_evaluate_without_an_evaluator_says_how_to_give_one() -> None:
    result = _Fit()(expression="c*x0")
    assert not result.ok and result.meta_data["error_kind"] == "tool_error"
    assert "needs an evaluator in the tool context" in result.result_str
    assert "'evaluator'" in result.result_str


def test_evaluate_rejects_an_evaluator_that_loses_results() -> None:
    class Lossy:
        def fit_many(self, formulas: list[str]) -> list[Any]:
            return []

    with pytest.raises(RuntimeError, match="returned 0 results for 1 formulas"):
        _Fit(context={"evaluator": Lossy()}).evaluate("c")


def test_format_evaluation_result_reads_fits_and_their_dicts() -> None:
    tool = ExampleTool()
    ok = {
        "expression": "c*x0",
        "status": "ok",
        "constants": {"c": 2.4999999},
        "train_nmse": 1.23456e-9,
        "val_nmse": 2.5e-9,
        "complexity": 3,
    }
    bad = {"expression": "x0 +", "status": "invalid", "error": "unexpected end\n  of formula"}
    assert tool.format_evaluation_result(ok) == (
        "c*x0: ok, val_nmse=2.5e-09, train_nmse=1.235e-09, complexity=3, constants c=2.5"
    )
    assert tool.format_evaluation_result(bad) == "x0 +: invalid: unexpected end of formula"
    nonfinite = {**ok, "status": "ok", "val_nmse": float("inf"), "constants": {}}
    assert "val_nmse=inf" in tool.format_evaluation_result(nonfinite)
    assert "constants" not in tool.format_evaluation_result(nonfinite)
    assert tool.format_evaluation_result([ok, bad]).splitlines()[1].startswith("x0 +: invalid")


def test_format_evaluation_result_of_a_real_fit(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    tool = ExampleTool()
    fit = agent_evaluator.fit("c*x0*x1")
    assert tool.format_evaluation_result(fit) == tool.format_evaluation_result(fit.to_dict())


# --- 4. the context type is a parameter --------------------------------------------------------


@dataclass(frozen=True)
class _EpisodeLike:
    """A typed, frozen context (the shape the SR domain's episode context will have)."""

    dataset: Any = None
    evaluator: Any = None
    cancel_event: threading.Event | None = None
    label: str = "episode"


class _TypedTool(BaseTool[_EpisodeLike]):
    metadata = ToolMetadata(name="srh_typed_tool", idempotent=True)

    def execute(self, expression: str) -> dict[str, Any]:
        """Parse with the typed context's dataset."""
        parsed = self.parse_formula(expression)
        return {"label": self.context.label, "variables": list(parsed.variables)}


def test_a_typed_context_is_read_by_attribute(agent_dataset: Dataset) -> None:
    context = _EpisodeLike(dataset=agent_dataset)
    tool = _TypedTool(context)
    assert tool.context is context
    result = tool(expression="a*x1")
    assert result.ok and result.result == {"label": "episode", "variables": ["x1"]}


def test_a_typed_context_can_evaluate(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    tool = _TypedTool(_EpisodeLike(dataset=agent_dataset, evaluator=agent_evaluator))
    assert tool.evaluate("c*x0*x1").ok


@pytest.mark.parametrize("caller", list(CALLERS))
def test_a_typed_contexts_cancel_event_stops_calls(caller: str) -> None:
    event = threading.Event()
    tool = _TypedTool(_EpisodeLike(cancel_event=event))
    assert not tool.cancel_requested
    event.set()
    assert tool.cancel_requested and cancel_event_of(tool) is event
    result = CALLERS[caller](tool, expression="x")
    assert not result.ok and result.meta_data["error_kind"] == "cancelled"


def test_wrappers_pass_a_typed_context_through() -> None:
    event = threading.Event()
    context = _EpisodeLike(cancel_event=event)
    wrapped = RetryingTool(_TypedTool(context), max_attempts=2)
    assert wrapped.context is context and cancel_event_of(wrapped) is event
    event.set()
    result = wrapped(expression="x")
    assert not result.ok and result.meta_data["error_kind"] == "cancelled"


def test_plain_mapping_contexts_keep_working() -> None:
    tool = BaseTool.create("srh_example_tool", context={"anything": 1})
    assert tool.context == {"anything": 1}
    assert ExampleTool().context == {}
    assert ExampleTool()(expression="x").ok
