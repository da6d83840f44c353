"""Seeding and history: pure functions checked against known answers."""

from __future__ import annotations

import numpy as np
import pytest

from sr_dist.formula import parse_formula
from sr_dist.sr.evolve.library import Sample, sample_from_info, seed_library
from sr_dist.sr.evolve.population import (
    History,
    Individual,
    pareto_front,
    read_history,
    score,
    tournament,
)
from sr_dist.sr.evolve.tree import render, tidy
from sr_dist.sr.structure.power_law import power_law
from sr_dist.tools.types import ToolCall, ToolCallResult

NAMES = ["x0", "x1", "x2"]


def _sample(fn, n: int = 300, seed: int = 0) -> Sample:
    X = np.random.default_rng(seed).uniform(1.0, 4.0, size=(n, 3))
    return Sample(X, fn(X))


def test_power_law_recovers_monomial_exponents() -> None:
    law = power_law(_sample(lambda X: 3.0 * X[:, 0] ** 2 / np.sqrt(X[:, 1])), NAMES)
    assert law is not None
    assert law.rounded(0.5) == {"x0": 2.0, "x1": -0.5, "x2": 0.0}
    assert law.rmse < 1e-9
    assert {"x0": 2.0, "x1": -0.5} in law.outer_sets()


def test_power_law_flags_the_non_power_variable() -> None:
    law = power_law(_sample(lambda X: X[:, 0] * np.exp(-X[:, 2])), NAMES)
    assert law is not None
    assert max(law.gains, key=law.gains.__getitem__) == "x2"


def test_library_starts_with_the_exact_sparse_structure() -> None:
    sample = _sample(lambda X: X[:, 0] * (2.0 * X[:, 1] + 0.5 * X[:, 2] * np.sin(X[:, 1])))
    library = seed_library(NAMES, sample)
    first = parse_formula(render(tidy(library[0])), NAMES)
    assert first.canonical == parse_formula("x0*(c0*x1 + c1*x2*sin(x1) + c2)", NAMES).canonical


def test_library_is_deterministic_and_data_free_without_sample() -> None:
    sample = _sample(lambda X: X[:, 0] / X[:, 1])
    assert seed_library(NAMES, sample) == seed_library(NAMES, sample)
    free = [render(tidy(t)) for t in seed_library(NAMES, None)]
    assert "c0*x0" in free and "c0*(x0*x1)" in free or "c0*x0*x1" in free
    for text in free:
        parse_formula(text, NAMES)


SAMPLE_CASES = [
    ({}, None),
    ({"sample": "rows"}, None),
    ({"sample": {"X": [[1, 2, 3]] * 20}}, None),  # no y
    ({"sample": {"X": [[1, 2]] * 20, "y": [1.0] * 20}}, None),  # wrong width
    ({"sample": {"X": [[1, 2, 3]] * 5, "y": [1.0] * 5}}, None),  # too few rows
    ({"sample": {"X": [["a", 2, 3]] * 20, "y": [1.0] * 20}}, None),
    ({"sample": {"X": [[1, 2, 3]] * 20, "y": [1.0] * 20}}, (20, 3)),
    ({"sample": {"columns": {"x0": [1.0] * 20, "x1": [2.0] * 20, "x2": [3.0] * 20}, "y": [1.0] * 20}}, (20, 3)),
    ({"sample": {"X": [[1, 2, 3]] * 19 + [[1, float("nan"), 3]], "y": [1.0] * 20}}, (19, 3)),
]


@pytest.mark.parametrize("info,shape", SAMPLE_CASES)
def test_sample_from_info(info: dict, shape: tuple | None) -> None:
    sample = sample_from_info(info, NAMES)
    assert (None if sample is None else sample.X.shape) == shape


def _history_entry(expressions: list[str], nmses: list[float]) -> tuple[ToolCall, ToolCallResult]:
    records = [
        {"expression": e, "canonical": parse_formula(e, NAMES).canonical, "status": "ok",
         "val_nmse": v, "train_nmse": v, "complexity": parse_formula(e, NAMES).complexity}
        for e, v in zip(expressions, nmses)
    ]
    return ToolCall("evaluate_formulas", {"expressions": expressions}), ToolCallResult(True, {"results": records}, "")


def test_history_tracks_best_and_stagnation() -> None:
    entries = [
        _history_entry(["c0*x0", "c0*x1"], [0.5, 0.7]),
        _history_entry(["c0*x0*x1"], [0.1]),
        _history_entry(["c0*x0 + c1"], [0.2]),
        _history_entry(["c0*x2"], [0.9]),
    ]
    history = read_history(entries, NAMES)
    assert history.generations == 4
    assert history.best_by_generation == (0.5, 0.1, 0.1, 0.1)
    assert history.stagnant_for() == 2
    assert history.best is not None and history.best.expression == "c0*x0*x1"
    assert parse_formula("x0*c5", NAMES).canonical in history.seen


def _fitted(text: str, nmse: float) -> Individual:
    formula = parse_formula(text, NAMES)
    return Individual(text, formula.canonical, formula.tree, nmse, formula.complexity, 0)


def test_propose_leads_with_one_constant_reductions_of_the_simplest_solutions() -> None:
    from sr_dist.sr.evolve.search import REDUCED_SOLUTIONS, EvolveConfig, propose

    solutions = ["c0*x0 + c1*x1", "c0*x1*(c1*x2 + c2)", "c0*x2**2 + c1*x0 + c2"]
    # A fourth, longer solution and an unsolved candidate as simple as the simplest solution:
    # neither has its reductions put first.
    others = [_fitted("c0*sin(c1*x0) + c2*x1*x2 + c3", 1e-14), _fitted("c0*x0*x2 + c1", 1e-3)]
    individuals = (*others, *(_fitted(text, 1e-14) for text in reversed(solutions)))
    history = History(individuals, frozenset(i.canonical for i in individuals), generations=1,
                      best_by_generation=(1e-14,), calls=1, submitted=(), summary=None)
    assert REDUCED_SOLUTIONS == len(solutions)
    expected = ["x0 + c0*x1", "c0*x0 + x1",
                "x1*(c0*x2 + c1)", "c0*x1*(x2 + c1)", "c0*x1*x2",
                "x2**2 + c0*x0 + c1", "c0*x2**2 + x0 + c1", "c0*x2**2 + c1*x0"]

    proposal = propose(history, NAMES, [], EvolveConfig(batch_size=16), np.random.default_rng(0))
    assert proposal.submit is None  # still polishing
    assert list(proposal.expressions[: len(expected)]) == expected
    # The reductions take at most half of a batch.
    small = propose(history, NAMES, [], EvolveConfig(batch_size=4), np.random.default_rng(0))
    assert list(small.expressions[:2]) == expected[:2]
    assert not set(small.expressions[2:]) & set(expected[2:])



@pytest.mark.parametrize(("best_nmse", "submits"), [(1e-15, False), (1e-30, True)])
def test_an_approximant_below_the_solution_target_does_not_end_the_search(
        best_nmse: float, submits: bool) -> None:
    """A rational approximant of a smooth law fits to 1e-13..1e-17, an exact law refitted in
    float64 to about 1e-30: only the latter ends the search (``stop_nmse``), after polishing."""
    from sr_dist.sr.evolve.search import EvolveConfig, propose

    approximant = _fitted("(c0 + c1*x0 + c2*x0**2)/(1 + c3*x0 + c4*x0**2)", 1e-15)
    best = _fitted("c0*x0*x1", best_nmse)
    individuals = (approximant, best, _fitted("c0*x0 + c1", 1e-3))
    generations = 10
    history = History(individuals, frozenset(i.canonical for i in individuals),
                      generations=generations, best_by_generation=(best_nmse,) * generations,
                      calls=generations, submitted=(), summary=None)
    config = EvolveConfig(batch_size=8, polish_generations=2)
    assert config.stop_nmse < 1e-15 < config.target_nmse
    proposal = propose(history, NAMES, [], config, np.random.default_rng(0))
    if submits:
        assert proposal.submit is not None and proposal.submit.expression == "c0*x0*x1"
    else:
        assert proposal.submit is None and proposal.expressions

def test_pareto_front() -> None:
    def ind(c: int, nmse: float) -> Individual:
        return Individual(f"e{c}_{nmse}", f"k{c}_{nmse}", parse_formula("x0", NAMES).tree, nmse, c, 0)

    front = pareto_front([ind(3, 0.5), ind(5, 0.1), ind(5, 0.05), ind(7, 0.2), ind(9, 0.01), ind(1, 1.0)])
    assert [(i.complexity, i.nmse) for i in front] == [(1, 1.0), (3, 0.5), (5, 0.05), (9, 0.01)]


@pytest.mark.parametrize("seed", range(6))
def test_a_tournament_with_precomputed_keys_picks_the_same_winners(seed: int) -> None:
    """Over generated pools with tied scores and repeated draws: the winner, and the random
    numbers used, are the same with the batch's precomputed keys as without."""
    gen = np.random.default_rng(seed)
    tree = parse_formula("x0", NAMES).tree
    # Few distinct NMSE and complexity values, so scores tie and the canonical form decides.
    pool = [Individual(f"e{k}", f"k{gen.integers(1000)}_{k}", tree,
                       float(gen.choice([1e-3, 1e-2, 0.1])), int(gen.integers(1, 4)), 0)
            for k in range(int(gen.integers(1, 40)))]
    keys = [(score(i, 0.02), i.canonical) for i in pool]
    plain, keyed = np.random.default_rng(seed), np.random.default_rng(seed)
    for size in (1, 2, 4, 7) * 25:
        assert tournament(pool, keyed, size, 0.02, keys) is tournament(pool, plain, size, 0.02)
    assert plain.random() == keyed.random()
