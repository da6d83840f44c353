"""Agents of one run share work: each fits its own part of the seed library, and every
``migrate_every`` generations an ``evolve`` agent reads the run's front (``best_formulas``) and
breeds from the members it lacks."""

from __future__ import annotations

import json
from typing import Any

from sr_dist.conversation import Context
from sr_dist.evaluator import Evaluator
from sr_dist.formula import parse_formula
from sr_dist.sr.evolve.model import EvolveModel
from sr_dist.sr.evolve.population import read_history
from sr_dist.tools.types import ToolCall, ToolCallResult

from .conftest import TOOLS, generated_dataset, info_for, step, tool_record


def _library_picks(model: EvolveModel, info: dict[str, Any], evaluator: Any, turns: int) -> list[str]:
    context = Context(info=info)
    picks: list[str] = []
    for _ in range(turns):
        step(model, context, evaluator)
        args = context.tool_history[-1][0].arguments
        picks += [text for text, origin in zip(args["expressions"], args["origins"])
                  if origin.startswith("library")]
    return picks


def test_agents_of_a_run_split_the_library(datasets, evaluators) -> None:
    ds, evaluator = datasets["sum"], evaluators["sum"]
    head = 8  # half a batch of 16: every agent fits the near-exact seeds
    model = EvolveModel(batch_size=16, seed=0)  # one model, one library build, four conversations
    picks = []
    for agent in (0, 1):
        info = {**info_for(ds), "agent_id": agent, "agents": 2}
        picks.append(_library_picks(model, info, evaluator, 4))
    keys = [{parse_formula(t, ["x0", "x1", "x2"]).canonical for t in p} for p in picks]
    # Only the common head is fitted by both; each agent went on with seeds of its own.
    assert len(keys[0] & keys[1]) <= head
    assert len(keys[0]) > head + 8 and len(keys[1]) > head + 8
    # Where the run's agent count is not given (or is one) agent 0 walks the whole library.
    alone = _library_picks(model, info_for(ds), evaluator, 4)
    assert _library_picks(model, {**info_for(ds), "agents": 1}, evaluator, 4) == alone
    assert alone[:head] == picks[0][:head] and alone != picks[0]
    assert len(keys[1] - {parse_formula(t, ["x0", "x1", "x2"]).canonical for t in alone}) > 0


def _front_answer(entries: list[dict[str, Any]]) -> ToolCallResult:
    return ToolCallResult(True, {"front": entries, "front_size": len(entries), "evaluated": 0,
                                 "run_wide": True}, "", {"tool": "best_formulas"})


def test_every_few_generations_the_run_front_joins_the_pool(datasets, evaluators) -> None:
    ds, evaluator = datasets["sum"], evaluators["sum"]
    model = EvolveModel(batch_size=12, seed=1, migrate_every=3)
    context = Context(info=info_for(ds, sample=False))
    law = evaluator.fit_many(["a*x0*sin(x1) + b*x2**2"])[0]
    assert law.ok and law.val_nmse < 1e-12
    asked = []
    for _ in range(8):
        before = Context(info=context.info, tool_history=list(context.tool_history))
        response = model.call(context, TOOLS)
        # still a function of the context: a fresh model given it proposes the same
        assert EvolveModel(batch_size=12, seed=1, migrate_every=3).call(before, TOOLS) == response
        names = [call["function"]["name"] for call in response.tool_calls]
        asked.append("best_formulas" in names)
        for call in response.tool_calls:
            name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
            if name == "best_formulas":
                assert args == {"k": 50, "simplify": False}
                result = _front_answer([tool_record(law)])
            else:
                fits = evaluator.fit_many(args["expressions"], starts=args.get("starts"))
                result = ToolCallResult(True, {"results": [tool_record(f) for f in fits]}, "", {})
            context.tool_history.append((ToolCall(name, args, call["id"]), result))
    # Generations 3 and 6 as the proposal counts them ask for the front: bred ahead, a call
    # does not count the one before it (turns 4 and 7).
    assert asked == [False, False, False, False, True, False, False, True]
    history = read_history(context.tool_history, ["x0", "x1", "x2"], with_constants=True)
    migrant = next(i for i in history.individuals if i.canonical == law.canonical)
    assert migrant.nmse == law.val_nmse and dict(migrant.fitted) == law.constants
    assert law.canonical in history.seen
    # the search went on from it: its reduction (the law has no second scale) is the best now
    assert history.best is not None and history.best.nmse < 1e-12
    assert history.best.complexity < migrant.complexity


def test_no_migration_without_the_tool_or_when_off(datasets, evaluators) -> None:
    ds, evaluator = datasets["sum"], evaluators["sum"]
    without = [t for t in TOOLS if t["function"]["name"] != "best_formulas"]
    for model, tools in ((EvolveModel(batch_size=8, seed=0, migrate_every=1), without),
                         (EvolveModel(batch_size=8, seed=0, migrate_every=0), TOOLS),
                         (EvolveModel(batch_size=8, seed=0, migrate_every=1), None)):
        context = Context(info=info_for(ds, sample=False))
        for _ in range(3):
            response = model.call(context, tools)
            assert [c["function"]["name"] for c in response.tool_calls] == ["evaluate_formulas"]
            step_args = json.loads(response.tool_calls[0]["function"]["arguments"])
            fits = evaluator.fit_many(step_args["expressions"], starts=step_args.get("starts"))
            context.tool_history.append((
                ToolCall("evaluate_formulas", step_args, response.tool_calls[0]["id"]),
                ToolCallResult(True, {"results": [tool_record(f) for f in fits]}, "", {})))


def test_a_front_answer_with_junk_is_read_safely(datasets) -> None:
    ds = datasets["sum"]
    pairs = [(ToolCall("best_formulas", {"k": 50}, "f"), _front_answer(
        ["junk", {"expression": "x0 +", "val_nmse": 0.1}, {"expression": 3},
         {"expression": "c0*x0", "canonical": "mul(c0,vx0)", "val_nmse": float("nan")},
         {"expression": "c0*x2", "canonical": "mul(c0,vx2)", "val_nmse": 0.5, "constants": {"c0": 2}}]))]
    history = read_history(pairs, list(ds.feature_names), with_constants=True)
    assert [i.expression for i in history.individuals] == ["c0*x2"]
    assert dict(history.individuals[0].fitted) == {"c0": 2.0}


def _two_agents(dataset: Any, evaluator: Any, migrate_every: int, turns: int) -> list[Any]:
    """Agent 0 sees a data sample (its library can hold the law), agent 1 none; they take turns,
    and ``best_formulas`` answers from a :class:`RunFront` fed with both agents' results, as the
    result writer's is. Returns each agent's history after ``turns`` turns."""
    from sr_dist.search.run_front import RunFront

    front = RunFront()
    agents = [(EvolveModel(batch_size=16, seed=k, migrate_every=migrate_every),
               Context(info={**info_for(dataset, sample=k == 0), "agent_id": k, "agents": 2}))
              for k in (0, 1)]
    for _ in range(turns):
        for model, context in agents:
            for call in model.call(context, TOOLS).tool_calls:
                name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
                if name == "evaluate_formulas":
                    records = [tool_record(f) for f in
                               evaluator.fit_many(args["expressions"], starts=args.get("starts"))]
                    front.add(records)
                    result = ToolCallResult(True, {"results": records}, "", {})
                elif name == "best_formulas":
                    result = _front_answer([c.brief() for c in front.front()[-args["k"]:]])
                else:
                    result = ToolCallResult(True, {}, "", {})
                context.tool_history.append((ToolCall(name, args, call["id"]), result))
    return [read_history(c.tool_history, list(dataset.feature_names)) for _, c in agents]


def test_migration_hit_count_over_a_generated_family(tmp_path) -> None:
    """The inheritance test's family (``a*x_i*f(x_j) + b*x_k**2``), seeds 0-2: the agent without
    a data sample holds an exact formula after 7 turns in every seed where the agent with one
    found it, with ``migrate_every=3``, and less often alone (``0``). Measured over seeds 0-5
    when this was written: the sampled agent exact in 6, the other in 6 with migration and in
    0 alone."""
    found = {3: 0, 0: 0}
    sampled = 0
    for seed in range(3):
        dataset = generated_dataset(tmp_path, seed)
        evaluator = Evaluator(dataset, restarts=4, max_iters=30)
        for every in found:
            with_sample, without = _two_agents(dataset, evaluator, every, 7)
            exact = [h.best is not None and h.best.nmse < 1e-10 for h in (with_sample, without)]
            sampled += exact[0] and every == 3
            found[every] += exact[1]
    assert sampled >= 2, sampled
    assert found[3] >= sampled and found[3] > found[0], found
