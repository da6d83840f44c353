"""EvolveModel behind the model protocol, driven by the real Evaluator: protocol shape,
determinism, dedupe, search progress, submission, and clear errors for bad input."""

from __future__ import annotations

import asyncio
import copy
import json
import math
from typing import Any

import pytest

from sr_dist.conversation import Context
from sr_dist.formula import parse_formula
from sr_dist.models import build_model
from sr_dist.models.base import ModelConfigError, ModelError, ModelProtocol
from sr_dist.sr.evolve.library.config import SOURCES
from sr_dist.sr.evolve.model import EvolveModel, build_evolve
from sr_dist.sr.evolve.operators import OPERATORS
from sr_dist.sr.evolve.population import read_history
from sr_dist.tools.types import ToolCall, ToolCallResult

from .conftest import TOOLS, info_for, step


def _expressions(response: Any) -> list[str]:
    call = response.tool_calls[0]
    assert call["function"]["name"] == "evaluate_formulas"
    return json.loads(call["function"]["arguments"])["expressions"]


def _best_val(context: Context) -> float:
    best = math.inf
    for _, result in context.tool_history:
        for record in (result.result or {}).get("results", []):
            if record["status"] == "ok" and record["val_nmse"] is not None:
                best = min(best, record["val_nmse"])
    return best


def test_protocol_shape(datasets, evaluators) -> None:
    model = EvolveModel(batch_size=8)
    assert isinstance(model, ModelProtocol)
    assert (model.name, model.tool_mode) == ("evolve", "native")
    response = model.call(Context(info=info_for(datasets["product"])), TOOLS)
    assert response.finish_reason == "tool_calls" and len(response.tool_calls) == 1
    call = response.tool_calls[0]
    assert call["type"] == "function" and isinstance(call["id"], str)
    expressions = json.loads(call["function"]["arguments"])["expressions"]
    assert 1 <= len(expressions) <= 8
    for text in expressions:
        parse_formula(text, ["x0", "x1", "x2"])


def test_finds_easy_product_within_a_few_turns(datasets, evaluators) -> None:
    context = Context(info=info_for(datasets["product"]))
    model = EvolveModel(batch_size=16)
    for _ in range(3):
        step(model, context, evaluators["product"])
    assert _best_val(context) < 1e-10


def test_gp_finds_a_sum_without_a_data_sample(datasets, evaluators) -> None:
    """No sample: only data-free seeds, so the structure must come from the search itself. The
    search is stochastic; one of three seeds must succeed within 40 generations (in a sweep of
    six seeds, five needed 10-31 generations)."""
    best = []
    for seed in (0, 1, 2):
        context = Context(info=info_for(datasets["sum"], sample=False))
        model = EvolveModel(batch_size=32, seed=seed)
        for _ in range(40):
            response = step(model, context, evaluators["sum"])
            if response.tool_calls[0]["function"]["name"] == "submit_formula":
                break
        best.append(_best_val(context))
        if best[-1] < 1e-10:
            break
    assert min(best) < 1e-10, best


def test_data_sample_solves_a_sparse_sum_in_the_first_batch(datasets, evaluators) -> None:
    context = Context(info=info_for(datasets["sum"]))
    step(EvolveModel(batch_size=16), context, evaluators["sum"])
    assert _best_val(context) < 1e-10


def test_submits_once_solved_and_polished(datasets, evaluators) -> None:
    context = Context(info=info_for(datasets["product"]))
    model = EvolveModel(batch_size=16, polish_generations=1)
    submitted = None
    for _ in range(6):
        response = step(model, context, evaluators["product"])
        call = response.tool_calls[0]
        if call["function"]["name"] == "submit_formula":
            submitted = json.loads(call["function"]["arguments"])
            break
    assert submitted is not None
    records = {r["expression"]: r for _, res in context.tool_history for r in (res.result or {}).get("results", [])}
    assert records[submitted["expression"]]["val_nmse"] < 1e-11
    assert submitted["rationale"]


def test_same_seed_and_history_give_the_same_batch(datasets, evaluators) -> None:
    context = Context(info=info_for(datasets["sum"], sample=False))
    model = EvolveModel(batch_size=12, seed=3)
    for _ in range(4):
        snapshot = copy.deepcopy(context)
        response = step(model, context, evaluators["sum"])
        # A fresh instance (no memo) given the same context proposes the same batch.
        assert EvolveModel(batch_size=12, seed=3).call(snapshot, TOOLS) == response


def test_different_seeds_differ(datasets, evaluators) -> None:
    batches = []
    for seed in (0, 1):
        context = Context(info=info_for(datasets["sum"], sample=False))
        model = EvolveModel(batch_size=16, seed=seed)
        for _ in range(3):
            step(model, context, evaluators["sum"])
        batches.append(list(context.tool_history[-1][0].arguments["expressions"]))
    assert batches[0] != batches[1]


def test_never_proposes_a_canonical_form_twice(datasets, evaluators) -> None:
    context = Context(info=info_for(datasets["sum"], sample=False))
    model = EvolveModel(batch_size=24, seed=2)
    keys: list[str] = []
    for _ in range(5):
        for text in _expressions(step(model, context, evaluators["sum"])):
            keys.append(parse_formula(text, ["x0", "x1", "x2"]).canonical)
    assert len(keys) == len(set(keys))


def test_every_proposal_names_its_origin(datasets, evaluators) -> None:
    """The first batch is the library's (each seed's source), later ones mix library seeds with
    the search's offspring (their operator) and fresh trees; the results table keeps the label."""
    context = Context(info=info_for(datasets["sum"]))
    model = EvolveModel(batch_size=16, seed=1)
    origins = []
    for _ in range(4):
        response = step(model, context, evaluators["sum"])
        if response.tool_calls[0]["function"]["name"] != "evaluate_formulas":
            break
        arguments = json.loads(response.tool_calls[0]["function"]["arguments"])
        assert len(arguments["origins"]) == len(arguments["expressions"])
        origins.append(arguments["origins"])
    assert all(o.startswith("library/") for o in origins[0])
    known = {f"gp/{name}" for name in OPERATORS} | {"gp/fresh", "reduction", "pruned", "phase_form"}
    for label in (o for batch in origins for o in batch):
        if label.startswith("library/"):
            assert label.removeprefix("library/").split("/")[0] in SOURCES, label
        else:
            assert label in known, label
    assert any(o.startswith("gp/") for batch in origins[1:] for o in batch)


def test_seed_from_context_info_when_not_configured(datasets) -> None:
    info = info_for(datasets["sum"], sample=False, seed=5)
    a = EvolveModel(seed=None, batch_size=8).call(Context(info=dict(info)), TOOLS)
    b = EvolveModel(seed=5, batch_size=8).call(Context(info=dict(info)), TOOLS)
    assert a == b


def test_prepare_builds_the_library_once_and_changes_no_proposal(
        datasets, evaluators, counted_builds) -> None:
    """``prepare`` (what an agent host runs while the evaluator warms up) builds the seed library
    the first call would build, and the turns after it propose what an unprepared model does."""
    built = counted_builds
    prepared_context = Context(info=info_for(datasets["product"]))
    plain_context = copy.deepcopy(prepared_context)
    prepared, plain = EvolveModel(batch_size=12, seed=4), EvolveModel(batch_size=12, seed=4)
    prepared.prepare(prepared_context)
    assert len(built) == 1
    for _ in range(3):
        assert step(prepared, prepared_context, evaluators["product"]) == \
            step(plain, plain_context, evaluators["product"])
    assert len(built) == 2  # the prepared model built no other; the plain one built its own


def test_prepare_reports_bad_input_like_call() -> None:
    with pytest.raises(ModelError, match="variable names"):
        EvolveModel().prepare(Context(info={}))


def test_acall_matches_call(datasets) -> None:
    context = Context(info=info_for(datasets["product"]))
    model = EvolveModel(batch_size=8)
    assert asyncio.run(model.acall(context, TOOLS)) == model.call(context, TOOLS)


def test_tolerates_junk_in_the_history(datasets) -> None:
    context = Context(info=info_for(datasets["product"]))
    junk = [
        (ToolCall("evaluate_formulas", {"expressions": ["x0*", 3, "c0*x0"]}, "a"), ToolCallResult(False, None, "boom", {"error_kind": "tool_error"})),
        (ToolCall("evaluate_formulas", {"expressions": "not a list"}, "b"), ToolCallResult(True, {"results": "nope"}, "")),
        (ToolCall("evaluate_formulas", {}, "c"), ToolCallResult(True, {"results": [None, {"status": "ok"}, {"status": "ok", "expression": "x0", "val_nmse": "nan"}]}, "")),
        (ToolCall("data_summary", {}, "d"), ToolCallResult(True, ["odd"], "")),
    ]
    context.tool_history.extend(junk)
    response = EvolveModel(batch_size=8).call(context, TOOLS)
    expressions = _expressions(response)
    assert expressions
    # The expression proposed in the failed call counts as tried.
    assert parse_formula("c0*x0", ["x0", "x1", "x2"]).canonical not in {
        parse_formula(e, ["x0", "x1", "x2"]).canonical for e in expressions
    }
    history = read_history(context.tool_history, ["x0", "x1", "x2"])
    assert history.generations == 3 and not history.individuals


def test_without_submit_tool_it_keeps_proposing(datasets, evaluators) -> None:
    context = Context(info=info_for(datasets["product"]))
    model = EvolveModel(batch_size=16, polish_generations=0)
    tools = [t for t in TOOLS if t["function"]["name"] != "submit_formula"]
    for _ in range(3):
        response = model.call(context, tools)
        assert response.tool_calls[0]["function"]["name"] == "evaluate_formulas"
        step(model, context, evaluators["product"])


@pytest.mark.parametrize(
    "info,tools,match",
    [
        ({}, TOOLS, "variables"),
        ({"variables": "x0"}, TOOLS, "variables"),
        ({"variables": ["x0"]}, [TOOLS[1]], "evaluate_formulas"),
    ],
)
def test_call_errors_are_model_errors(info: dict, tools: list, match: str) -> None:
    with pytest.raises(ModelError, match=match) as excinfo:
        EvolveModel().call(Context(info=info), tools)
    assert excinfo.value.kind == "config"


CONFIG_ERRORS = [
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": "8"}, "batch_size"),
    ({"seed": -1}, "seed"),
    ({"p_fresh": 2.0}, "p_fresh"),
    ({"stop_nmse": -1.0}, "stop_nmse"),
    ({"popsize": 3}, "popsize"),
    ({"tool_mode": "json"}, "native"),
    ({"variables": "x0"}, "variables"),
    ({"api_key": "x"}, "secrets"),
]


@pytest.mark.parametrize("cfg,match", CONFIG_ERRORS)
def test_config_errors(cfg: dict, match: str) -> None:
    with pytest.raises(ModelConfigError, match=match):
        build_evolve({"provider": "evolve", **cfg})


def test_build_from_config_and_through_build_model() -> None:
    model = build_evolve({"provider": "evolve", "batch_size": 8, "seed": 4, "tool_mode": "native",
                          "record_path": None, "parsimony": 0.05, "variables": ["a", "b"]})
    assert (model.config.batch_size, model.seed, model.config.parsimony, model.variables) == (8, 4, 0.05, ("a", "b"))
    built = build_model({"provider": "evolve", "batch_size": 4})
    assert isinstance(built, EvolveModel) and built.config.batch_size == 4


def test_agent_loop_with_evolve_submits_a_solution(datasets, evaluators) -> None:
    """The in-process agent with the formula tools drives evolve to a submission."""
    from sr_dist.agent import AgentLimits
    from sr_dist.sr import build_agent

    agent = build_agent(EvolveModel(batch_size=16), datasets["sum"], evaluators["sum"], limits=AgentLimits(max_turns=10))
    result = agent.run()
    assert result.stop_reason == "submitted", result
    assert result.submitted is not None and result.submitted.val_nmse < 1e-11
