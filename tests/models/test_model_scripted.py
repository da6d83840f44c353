"""``scripted``: the soak proposer's structure pool, its seeded draws, its config errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import sr_dist
from sr_dist.conversation import Context
from sr_dist.formula import parse_formula
from sr_dist.models import (
    PROVIDERS,
    ModelConfigError,
    ModelError,
    ModelProtocol,
    ModelResponse,
    build_model,
)
from sr_dist.models.scripted import ScriptedModel, structure_pool

TOOLS = [{"type": "function", "function": {"name": "evaluate_formulas", "parameters": {}}}]


def context(variables: list[str], seed: int = 7) -> Context:
    return Context(info={"variables": variables, "seed": seed})


def expressions(response: ModelResponse) -> list[list[str]]:
    calls = response.tool_calls
    assert all(c["function"]["name"] == "evaluate_formulas" for c in calls)
    return [json.loads(c["function"]["arguments"])["expressions"] for c in calls]


@pytest.mark.parametrize("variables", [["x"], ["sigma", "theta"], ["c0", "c1", "k"]])
def test_pool_structures_parse_with_distinct_canonical_forms(variables: list[str]) -> None:
    pool = structure_pool(variables, 10_000)
    parsed = [parse_formula(text, variables) for text in pool]
    assert len({f.canonical for f in parsed}) == len(pool)
    assert all(1 <= len(f.constants) <= 4 for f in parsed)
    assert not any(set(f.constants) & set(variables) for f in parsed)  # constants dodge variables
    assert {v for f in parsed for v in f.variables} == set(variables)


def test_pool_is_a_fixed_prefix_and_refuses_nonsense() -> None:
    assert structure_pool(["x", "y"], 40) == structure_pool(["x", "y"], 300)[:40]
    assert len(structure_pool(["x"], 10_000)) == 65  # 8 + 28 + 28 + 1 for one variable
    with pytest.raises(ValueError, match="at least one variable"):
        structure_pool([], 5)
    with pytest.raises(ValueError, match="positive size"):
        structure_pool(["x"], 0)


def test_calls_are_seeded_draws_from_the_pool() -> None:
    variables = ["sigma", "theta"]
    model = build_model({"provider": "scripted", "formulas_per_call": 16, "calls_per_turn": 3,
                         "structures": 40})
    assert isinstance(model, ModelProtocol) and model.tool_mode == "native"
    first = expressions(model.call(context(variables), TOOLS))
    second = expressions(model.call(context(variables), TOOLS))
    pool = set(structure_pool(variables, 40))
    assert [len(batch) for batch in first] == [16, 16, 16]
    assert all(set(batch) <= pool and len(set(batch)) == 16 for batch in first + second)
    assert first != second  # a new draw per call
    again = build_model({"provider": "scripted", "formulas_per_call": 16, "calls_per_turn": 3,
                         "structures": 40})
    assert expressions(again.call(context(variables), TOOLS)) == first  # same seed, same draws
    other = build_model({"provider": "scripted", "formulas_per_call": 16, "calls_per_turn": 3,
                         "structures": 40})
    assert expressions(other.call(context(variables, seed=8), TOOLS)) != first
    ids = [c["id"] for c in model.call(context(variables), TOOLS).tool_calls]
    assert len(set(ids)) == 3


def test_a_pool_smaller_than_a_call_sends_the_whole_pool() -> None:
    model = ScriptedModel(formulas_per_call=64, structures=5, variables=["x"])
    (batch,) = expressions(model.call(Context(), TOOLS))
    assert sorted(batch) == sorted(structure_pool(["x"], 5))


def test_preset_builds_and_the_provider_is_listed() -> None:
    preset = OmegaConf.load(Path(sr_dist.__file__).parent / "conf" / "model" / "scripted.yaml")
    model = build_model(preset)
    assert "scripted" in PROVIDERS and isinstance(model, ScriptedModel)
    assert (model.formulas_per_call, model.calls_per_turn, model.structures) == (64, 1, 256)
    assert model.history_calls == 0


@pytest.mark.parametrize(("options", "fragment"), [
    ({"formulas_per_call": 65}, "at most 64"),
    ({"formulas_per_call": 0}, "model.formulas_per_call must be a positive integer"),
    ({"calls_per_turn": 1.5}, "model.calls_per_turn must be a positive integer"),
    ({"structures": True}, "model.structures must be a positive integer"),
    ({"seed": -1}, "model.seed must be a non-negative integer"),
    ({"seed": "x"}, "model.seed must be a non-negative integer"),
    ({"tool_mode": "json"}, "native tool calls only"),
    ({"variables": "x"}, "model.variables must be a list of names"),
    ({"batch_size": 8}, "model.batch_size"),
])
def test_config_errors_name_the_key(options: dict[str, object], fragment: str) -> None:
    with pytest.raises(ModelConfigError, match=fragment):
        build_model({"provider": "scripted", **options})


def test_missing_variables_or_tool_is_a_config_model_error() -> None:
    model = build_model({"provider": "scripted"})
    with pytest.raises(ModelError, match="variable names") as info:
        model.call(Context(), TOOLS)
    assert info.value.kind == "config"
    with pytest.raises(ModelError, match="evaluate_formulas") as info:
        model.call(context(["x"]), [{"type": "function", "function": {"name": "submit_formula"}}])
    assert info.value.kind == "config"
