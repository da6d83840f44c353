"""The dimensional check applied to fits: each fit of a dataset with units gets a verdict.

The formula tools run this on every batch they fit (in the agent's process, after the
evaluator returned), so the verdict reaches the archive, the results table and the model alike.
The evaluator never sees units: they do not change a fit, only how candidates are judged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sr_dist.formula import DimensionCheck, FormulaError, check_dimensions, parse_formula
from sr_dist.sr.fit_notes import annotate_fit

__all__ = ["dimension_verdict", "with_dimensions"]


def dimension_verdict(expression: str, dataset: Any, *,
                      dimensionless_constants: bool = True) -> DimensionCheck | None:
    """The check of one formula text against ``dataset.units``; ``None`` when the dataset has
    no units or the text does not parse (the fit says why)."""
    units = getattr(dataset, "units", None)
    if units is None:
        return None
    try:
        formula = parse_formula(str(expression), tuple(dataset.feature_names))
    except FormulaError:
        return None
    return check_dimensions(formula, units, dimensionless_constants=dimensionless_constants)


def with_dimensions(fits: Iterable[Any], dataset: Any, *,
                    dimensionless_constants: bool = True) -> list[Any]:
    """``fits`` (``FitResult``s or their dict form), each with its dimensional verdict when the
    dataset has units; unchanged otherwise."""
    out = list(fits)
    if getattr(dataset, "units", None) is None:
        return out
    checked = []
    for fit in out:
        expression = fit.get("expression") if isinstance(fit, Mapping) else getattr(fit, "expression", None)
        verdict = dimension_verdict(str(expression or ""), dataset,
                                    dimensionless_constants=dimensionless_constants)
        if verdict is None:
            checked.append(fit)
        else:
            checked.append(annotate_fit(fit, {"dimensionally_consistent": verdict.consistent,
                                              "units_mismatch": verdict.reason}))
    return checked
