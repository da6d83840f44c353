"""The formula tools against the real evaluator on a small real dataset.

Each test builds a fresh tool context (archive, episode, recorder) around the session's
evaluator and calls the tools through a real catalog, as the agent loop does.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np
import pytest

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.sr.catalog import build_formula_catalog
from sr_dist.sr.fit_notes import MAX_ORIGIN_CHARS
from sr_dist.sr.formula_tools import (
    FORMULA_TOOLS,
    RESULT_FIELDS,
    ListRecorder,
    format_nmse,
    formula_tool_context,
)
from sr_dist.sr.state import CandidateArchive, EpisodeState
from sr_dist.tools import ToolCall
from tests.support.agent_problem import AsyncEvaluator, FailingEvaluator


def make(dataset: Dataset, evaluator: Any, **options: Any) -> tuple[Any, dict[str, Any], ListRecorder]:
    recorder = ListRecorder()
    ctx = formula_tool_context(dataset, evaluator, recorder=recorder, agent_id=7, **options)
    return build_formula_catalog(ctx), ctx, recorder


def test_catalog_has_the_four_tools_with_their_policies(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, _, _ = make(agent_dataset, agent_evaluator)
    assert catalog.names() == FORMULA_TOOLS
    meta = {name: catalog.get(name).metadata for name in catalog.names()}
    assert meta["data_summary"].read_only and meta["data_summary"].idempotent
    assert meta["best_formulas"].read_only and meta["best_formulas"].idempotent
    assert meta["evaluate_formulas"].idempotent and not meta["evaluate_formulas"].read_only
    assert not meta["submit_formula"].read_only
    specs = {s.name: s for s in catalog.specs()}
    assert specs["evaluate_formulas"].parameters["required"] == ["expressions"]
    assert "free constant" in specs["evaluate_formulas"].description
    assert specs["submit_formula"].parameters["required"] == ["expression"]


def test_evaluate_formulas_returns_every_status_records_and_formats(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, ctx, recorder = make(agent_dataset, agent_evaluator)
    ctx.episode.begin_turn(3)
    ctx.episode.begin_call("call_x")
    exprs = ["c*x0*x1", "x0 +", "a*x0 + b", "log(-x0)"]
    result = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": exprs}, id="call_x"))

    assert result.ok, result.result_str
    records = result.result["results"]
    assert [r["expression"] for r in records] == exprs
    assert all(tuple(r) == RESULT_FIELDS for r in records)
    assert [r["status"] for r in records] == ["ok", "invalid", "ok", "nonfinite"]
    assert records[0]["constants"]["c"] == pytest.approx(2.5, rel=1e-4)
    assert records[0]["val_nmse"] < 1e-8 and records[0]["complexity"] == 5
    assert "unexpected end of formula" in records[1]["error"] and records[1]["constants"] == {}
    assert result.result["best"]["expression"] == "c*x0*x1"

    lines = result.result_str.splitlines()
    assert lines[0].startswith("Evaluated 4 formula(s) (2 ok, 1 invalid, 1 nonfinite).")
    assert lines[1].startswith("1. ok val_nmse=") and "[c=2.5]" in lines[1]
    assert lines[2].startswith("2. invalid x0 + :: unexpected end of formula")
    assert any(line.startswith("4. nonfinite log(-x0) :: prediction is not finite") for line in lines)
    assert f"val_nmse={format_nmse(records[2]['val_nmse'])}" in result.result_str

    [batch] = recorder.batches
    assert (batch.agent_id, batch.step, batch.tool_call_id) == (7, 3, "call_x")
    assert [f.expression for f in batch.fits] == exprs
    archive: CandidateArchive = ctx.archive
    best = archive.best()
    assert len(archive) == 4 and best is not None and best.expression == "c*x0*x1"
    assert best.step == 3 and best.tool_call_id == "call_x"


@pytest.mark.parametrize(
    ("expressions", "needle"),
    [
        ([], "expressions is empty"),
        ([f"c*x0 + {i}" for i in range(5)], "expressions has 5 formulas; at most 4 are accepted per call"),
    ],
)
def test_evaluate_formulas_refuses_bad_batches_visibly(
    agent_dataset: Dataset, agent_evaluator: Evaluator, expressions: list[str], needle: str
) -> None:
    catalog, ctx, recorder = make(agent_dataset, agent_evaluator, max_expressions_per_call=4)
    result = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": expressions}))
    assert not result.ok
    assert result.meta_data["error_kind"] == "tool_error" and result.meta_data["model_visible"]
    assert needle in result.result_str
    assert recorder.batches == [] and len(ctx.archive) == 0


def test_arguments_that_break_the_schema_name_the_argument(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, _, _ = make(agent_dataset, agent_evaluator)
    result = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": "x0*x1"}))
    assert not result.ok and result.meta_data["error_kind"] == "invalid_tool_call"
    assert "argument 'expressions'" in result.result_str and "is not of type 'array'" in result.result_str
    result = catalog.invoke(ToolCall("best_formulas", {"k": "many"}))
    assert not result.ok and "argument 'k'" in result.result_str


def test_an_evaluator_that_fails_is_a_tool_error_with_a_clear_reason(agent_dataset: Dataset) -> None:
    broken = FailingEvaluator("actor 3 died")
    catalog, ctx, recorder = make(agent_dataset, broken)
    result = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": ["c*x0"]}))
    assert not result.ok and result.meta_data["error_kind"] == "tool_error"
    assert "the evaluator could not fit the batch (ConnectionError: actor 3 died)" in result.result_str
    assert broken.calls == 1 and recorder.batches == [] and len(ctx.archive) == 0


def test_an_async_evaluator_is_awaited(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, _, recorder = make(agent_dataset, AsyncEvaluator(agent_evaluator))
    result = asyncio.run(catalog.ainvoke(ToolCall("evaluate_formulas", {"expressions": ["c*x0*x1"]})))
    assert result.ok and result.result["results"][0]["status"] == "ok"
    assert len(recorder) == 1


def test_a_recorder_that_fails_costs_no_answer(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    def broken_recorder(fits: Any, **where: Any) -> None:
        raise OSError("disk full")

    ctx = formula_tool_context(agent_dataset, agent_evaluator, recorder=broken_recorder)
    catalog = build_formula_catalog(ctx)
    result = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": ["c*x0*x1"]}))
    assert result.ok
    assert ctx.episode.recording_errors == 1 and len(ctx.archive) == 1


def test_data_summary_describes_the_training_split(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, _, recorder = make(agent_dataset, agent_evaluator)
    result = catalog.invoke(ToolCall("data_summary", {}))
    assert result.ok
    summary = result.result
    X, y = np.asarray(agent_dataset.X_train), np.asarray(agent_dataset.y_train)
    x0 = summary["variables"]["x0"]
    assert x0["min"] == pytest.approx(X[:, 0].min()) and x0["max"] == pytest.approx(X[:, 0].max())
    assert x0["mean"] == pytest.approx(X[:, 0].mean())
    assert x0["correlation"] == pytest.approx(np.corrcoef(X[:, 0], y)[0, 1])
    assert x0["log_correlation"] == pytest.approx(np.corrcoef(np.log(X[:, 0]), np.log(y))[0, 1])
    assert summary["target"] == "y" and summary["target_stats"]["max"] == pytest.approx(y.max())
    assert summary["columns"] == ["x0", "x1", "y"] and len(summary["rows"]) == 5
    assert summary["rows"][0] == pytest.approx([*X[0], y[0]])
    assert (summary["n_train"], summary["n_val"], summary["n_test"]) == (
        len(y), len(agent_dataset.y_val), len(agent_dataset.y_test)
    )
    assert "x0:" in result.result_str and "First rows (x0, x1, y):" in result.result_str
    assert recorder.batches == []


def test_best_formulas_is_the_pareto_front(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, ctx, _ = make(agent_dataset, agent_evaluator)
    empty = catalog.invoke(ToolCall("best_formulas", {}))
    assert empty.ok and empty.result["front"] == [] and "No formula has been fitted" in empty.result_str
    exprs = ["c*x0", "c*x0 + d", "c*x0*x1", "c*x0*x1 + d", "x0 +"]
    assert catalog.invoke(ToolCall("evaluate_formulas", {"expressions": exprs})).ok
    result = catalog.invoke(ToolCall("best_formulas", {"k": 5}))
    front = result.result["front"]
    complexities = [c["complexity"] for c in front]
    nmses = [c["val_nmse"] for c in front]
    assert complexities == sorted(complexities)
    assert all(b < a for a, b in zip(nmses, nmses[1:])), "each entry must beat every simpler one"
    assert front[-1]["expression"] == "c*x0*x1"
    assert "c*x0*x1 + d" not in [c["expression"] for c in front]  # more complex, no better
    assert result.result["evaluated"] == 5
    # the exact law c*x0*x1 (c = 2.5) reads as it is written in the truth
    assert front[-1]["simplified"] == "2.5*x0*x1"
    assert all(isinstance(c["simplified"], str) for c in front)
    assert "c*x0*x1 [c=2.5]  simplified: 2.5*x0*x1" in result.result_str
    one = catalog.invoke(ToolCall("best_formulas", {"k": 1}))
    assert [c["expression"] for c in one.result["front"]] == ["c*x0*x1"]
    bad = catalog.invoke(ToolCall("best_formulas", {"k": 0}))
    assert not bad.ok and "k must be between 1 and 50" in bad.result_str


def test_submit_formula_records_the_answer(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, ctx, recorder = make(agent_dataset, agent_evaluator)
    episode: EpisodeState = ctx.episode
    episode.begin_turn(2)
    episode.begin_call("call_s")
    result = catalog.invoke(ToolCall("submit_formula", {"expression": "k*x0*x1", "rationale": "product law"}))
    assert result.ok and result.result["submitted"] is True
    assert "The search ends after this turn" in result.result_str
    submission = episode.submission
    assert submission is not None and submission.rationale == "product law"
    assert submission.candidate.expression == "k*x0*x1" and submission.candidate.step == 2
    assert submission.candidate.test_nmse is not None and submission.candidate.test_nmse < 1e-8
    assert [f.expression for f in recorder.fits] == ["k*x0*x1"]


@pytest.mark.parametrize(("expression", "status"), [("x0 * * x1", "invalid"), ("log(-x0)", "nonfinite")])
def test_submit_formula_refuses_a_formula_that_does_not_fit(
    agent_dataset: Dataset, agent_evaluator: Evaluator, expression: str, status: str
) -> None:
    catalog, ctx, recorder = make(agent_dataset, agent_evaluator)
    result = catalog.invoke(ToolCall("submit_formula", {"expression": expression}))
    assert not result.ok and result.meta_data["model_visible"]
    assert f"not submitted: the formula's status is {status}" in result.result_str
    assert ctx.episode.submission is None
    assert len(recorder.fits) == 1  # recorded like any candidate


def test_context_helper_refuses_what_cannot_work(agent_dataset: Dataset) -> None:
    with pytest.raises(TypeError, match="fit_many"):
        formula_tool_context(agent_dataset, object())
    with pytest.raises(ValueError, match="max_expressions_per_call"):
        formula_tool_context(agent_dataset, FailingEvaluator(), max_expressions_per_call=0)
    with pytest.raises(ValueError, match="unknown tool 'nope'"):
        build_formula_catalog(formula_tool_context(agent_dataset, FailingEvaluator()), ["nope"])


def test_format_nmse_uses_four_significant_digits() -> None:
    assert format_nmse(0.000123456) == "0.0001235"
    assert format_nmse(1.23456e-9) == "1.235e-09"
    assert format_nmse(math.inf) == "inf" and format_nmse(None) == "-"


def test_a_formula_tool_needs_an_episode_context_to_run_but_not_to_be_described() -> None:
    from sr_dist.tools import BaseTool

    bare = BaseTool.create("evaluate_formulas")
    assert bare.metadata.name == "evaluate_formulas" and "expressions" in bare.spec.parameters["properties"]
    with pytest.raises(RuntimeError, match="without an EpisodeContext"):
        bare(expressions=["x0"])
    with pytest.raises(TypeError, match="needs an EpisodeContext, got dict"):
        BaseTool.create("evaluate_formulas", context={"dataset": None})


def test_the_basetool_evaluate_helper_of_a_formula_tool_records_its_fits(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, ctx, recorder = make(agent_dataset, agent_evaluator)
    tool = catalog.get("best_formulas")
    fit = tool.evaluate(tool.parse_formula("c*x0"))
    assert fit.status == "ok"
    assert len(ctx.archive) == 1 and [f.expression for f in recorder.fits] == ["c*x0"]


def test_origins_label_each_recorded_fit_and_never_change_it(agent_dataset: Dataset, agent_evaluator: Evaluator) -> None:
    catalog, _, recorder = make(agent_dataset, agent_evaluator)
    exprs = ["c*x0*x1", "a*x0 + b", "x0 +"]
    long_label = "hypothesis: " + "x" * 500
    result = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": exprs,
                                                           "origins": ["library/power_law", long_label, ""]}))
    assert result.ok, result.result_str
    plain = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": exprs[:2]}))
    labelled, unlabelled = recorder.batches
    assert [f.origin for f in labelled.fits] == ["library/power_law", long_label[:MAX_ORIGIN_CHARS], None]
    assert [f.origin for f in unlabelled.fits] == [None, None]
    # The label is a note beside the fit: the same formula fits to the same numbers without it.
    assert [r["val_nmse"] for r in plain.result["results"]] == [r["val_nmse"] for r in result.result["results"][:2]]


@pytest.mark.parametrize("origins, needle", [
    (["library/power_law"], "origins has 1 labels for 2 formulas"),
    (["a", "b", "c"], "origins has 3 labels for 2 formulas"),
])
def test_origins_that_do_not_match_the_formulas_are_refused(
        agent_dataset: Dataset, agent_evaluator: Evaluator, origins: list[str], needle: str) -> None:
    catalog, ctx, recorder = make(agent_dataset, agent_evaluator)
    result = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": ["c*x0", "c*x1"], "origins": origins}))
    assert not result.ok and needle in result.result_str
    assert recorder.batches == [] and len(ctx.archive) == 0
    wrong_type = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": ["c*x0"], "origins": [3]}))
    assert not wrong_type.ok and "argument 'origins[0]'" in wrong_type.result_str


def test_starts_give_a_local_fit_from_the_values_a_model_sends(agent_dataset: Dataset,
                                                               agent_evaluator: Evaluator) -> None:
    agent_evaluator.clear_cache()
    catalog, ctx, recorder = make(agent_dataset, agent_evaluator)
    full = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": ["a*x0 + b*x1"]}))
    assert full.ok, full.result_str
    fitted = full.result["results"][0]["constants"]
    agent_evaluator.clear_cache()
    result = catalog.invoke(ToolCall("evaluate_formulas", {
        "expressions": ["a*x0 + b*x1", "k*x0*x1", "x0 + q"],
        "starts": [fitted, None, {"zz": 1.0}]}))
    assert result.ok, result.result_str
    fits = recorder.batches[-1].fits
    assert [f.local for f in fits] == [True, False, False]
    assert fits[0].constants == pytest.approx(fitted, rel=1e-4)
    assert fits[2].status == "invalid" and "zz" in (fits[2].error or "")
    assert "zz" in result.result_str  # the model reads why


def test_starts_that_do_not_match_the_formulas_are_refused(agent_dataset: Dataset,
                                                           agent_evaluator: Evaluator) -> None:
    catalog, ctx, recorder = make(agent_dataset, agent_evaluator)
    short = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": ["c*x0", "c*x1"],
                                                          "starts": [None]}))
    assert not short.ok and "starts has 1 entries for 2 formulas" in short.result_str
    wrong = catalog.invoke(ToolCall("evaluate_formulas", {"expressions": ["c*x0"],
                                                          "starts": [{"c": "one"}]}))
    assert not wrong.ok and "argument 'starts[0].c'" in wrong.result_str
    assert recorder.batches == [] and len(ctx.archive) == 0
