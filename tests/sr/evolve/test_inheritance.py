"""Lamarckian inheritance (``EvolveConfig.inherit_constants``) and the incremental history
reader: constants travel with their trees, offspring ask for local searches, and reading a
history turn by turn gives the state a full read gives."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from sr_dist.conversation import Context
from sr_dist.evaluator import Evaluator
from sr_dist.formula import parse_formula
from sr_dist.sr.evolve.library.config import DEFAULT_SOURCES
from sr_dist.sr.evolve.model import EvolveModel
from sr_dist.sr.evolve.population import HistoryReader, read_history
from sr_dist.sr.evolve.search import (
    EvolveConfig,
    inherited_start,
    propose,
)
from sr_dist.sr.evolve.tree import (
    binary,
    const,
    constant_values,
    name_constants,
    render,
    var,
    with_constant_values,
)
from sr_dist.tools.types import ToolCall, ToolCallResult

from .conftest import NAMES, TOOLS, generated_dataset, info_for, step

WITHOUT_CURVES = [s for s in DEFAULT_SOURCES if s not in ("curves", "pair_curves")]


def test_constant_values_follow_the_order_render_names_them() -> None:
    tree = binary("add", binary("mul", const(), binary("pow", var("x0"), const())),
                  binary("div", const(), binary("add", var("x1"), const())))
    named = name_constants(tree)
    carried = with_constant_values(named, {"c0": 0.5, "c2": 2.5, "c3": 3.5})
    assert constant_values(carried) == [0.5, None, 2.5, 3.5]
    assert render(carried) == render(tree)  # values never change the text
    assert inherited_start(carried, "c") == {"c0": 0.5, "c2": 2.5, "c3": 3.5}
    assert inherited_start(with_constant_values(named, {"c1": 1.0}), "c") is None  # 1 of 4 < share
    assert inherited_start(var("x0"), "c") is None


def _history(datasets, evaluators, inherit: bool | None, turns: int) -> Context:
    """``turns`` turns of a model with inheritance on, off, or (None) as configured by default."""
    context = Context(info=info_for(datasets["sum"], sample=False))
    options = {} if inherit is None else {"inherit_constants": inherit}
    model = EvolveModel(batch_size=16, seed=4, **options)
    for _ in range(turns):
        step(model, context, evaluators["sum"])
    return context


@pytest.mark.parametrize("inherit", [False, True])
def test_reading_turn_by_turn_equals_reading_the_whole_history(datasets, evaluators,
                                                               inherit: bool) -> None:
    pairs = _history(datasets, evaluators, inherit, 5).tool_history
    reader = HistoryReader(NAMES, with_constants=inherit)
    for end in range(1, len(pairs) + 1):
        assert reader.read(pairs[:end]) == read_history(pairs[:end], NAMES, with_constants=inherit)
    # Another conversation (not an extension of the last one read) is read from its start.
    other = copy.deepcopy(pairs[:2])
    assert reader.read(other) == read_history(other, NAMES, with_constants=inherit)


def test_offspring_ask_for_local_searches_from_their_parents_constants(datasets, evaluators) -> None:
    context = _history(datasets, evaluators, None, 4)  # on by default
    asked = 0
    for call, result in context.tool_history:
        starts = call.arguments.get("starts")
        if starts is None:
            continue
        assert len(starts) == len(call.arguments["expressions"])
        for text, origin, start, record in zip(call.arguments["expressions"], call.arguments["origins"],
                                               starts, result.result["results"], strict=True):
            if start is None:
                continue
            asked += 1
            assert origin.startswith("gp/") and origin != "gp/fresh"
            assert set(start) <= set(parse_formula(text, NAMES).constants)
            assert record["status"] in ("ok", "nonfinite")
    assert asked > 0
    # Off, no call carries starts: the arguments are what they always were.
    plain = _history(datasets, evaluators, False, 4)
    assert all("starts" not in call.arguments for call, _ in plain.tool_history)
    response = EvolveModel(batch_size=16, seed=4, inherit_constants=False).call(copy.deepcopy(plain), TOOLS)
    assert "starts" not in json.loads(response.tool_calls[0]["function"]["arguments"])


def _call(expressions: list[str], nmses: list[float | None],
          starts: list[dict[str, float] | None] | None = None) -> tuple[ToolCall, ToolCallResult]:
    records = [{"expression": e, "canonical": parse_formula(e, NAMES).canonical,
                "status": "ok" if v is not None else "nonfinite", "val_nmse": v, "train_nmse": v,
                "complexity": parse_formula(e, NAMES).complexity, "constants": {}}
               for e, v in zip(expressions, nmses, strict=True)]
    arguments: dict[str, object] = {"expressions": expressions}
    if starts is not None:
        arguments["starts"] = starts
    return ToolCall("evaluate_formulas", arguments), ToolCallResult(True, {"results": records}, "")


def test_a_local_fit_is_replaced_by_the_full_fit_asked_for_since() -> None:
    local = _call(["c0*x0 + c1", "c0*x1"], [0.3, 0.5], [{"c0": 1.0}, None])
    history = read_history([local], NAMES, with_constants=True)
    assert {i.expression: i.local for i in history.individuals} == {"c0*x0 + c1": True, "c0*x1": False}
    # The full refit of the same structure (another spelling) replaces the local one.
    refit = _call(["c1 + c0*x0"], [0.1])
    after = read_history([local, refit], NAMES, with_constants=True)
    (one,) = [i for i in after.individuals if i.canonical == parse_formula("c0*x0 + c1", NAMES).canonical]
    assert (one.expression, one.nmse, one.local) == ("c1 + c0*x0", 0.1, False)
    # A full request that failed still ends the structure's claim to a refit; a later local
    # fit of a known structure changes nothing.
    failed = read_history([local, _call(["c0*x0 + c1"], [None]),
                           _call(["c0*x1"], [0.01], [{"c0": 2.0}])], NAMES, with_constants=True)
    assert {i.expression: (i.local, i.nmse) for i in failed.individuals} == {
        "c0*x0 + c1": (False, 0.3), "c0*x1": (False, 0.5)}


def test_front_members_fitted_only_locally_are_proposed_again_in_full() -> None:
    calls = [_call(["c0*x0", "c0*x0 + c1*x1", "c0*x0*x1 + c1*x2 + c2"], [0.5, 0.2, 0.05],
                   [{"c0": 1.0}, {"c0": 1.0}, None])]
    history = read_history(calls, NAMES, with_constants=True)
    config = EvolveConfig(batch_size=8, inherit_constants=True, refit_share=0.25)
    proposal = propose(history, NAMES, [], config, np.random.default_rng(0))
    refits = [(e, s) for e, o, s in zip(proposal.expressions, proposal.origins,
                                         proposal.starts or [None] * 8, strict=True) if o == "refit"]
    assert refits == [("c0*x0", None), ("c0*x0 + c1*x1", None)]  # simplest first, no start
    one = propose(history, NAMES, [], EvolveConfig(batch_size=8, inherit_constants=True,
                                                   refit_share=0.125), np.random.default_rng(0))
    assert [e for e, o in zip(one.expressions, one.origins, strict=True) if o == "refit"] == ["c0*x0"]
    # By default (refit_share 0), and without inheritance, nothing is refitted.
    for plain_config in (EvolveConfig(batch_size=8), EvolveConfig(batch_size=8, inherit_constants=False)):
        plain = propose(history, NAMES, [], plain_config, np.random.default_rng(0))
        assert "refit" not in plain.origins
    with pytest.raises(ValueError, match="refit_share"):
        EvolveConfig(refit_share=1.5)


def test_inheritance_hit_count_over_a_generated_family(tmp_path: Path) -> None:
    """Seeds 0-7 of the family, 40 generations of 32 at most, inheritance on (the default): at
    least one exact. The search is chaotic (one last-bit difference in one fit sends it
    elsewhere), so a seed is a coin flip; on CI's machine (AMD EPYC, AVX2) seeds 0-47 were
    exact in 26 of 48 with inheritance and 25 of 48 without (this test's seeds: 1 of 8), and
    8 seeds with a bar of 1 fail by chance about once in 500. It was developed on an
    AVX-512 machine, where seeds 0-15 gave 12 of 16 against 6 of 16: inheritance buys
    throughput (docs/evolve.md), not hits on this family."""
    hits = 0
    for seed in range(8):
        dataset = generated_dataset(tmp_path, seed)
        evaluator = Evaluator(dataset, restarts=4, max_iters=30)
        context = Context(info=info_for(dataset, sample=False))
        # The library these figures were measured with: the curves source (default since) adds
        # 90 entries here, which the 40 generations would spend on.
        model = EvolveModel(batch_size=32, seed=0, library={"sources": WITHOUT_CURVES})
        for _ in range(40):
            step(model, context, evaluator)
            fits = [r for _, res in context.tool_history for r in res.result.get("results", [])]
            if min((r["val_nmse"] for r in fits if r["status"] == "ok"), default=1.0) < 1e-10:
                hits += 1
                break
    assert hits >= 1, hits


def _random_calls(seed: int, turns: int) -> list[tuple[ToolCall, ToolCallResult]]:
    """A generated history with ties (few distinct NMSEs), unit verdicts, local fits and the
    full refits that replace them."""
    rng = np.random.default_rng(seed)
    shapes = [f"c0*x{i} + c1*x{j}**{k}" for i in range(3) for j in range(3) for k in (2, 3)]
    shapes += [f"c0*x{i}*x{j} + c1" for i in range(3) for j in range(3) if i < j]
    shapes += [f"sin(c0*x{i}) + c1*x{j}" for i in range(3) for j in range(3)]
    calls = []
    for _ in range(turns):
        picked = [shapes[int(k)] for k in rng.choice(len(shapes), size=6, replace=False)]
        nmses = [None if rng.random() < 0.1 else float(rng.choice([0.5, 0.1, 0.01, 1e-3]))
                 for _ in picked]
        starts = [{"c0": 1.0} if rng.random() < 0.5 else None for _ in picked]
        call, result = _call(picked, nmses, starts)
        for record in result.result["results"]:
            record["dimensionally_consistent"] = bool(rng.random() < 0.8)
        calls.append((call, result))
    return calls


@pytest.mark.parametrize("seed", range(4))
def test_the_readers_standings_equal_a_full_sort_turn_by_turn(seed: int) -> None:
    calls = _random_calls(seed, 14)
    reader = HistoryReader(NAMES, with_constants=True, parsimony=0.02)
    was_local: set[str] = set()
    refitted = 0
    for end in range(1, len(calls) + 1):
        kept = reader.read(calls[:end])
        full = read_history(calls[:end], NAMES, with_constants=True)
        assert kept.standing is not None and full.standing is None
        assert kept == full
        assert kept.best == full.best
        assert kept.pareto() == full.pareto()
        assert kept.ranked(0.02) == full.ranked(0.02)
        assert kept.ranked(0.1) == full.ranked(0.1)  # another parsimony: computed anew
        assert kept.has_units == full.has_units
        for target in (1.0, 0.05, 2e-3, 1e-4):  # all, some, few and none under the target
            assert kept.solutions(target) == full.solutions(target)
        refitted += sum(not i.local and i.canonical in was_local for i in kept.individuals)
        was_local = {i.canonical for i in kept.individuals if i.local}
    assert refitted > 0  # the stream replaced local fits, the views' rare path


def test_an_individual_builds_its_bred_tree_only_when_asked() -> None:
    fitted = _call(["c0*x0 + c1"], [0.3])
    fitted[1].result["results"][0]["constants"] = {"c0": 2.0, "c1": -0.5}
    (carried,) = read_history([fitted], NAMES, with_constants=True).individuals
    (plain,) = read_history([fitted], NAMES).individuals
    assert "tree" not in vars(carried)  # not built while reading the history
    assert constant_values(carried.tree) == [2.0, -0.5]
    assert constant_values(carried.parsed_tree) == [None, None]
    assert plain.tree is plain.parsed_tree and plain.fitted == ()
    assert carried != plain  # the carried values are part of the state
