"""The SR domain's tool catalog: the formula, analysis and opt-in tools, named in one table.

The tool classes register their names with ``BaseTool`` (SRHarness's decorator); this module
names every class the domain offers, so no module has to be imported for its side effect and
:mod:`sr_dist.sr.formula_tools` need not know of the tools built on it. A name outside the table
(a user's own ``@BaseTool.register`` tool) is looked up in ``BaseTool``'s registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sr_dist.sr.analysis_tools import (
    DataStatistics,
    DimensionalGroups,
    FitPolynomial,
    FitPowerLaw,
    FitRational,
    ResidualAnalysis,
    SeparabilityTest,
    VariableRelationships,
)
from sr_dist.sr.episode import EpisodeContext
from sr_dist.sr.formula_tools import FORMULA_TOOLS, BestFormulas, DataSummary, EvaluateFormulas, SubmitFormula
from sr_dist.sr.python_tool import RunPython
from sr_dist.tools.base import BaseTool
from sr_dist.tools.registry import ToolCatalog, ToolRegistry

__all__ = ["SR_TOOL_CLASSES", "build_formula_catalog"]

#: Every tool of the SR domain by its registered name (the default set is ``FORMULA_TOOLS``;
#: ``run_python`` is opt-in).
SR_TOOL_CLASSES: Mapping[str, type[BaseTool[Any]]] = {
    "evaluate_formulas": EvaluateFormulas,
    "data_summary": DataSummary,
    "data_statistics": DataStatistics,
    "variable_relationships": VariableRelationships,
    "separability_test": SeparabilityTest,
    "dimensional_groups": DimensionalGroups,
    "fit_polynomial": FitPolynomial,
    "fit_power_law": FitPowerLaw,
    "fit_rational": FitRational,
    "residual_analysis": ResidualAnalysis,
    "best_formulas": BestFormulas,
    "submit_formula": SubmitFormula,
    "run_python": RunPython,
}


def build_formula_catalog(
    tool_context: EpisodeContext,
    tools: Iterable[str] = FORMULA_TOOLS,
    *,
    extra: Iterable[Any] = (),
    notes: Mapping[str, str] | None = None,
) -> ToolCatalog:
    """A catalog of the named tools bound to ``tool_context``, plus ``extra`` tools; ``notes``
    (tool name -> text, e.g. shared tool experience) extend those tools' descriptions.

    Unknown names raise ``ValueError`` listing the registered ones.
    """
    registry = ToolRegistry()
    for name in tools:
        cls = SR_TOOL_CLASSES.get(name)
        registry.register(cls(context=tool_context) if cls is not None else BaseTool.create(name, context=tool_context))
    for tool in extra:
        registry.register(tool)
    catalog = registry.open_catalog()
    return catalog.with_notes(notes) if notes else catalog
