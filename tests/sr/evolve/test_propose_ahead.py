"""``propose_ahead``: the next batch is bred while the last one is fitted, and is still a
function of the context (a fresh model given it proposes the same)."""

from __future__ import annotations

import copy
import json

import pytest

from sr_dist.conversation import Context
from sr_dist.sr.evolve.model import EvolveModel
from sr_dist.sr.evolve.population import proposed_keys
from sr_dist.tools.types import ToolCall, ToolCallResult

from .conftest import NAMES, TOOLS, info_for, step


def _turns(datasets, evaluators, name: str, turns: int, **options):
    """A model proposing ahead driven for ``turns`` turns: its context and its responses."""
    context = Context(info=info_for(datasets[name], sample=False))  # data-free seeds: quick
    # Migration adds a second call to some turns (test_migration.py): one pair a turn here.
    model = EvolveModel(batch_size=16, seed=7, propose_ahead=True, migrate_every=0, **options)
    responses = [step(model, context, evaluators[name]) for _ in range(turns)]
    return model, context, responses


@pytest.mark.parametrize("name", ["sum", "product"])
def test_a_fresh_model_proposes_what_was_bred_ahead(datasets, evaluators, name: str) -> None:
    model, context, responses = _turns(datasets, evaluators, name, 8)
    # Every call after one that sent a batch was bred ahead (a submission breeds nothing).
    tools = [r.tool_calls[0]["function"]["name"] for r in responses]
    assert model.proposed_ahead == sum(t == "evaluate_formulas" for t in tools[:-1]) >= 5
    for turn, response in enumerate(responses):
        fresh = EvolveModel(batch_size=16, seed=7, propose_ahead=True, migrate_every=0)
        replay = Context(info=context.info, tool_history=list(context.tool_history[:turn]))
        assert fresh.call(replay, TOOLS) == response, f"turn {turn}"
        # Numbered, and seeded, by the calls so far, as without proposing ahead.
        assert response.tool_calls[0]["id"] == f"evolve-{turn}"
        assert fresh.proposed_ahead == 0


def test_a_batch_is_bred_without_the_last_calls_results(datasets, evaluators) -> None:
    _, context, responses = _turns(datasets, evaluators, "sum", 5)
    pairs = context.tool_history
    tried: set[str] = set()
    for turn, response in enumerate(responses):
        sent = json.loads(response.tool_calls[0]["function"]["arguments"])["expressions"]
        keys = proposed_keys(sent, NAMES)
        assert len(keys) == len(sent) and not keys & tried, f"turn {turn}"  # all new
        tried |= keys
    for turn in range(2, 5):
        # The last call's results do not matter (they were not read): without them, the same.
        call, _ = pairs[turn - 1]
        blind = list(pairs[:turn - 1]) + [(call, ToolCallResult(True, {"results": []}, "", {}))]
        fresh = EvolveModel(batch_size=16, seed=7, propose_ahead=True, migrate_every=0)
        assert fresh.call(Context(info=context.info, tool_history=blind), TOOLS) == responses[turn]
    # A model that reads them proposes otherwise.
    plain = EvolveModel(batch_size=16, seed=7, propose_ahead=False, migrate_every=0)
    assert plain.call(Context(info=context.info, tool_history=list(pairs[:4])), TOOLS) != responses[4]


def test_a_history_other_than_the_one_bred_for_is_proposed_for_again(datasets, evaluators) -> None:
    model, context, _ = _turns(datasets, evaluators, "sum", 3)
    # The last call answered with other expressions than the model sent (a rewritten history):
    # the bred proposal is dropped and the call is answered from the history as it is.
    call, result = context.tool_history[-1]
    edited = dict(call.arguments, expressions=["x0 + x1"])
    context.tool_history[-1] = (ToolCall(call.name, edited, call.id), result)
    before = model.proposed_ahead
    response = model.call(context, TOOLS)
    assert model.proposed_ahead == before
    fresh = EvolveModel(batch_size=16, seed=7, propose_ahead=True)
    assert fresh.call(Context(info=context.info, tool_history=list(context.tool_history)), TOOLS) == response
    # Other tools offered than those the proposal was bred with: proposed again as well.
    context.tool_history.append((ToolCall("evaluate_formulas", json.loads(
        response.tool_calls[0]["function"]["arguments"]), response.tool_calls[0]["id"]),
        ToolCallResult(True, {"results": []}, "", {})))
    tools = [t for t in TOOLS if t["function"]["name"] != "submit_formula"]
    before = model.proposed_ahead
    answer = model.call(context, tools)
    assert model.proposed_ahead == before
    fresh = EvolveModel(batch_size=16, seed=7, propose_ahead=True)
    assert fresh.call(Context(info=context.info, tool_history=list(context.tool_history)), tools) == answer


def test_on_by_default_and_off_on_request(datasets, evaluators) -> None:
    assert EvolveModel().config.propose_ahead is True
    context = Context(info=info_for(datasets["product"], sample=False))
    model = EvolveModel(batch_size=16, seed=7, propose_ahead=False)
    for _ in range(4):
        step(model, context, evaluators["product"])
    assert model.proposed_ahead == 0
    # Off, nothing is bred in the background and a fresh model proposes the same. (That a model
    # with it off reads the last call's results is checked in
    # test_a_batch_is_bred_without_the_last_calls_results.)
    fresh = EvolveModel(batch_size=16, seed=7, propose_ahead=False)
    assert fresh.call(copy.copy(context), TOOLS) == model.call(context, TOOLS)
