"""evolve with units: Buckingham π groups, the prefactor, consistent seeds, consistent answers."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

from sr_dist.data import feynman_equation, load_dataset
from sr_dist.formula import check_dimensions, parse_formula
from sr_dist.sr.evolve.library import sample_from_info
from sr_dist.sr.evolve.library.sources.pi_groups import dimensional_basis, pi_library, units_from_info
from sr_dist.sr.evolve.model import EvolveModel
from sr_dist.sr.evolve.population import INCONSISTENT_PENALTY, read_history, score
from sr_dist.sr.evolve.tree import render, tidy
from sr_dist.sr.factory import problem_info
from sr_dist.tools.types import ToolCall, ToolCallResult

F = Fraction


def _units(**named: tuple[int, ...]) -> dict[str, tuple[Fraction, ...]]:
    return {k: tuple(F(v) for v in u) for k, u in named.items()}


def test_groups_span_the_nullspace_and_the_prefactor_fixes_the_units() -> None:
    # m0: kg, v and c: m/s; target kg (exponents over m, s, kg)
    units = _units(m0=(0, 0, 1), v=(1, -1, 0), c=(1, -1, 0))
    basis = dimensional_basis(["m0", "v", "c"], units, (F(0), F(0), F(1)))
    assert basis is not None
    assert basis.particular == {"m0": 1}
    assert [dict(g) for g in basis.groups] == [{"c": 1, "v": -1}]
    # Five variables of rank 3: two groups, each dimensionless; the prefactor has m/s.
    units = _units(m1=(0, 0, 1), m2=(0, 0, 1), r1=(1, 0, 0), r2=(1, 0, 0), t=(0, 1, 0))
    basis = dimensional_basis(list(units), units, (F(1), F(-1), F(0)))
    assert basis is not None and len(basis.groups) == 2
    assert basis.particular == {"r1": 1, "t": -1}
    for group in basis.groups:
        total = [sum(power * units[name][d] for name, power in group.items()) for d in range(3)]
        assert total == [0, 0, 0] and all(p.denominator == 1 for p in group.values())
    # A dimensionless target needs no prefactor; no product of lengths and times is a mass.
    assert dimensional_basis(["m1"], units, (F(0), F(0), F(0))) is not None
    assert dimensional_basis(["r1", "t"], units, (F(0), F(0), F(1))) is None


@pytest.mark.parametrize("name", ["I.10.7", "I.18.4", "I.12.11", "I.34.1", "II.11.3"])
def test_every_pi_seed_is_consistent(name: str) -> None:
    ds = load_dataset(f"feynman:{name}", n=600, units="feynman")
    info = problem_info(ds)
    variables = tuple(ds.feature_names)
    units = units_from_info(info, variables)
    assert units is not None
    first, rest = pi_library(variables, units[0], units[1], sample_from_info(info, variables))
    assert first and rest
    for tree in first + rest:
        formula = parse_formula(render(tidy(tree)), variables)
        assert check_dimensions(formula, ds.units).consistent, formula.text


def test_a_weighted_mean_is_an_exact_seed_over_the_groups() -> None:
    """(m1*r1 + m2*r2)/(m1 + m2) is a ratio of sums of the groups m2/m1 and r2/r1: the π
    seeds hold a structure that fits it exactly (the evaluator then fits its constants)."""
    ds = load_dataset("feynman:I.18.4", n=600, units="feynman")
    info = problem_info(ds)
    variables = tuple(ds.feature_names)
    units = units_from_info(info, variables)
    assert units is not None
    first, _ = pi_library(variables, units[0], units[1], sample_from_info(info, variables))
    texts = [render(tidy(t)) for t in first]
    assert any("/(1 + " in t and "m2/m1" in t for t in texts), texts


def test_the_model_puts_the_pi_seeds_first_only_with_units() -> None:
    ds = load_dataset("feynman:I.10.7", n=600, units="feynman")
    info = problem_info(ds)
    variables = tuple(ds.feature_names)
    sample = sample_from_info(info, variables)
    model = EvolveModel()
    with_units = [seed.tree for seed in model._library(variables, sample, units_from_info(info, variables))]
    without = [seed.tree for seed in model._library(variables, sample)]
    assert with_units != without
    units = units_from_info(info, variables)
    assert units is not None
    first, _ = pi_library(variables, units[0], units[1], sample)
    # The π library's near-exact seeds and bare prefactor lead (here a ratio over the group
    # c/v, then c0*m_0); the library without units has neither at its head.
    head = [render(tidy(t)) for t in with_units[: len(first)]]
    assert head == [render(tidy(t)) for t in first]
    assert "c0*m_0" in head
    assert render(tidy(without[0])) not in head
    assert units_from_info(problem_info(ds.with_units(None)), variables) is None


def _record(expression: str, nmse: float, consistent: bool | None) -> dict[str, object]:
    out: dict[str, object] = {"expression": expression, "canonical": expression, "status": "ok",
                              "val_nmse": nmse, "train_nmse": nmse, "complexity": 3}
    if consistent is not None:
        out["dimensionally_consistent"] = consistent
    return out


def test_history_prefers_consistent_candidates() -> None:
    names = ("x", "t")
    records = [_record("x + t", 1e-13, False), _record("c*x/t", 1e-11, True)]
    history = read_history([(ToolCall("evaluate_formulas", {"expressions": ["x + t", "c*x/t"]}),
                             ToolCallResult(True, {"results": records}, ""))], names)
    best = history.best
    assert best is not None and best.expression == "c*x/t"
    assert history.has_units
    assert [i.expression for i in history.solutions(1e-10)] == ["c*x/t"]
    assert history.solutions(1e-12) == []  # the inconsistent exact fit is no solution
    bad = next(i for i in history.individuals if i.expression == "x + t")
    good = next(i for i in history.individuals if i.expression == "c*x/t")
    assert score(bad, 0.0) - np.log10(1e-13) == pytest.approx(INCONSISTENT_PENALTY)
    assert score(good, 0.0) < score(bad, 0.0)  # within the penalty's 3 decades
    plain = read_history([(ToolCall("evaluate_formulas", {"expressions": ["x + t"]}),
                           ToolCallResult(True, {"results": [_record("x + t", 1e-13, None)]}, ""))],
                         names)
    assert not plain.has_units and [i.expression for i in plain.solutions(1e-11)] == ["x + t"]


def test_no_rule_keys_on_the_equation() -> None:
    """The seeds depend on the units and the data only: renaming every variable renames them."""
    eq = feynman_equation("I.10.7")
    ds = load_dataset("feynman:I.10.7", n=600, units="feynman")
    info = problem_info(ds)
    variables = tuple(ds.feature_names)
    units = units_from_info(info, variables)
    assert units is not None
    renamed = tuple(f"q{i}" for i in range(len(variables)))
    mapping = dict(zip(variables, renamed, strict=True))
    units_renamed = {mapping[k]: v for k, v in units[0].items()}
    sample = sample_from_info(info, variables)
    a, _ = pi_library(variables, units[0], units[1], sample)
    b, _ = pi_library(renamed, units_renamed, units[1], sample)
    back = {new: old for old, new in mapping.items()}
    texts_b = [re.sub(r"\bq\d+\b", lambda m: back[m.group(0)], render(tidy(t))) for t in b]
    canon_a = [parse_formula(render(tidy(t)), variables).canonical for t in a]
    canon_b = [parse_formula(t, variables).canonical for t in texts_b]
    assert canon_a == canon_b
    assert eq.filename not in "".join(texts_b)
