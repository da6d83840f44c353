"""The analysis tools as the agent calls them: through a real catalog, the real evaluator and
a real dataset, on the training split only.

The numbers behind each tool are checked in test_analysis_core.py (beside this file); here: the tools are in the
default set and known to ``search.tools``, each answers with a bounded text, bad arguments
are model-visible failures that say how to fix them, ``residual_analysis`` records its fit as
a candidate, and poisoning the validation and test rows changes nothing they report.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from sr_dist.conf.schema import tool_names
from sr_dist.data import Dataset, dataset_from_arrays, load_dataset
from sr_dist.evaluator import Evaluator
from sr_dist.sr import build_formula_catalog, formula_tool_context
from sr_dist.sr.analysis_tools import ANALYSIS_TOOLS, MAX_LISTED
from sr_dist.sr.formula_tools import FORMULA_TOOLS, ListRecorder
from sr_dist.sr.prompt import system_prompt
from sr_dist.tools import ToolCall

#: One call per analysis tool, on the shared problem y = 2.5*x0*x1 (its session evaluator is
#: compiled already; a new evaluator would cost a fresh XLA compile). "a*x0 + b" misses x1.
CALLS: dict[str, dict[str, Any]] = {
    "data_statistics": {},
    "variable_relationships": {},
    "separability_test": {"groups": [["x0"], ["x1"]]},
    "dimensional_groups": {},
    "fit_polynomial": {"variables": ["x0", "x1"], "degree": 2},
    "fit_power_law": {"variables": ["x0", "x1"]},
    "fit_rational": {"numerator_degree": 2, "denominator_degree": 1},
    "residual_analysis": {"expression": "a*x0 + b"},
}


def catalog_for(dataset: Any, evaluator: Any) -> tuple[Any, Any, ListRecorder]:
    recorder = ListRecorder()
    context = formula_tool_context(dataset, evaluator, recorder=recorder, agent_id=2)
    return build_formula_catalog(context), context, recorder


def poisoned(dataset: Dataset) -> Dataset:
    """The same dataset and split with every validation and test value NaN."""
    X, y = np.array(dataset.X), np.array(dataset.y)
    hidden = np.concatenate([dataset.splits.val, dataset.splits.test])
    X[hidden] = np.nan
    y[hidden] = np.nan
    return dataclasses.replace(dataset, X=X, y=y)


def test_the_analysis_tools_are_default_tools_known_to_search_tools(agent_dataset: Dataset,
                                                                     agent_evaluator: Evaluator) -> None:
    assert FORMULA_TOOLS[0] == "evaluate_formulas" and FORMULA_TOOLS[-1] == "submit_formula"
    assert set(ANALYSIS_TOOLS) <= set(FORMULA_TOOLS) and len(set(FORMULA_TOOLS)) == len(FORMULA_TOOLS)
    assert tool_names(["fit_power_law", "evaluate_formulas"], "search.tools") == ("fit_power_law", "evaluate_formulas")
    catalog, _, _ = catalog_for(agent_dataset, agent_evaluator)
    assert catalog.names() == FORMULA_TOOLS
    meta = {name: catalog.get(name).metadata for name in ANALYSIS_TOOLS}
    assert all(m.idempotent for m in meta.values())
    assert [n for n, m in meta.items() if not m.read_only] == ["residual_analysis"]
    specs = {s.name: s for s in catalog.specs()}
    assert specs["residual_analysis"].parameters["required"] == ["expression"]
    assert specs["separability_test"].parameters["properties"]["groups"]["items"] == {
        "type": "array", "items": {"type": "string"}}
    assert specs["fit_rational"].parameters["properties"]["denominator_degree"]["default"] == 1
    prompt = system_prompt(variables=["x0"], target="y", data_text="-", tool_names=FORMULA_TOOLS)
    assert "residual_analysis shows which variables" in prompt and "fit_power_law" in prompt
    assert "separability_test" not in system_prompt(variables=["x0"], target="y", data_text="-",
                                                    tool_names=("evaluate_formulas",))


def test_every_tool_answers_in_bounded_text(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, _, _ = catalog_for(agent_dataset, agent_evaluator)
    texts = {}
    for name, arguments in CALLS.items():
        result = catalog.invoke(ToolCall(name, arguments, id=f"call_{name}"))
        assert result.ok, (name, result.result_str)
        assert 0 < len(result.result_str) <= catalog.get(name).metadata.max_result_chars
        assert not result.meta_data["truncated"], name
        texts[name] = result.result_str
    assert texts["data_statistics"].startswith("Training rows: 210.")
    assert "\n  y (target): " in texts["data_statistics"]
    assert "[x0] vs [x1]: additive no" in texts["separability_test"]
    assert "multiplicative YES" in texts["separability_test"]
    assert "depends on x0, x1 only through x0*x1: yes" in texts["separability_test"]
    assert texts["dimensional_groups"].startswith("No units: the dataset has no units")
    exact = "formula (numbers written in, pass it to evaluate_formulas as is): 2.5*x0*x1\n"
    assert exact in texts["fit_polynomial"] and exact in texts["fit_power_law"]
    # The target is a polynomial: the rational fit's denominator comes out as 1 and is dropped.
    assert exact in texts["fit_rational"]
    assert "The residual still depends on" in texts["residual_analysis"]
    assert "\n  x1: linear explains" in texts["residual_analysis"]


def test_residual_analysis_records_its_fit_as_a_candidate(agent_dataset: Dataset,
                                                          agent_evaluator: Evaluator) -> None:
    catalog, context, recorder = catalog_for(agent_dataset, agent_evaluator)
    context.episode.begin_turn(4)
    context.episode.begin_call("call_r")
    result = catalog.invoke(ToolCall("residual_analysis", {"expression": "a*x0 + b"}, id="call_r"))
    assert result.ok, result.result_str
    assert result.result["still_depends_on"] == ["x1"]  # the fit absorbed x0's share
    assert result.result["candidate"]["expression"] == "a*x0 + b"
    [batch] = recorder.batches
    assert (batch.agent_id, batch.step, batch.tool_call_id) == (2, 4, "call_r")
    assert [f.expression for f in batch.fits] == ["a*x0 + b"]
    assert len(context.archive) == 1 and context.archive.best().tool_call_id == "call_r"

    bad = catalog.invoke(ToolCall("residual_analysis", {"expression": "a*x0 +"}))
    assert not bad.ok and bad.meta_data["model_visible"]
    assert "could not be fitted (status invalid" in bad.result_str and "fix it" in bad.result_str
    assert len(recorder.batches) == 2  # the failed fit is recorded too, as evaluate_formulas does


def test_the_tools_read_the_training_split_only(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    clean, _, _ = catalog_for(agent_dataset, agent_evaluator)
    dirty, _, _ = catalog_for(poisoned(agent_dataset), agent_evaluator)
    for name, arguments in CALLS.items():
        a = clean.invoke(ToolCall(name, arguments))
        b = dirty.invoke(ToolCall(name, arguments))
        assert a.ok and b.ok, (name, b.result_str)
        if name == "residual_analysis":  # the fit is the evaluator's (the same one): compare the analysis
            a_result = {k: v for k, v in a.result.items() if k != "candidate"}
            b_result = {k: v for k, v in b.result.items() if k != "candidate"}
            assert a_result == b_result
        else:
            assert a.result == b.result, name
            assert a.result_str == b.result_str, name
        assert "nan" not in b.result_str.lower(), name


@pytest.mark.parametrize(("name", "arguments", "needle"), [
    ("fit_polynomial", {"variables": ["x0", "zz"]}, "unknown variable(s) zz; the variables are x0, x1."),
    ("fit_polynomial", {"variables": [], "degree": 2}, "variables is empty"),
    ("fit_polynomial", {"degree": 0}, "degree must be an integer from 1 to 6, got 0"),
    ("fit_rational", {"denominator_degree": 0}, "denominator_degree must be an integer from 1 to 6"),
    ("fit_power_law", {"variables": ["x3"]}, "unknown variable(s) x3"),
    ("separability_test", {"groups": [["x0"], ["x0", "x1"]]}, "x0 appear(s) in both groups"),
    ("separability_test", {"groups": [[], ["x1"]]}, "each group needs at least one variable"),
])
def test_bad_arguments_are_visible_failures_that_say_how_to_fix_them(
    agent_dataset: Dataset, agent_evaluator: Evaluator, name: str, arguments: dict[str, Any], needle: str,
) -> None:
    catalog, _, recorder = catalog_for(agent_dataset, agent_evaluator)
    result = catalog.invoke(ToolCall(name, arguments))
    assert not result.ok and result.meta_data["model_visible"], result.result_str
    assert needle in result.result_str
    assert recorder.batches == []


def test_a_power_law_on_signed_data_says_what_to_do_instead(agent_evaluator: Evaluator) -> None:
    X = np.random.default_rng(5).uniform(-1.0, 1.0, size=(60, 2))
    data = dataset_from_arrays(X, X[:, 0] + 3.0, ("x0", "x1"), name="signed")
    catalog, _, _ = catalog_for(data, agent_evaluator)
    result = catalog.invoke(ToolCall("fit_power_law", {}))
    assert not result.ok and "strictly positive variables; x0, x1" in result.result_str
    assert "fit_polynomial" in result.result_str


def test_dimensional_groups_with_feynman_units(agent_evaluator: Evaluator) -> None:
    dataset = load_dataset("feynman:I.12.2", n=60, units="feynman")
    catalog, _, _ = catalog_for(dataset, agent_evaluator)  # no fit: any evaluator will do
    result = catalog.invoke(ToolCall("dimensional_groups", {}))
    assert result.ok and [g["formula"] for g in result.result["groups"]] == ["q2/q1"]
    assert "1 dimensionless group(s): q2/q1" in result.result_str
    assert "Prefactor with the target's units: q1**2/(epsilon*r**2)." in result.result_str
    assert "So F = q1**2/(epsilon*r**2) * phi(q2/q1)" in result.result_str


def test_a_wide_table_is_listed_up_to_the_cap_with_a_count_of_the_rest(agent_evaluator: Evaluator) -> None:
    width = MAX_LISTED + 2
    X = np.random.default_rng(6).uniform(1.0, 2.0, size=(900, width))
    data = dataset_from_arrays(X, X.sum(axis=1), name="wide")
    catalog, _, _ = catalog_for(data, agent_evaluator)
    for name in ("data_statistics", "variable_relationships", "separability_test"):
        result = catalog.invoke(ToolCall(name, {}))
        assert result.ok, result.result_str
        assert len(result.result_str) <= catalog.get(name).metadata.max_result_chars
        assert "... and 2 more" in result.result_str, name
        assert len(result.result["variables" if name != "separability_test" else "tests"]) == width
    small = dataset_from_arrays(X[:60], X[:60].sum(axis=1), name="wide-small")
    catalog, _, _ = catalog_for(small, agent_evaluator)
    refused = catalog.invoke(ToolCall("separability_test", {}))
    assert not refused.ok and "too few training rows (42) for the surrogate" in refused.result_str
    assert "use variable_relationships or fit_polynomial instead" in refused.result_str
