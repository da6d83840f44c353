"""The formula tools on a dataset with units: verdicts in results, words for the model, ranking.

The session's evaluator was built for the dataset without units: units never reach the fit,
only the judgement of its candidates.
"""

from __future__ import annotations

from typing import Any

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.results import CANDIDATE_SCHEMA, candidate_row, normalize_row
from sr_dist.sr.catalog import build_formula_catalog
from sr_dist.sr.formula_tools import ListRecorder, formula_tool_context
from sr_dist.tools import ToolCall

# y = 2.5*x0*x1 in the data; these units make that law consistent.
UNITS = {"x0": "m", "x1": "1/s", "y": "m/s"}


def make(dataset: Dataset, evaluator: Any, units: dict[str, str] = UNITS,
         **options: Any) -> tuple[Any, Any, ListRecorder]:
    from sr_dist.data import resolve_units

    recorder = ListRecorder()
    with_units = dataset.with_units(resolve_units(units, dataset))
    ctx = formula_tool_context(with_units, evaluator, recorder=recorder, **options)
    return build_formula_catalog(ctx), ctx, recorder


def test_results_carry_the_verdict_and_the_model_reads_why(
        agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, _, recorder = make(agent_dataset, agent_evaluator)
    exprs = ["c*x0*x1", "c*x0 + x1", "x0 +"]
    result = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": exprs}))
    assert result.ok, result.result_str
    good, bad, broken = result.result["results"]
    assert good["dimensionally_consistent"] is True and good["units_mismatch"] is None
    assert bad["dimensionally_consistent"] is False
    assert bad["units_mismatch"] == "c*x0 + x1 adds m to 1/s"
    assert "dimensionally_consistent" not in broken  # did not parse: nothing to judge
    assert "dimensionally inconsistent: c*x0 + x1 adds m to 1/s" in result.result_str
    # The rows the recorder gets carry the verdict into the results table.
    rows = [normalize_row(candidate_row(fit, "r", 0, 1, i, "m", "d"), CANDIDATE_SCHEMA)
            for i, fit in enumerate(recorder.fits)]
    assert [r["dimensionally_consistent"] for r in rows] == [True, False, None]
    assert rows[1]["units_mismatch"] == "c*x0 + x1 adds m to 1/s"


def test_a_consistent_formula_ranks_before_a_better_inconsistent_one(
        agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    # Units under which the data's own law is inconsistent: the consistent guess fits worse.
    units = {"x0": "m", "x1": "s", "y": "m/s"}
    catalog, ctx, _ = make(agent_dataset, agent_evaluator, units)
    result = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": ["c*x0*x1", "c*x0/x1"]}))
    exact, consistent = result.result["results"]
    assert exact["val_nmse"] < 1e-10 < consistent["val_nmse"]
    assert result.result["best"]["expression"] == "c*x0/x1"
    assert ctx.archive.best().expression == "c*x0/x1"
    front = catalog.invoke(ToolCall("best_formulas", {"k": 5}))
    assert [c["expression"] for c in front.result["front"]] == ["c*x0/x1"]
    submitted = catalog.invoke(ToolCall("submit_formula", {"expression": "c*x0*x1"}))
    assert "dimensionally inconsistent: the result has m*s where the target has m/s" \
        in submitted.result_str


def test_constants_with_units_when_allowed(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    strict, _, _ = make(agent_dataset, agent_evaluator)
    free, _, _ = make(agent_dataset, agent_evaluator, dimensionless_constants=False)
    call = ToolCall("evaluate_formulas", {"expressions": ["c*x0 + d*x1"]})
    (verdict,) = strict.invoke(call).result["results"]
    assert verdict["dimensionally_consistent"] is False
    (verdict,) = free.invoke(call).result["results"]
    assert verdict["dimensionally_consistent"] is True


def test_data_summary_names_the_units(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, _, _ = make(agent_dataset, agent_evaluator)
    result = catalog.invoke(ToolCall("data_summary", {}))
    assert result.result["units"] == {"x0": "m", "x1": "1/s", "y": "m/s"}
    assert "Units: x0 [m], x1 [1/s], y [m/s]" in result.result_str
    plain = build_formula_catalog(formula_tool_context(agent_dataset, agent_evaluator))
    assert "units" not in plain.invoke(ToolCall("data_summary", {})).result
