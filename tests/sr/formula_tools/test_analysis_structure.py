"""The analysis tools and the offline proposer give the same verdicts: both read the structure
core (``sr_dist.sr.structure``) for separability, symmetries, power laws and π groups."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

from sr_dist.data import load_dataset
from sr_dist.data.feynman import feynman_equations
from sr_dist.sr.analysis import (
    AnalysisRequestError,
    FitRequestError,
    buckingham_groups,
    fit_power_law,
    separability_test,
)
from sr_dist.sr.analysis.separability import MAX_VARS
from sr_dist.sr.evolve.library.sources.pi_groups import dimensional_basis, units_from_info
from sr_dist.sr.factory import problem_info
from sr_dist.sr.structure.pi_groups import unit_basis
from sr_dist.sr.structure.power_law import power_law
from sr_dist.sr.structure.product import product_test
from sr_dist.sr.structure.sample import Sample
from sr_dist.sr.structure.separability import additive_test, best_split, log_target, multiplicative_test
from sr_dist.sr.structure.symmetry import find_symmetries

NAMES3 = ("x0", "x1", "x2")


def uniform(n: int, d: int, low: float = 1.0, high: float = 3.0, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=(n, d))


LAWS = {
    "sum": lambda x0, x1, x2: x0 * x1 + np.sin(x2),
    "product": lambda x0, x1, x2: x0 * x1 * np.exp(x2),
    "neither": lambda x0, x1, x2: (x0 + x2) ** 2 * x1,
    "signed product": lambda x0, x1, x2: (x0 - 2) * np.cos(x1) * x2,
}


@pytest.mark.parametrize("law", list(LAWS))
def test_each_verdict_is_the_structure_cores(law: str) -> None:
    X = uniform(600, 3)
    y = LAWS[law](*X.T)
    result = separability_test(X, y, NAMES3)
    for test in result["tests"]:
        a = [NAMES3.index(n) for n in test["groups"][0]]
        b = [NAMES3.index(n) for n in test["groups"][1]]
        additive = additive_test(X, y, a, b)
        assert test["additive"]["separable"] == additive.accepted
        assert test["additive"]["score"] == pytest.approx(additive.restricted, rel=1e-9, abs=1e-12)
        if log_target(y) is not None:
            multiplicative = multiplicative_test(X, y, a, b)
            assert test["multiplicative"]["method"] == "log"
        else:
            multiplicative = product_test(X, y, a, b)[0]
            assert test["multiplicative"]["method"] == "product"
        assert test["multiplicative"]["separable"] == multiplicative.accepted
        assert test["multiplicative"]["unrestricted_error"] == pytest.approx(multiplicative.unrestricted, rel=1e-9,
                                                                             abs=1e-12)
    additive_split = best_split(X, y)
    found = result["best_split"]["additive"]
    assert (found is None) == (additive_split is None)
    if additive_split is not None:
        assert found["groups"] == [[NAMES3[k] for k in additive_split[0]], [NAMES3[k] for k in additive_split[1]]]
    symmetric = {(NAMES3[i], NAMES3[j], kind) for i, j, kind, _ in find_symmetries(X, y)}
    relations = {"x-y": "sub", "x+y": "add", "x*y": "mul", "x/y": "div"}
    assert {(*s["pair"], relations[s["relation"]]) for s in result["symmetries"] if s["symmetric"]} == symmetric


def test_planted_laws_get_the_right_verdicts() -> None:
    X = uniform(600, 3)
    x0, x1, x2 = X.T
    product = separability_test(X, x0 * x1 * np.exp(x2), NAMES3)
    assert product["best_split"]["additive"] is None
    assert product["best_split"]["multiplicative"]["verdict"] == "separable"
    neither = separability_test(X, (x0 + x2) ** 2 * x1, NAMES3, [["x0", "x1"], ["x2"]])
    assert [neither["tests"][0][k]["verdict"] for k in ("additive", "multiplicative")] == ["not separable"] * 2
    # (x0 + x2)**2 * x1 is a product over [x1] vs [x0, x2]: the split search finds it.
    assert separability_test(X, (x0 + x2) ** 2 * x1, NAMES3)["best_split"]["multiplicative"]["groups"] == [
        ["x1"], ["x0", "x2"]]


def test_variables_in_neither_group_enter_both_parts() -> None:
    X = uniform(600, 3)
    x0, x1, x2 = X.T
    conditional = separability_test(X, x0 * x2 + x1 / x2, NAMES3, [["x0"], ["x1"]])["tests"][0]
    assert conditional["additive"]["separable"] and not conditional["multiplicative"]["separable"]
    coupled = separability_test(X, x0 * x1 * x2 + x0, NAMES3, [["x0"], ["x1"]])["tests"][0]
    assert not coupled["additive"]["separable"] and coupled["multiplicative"]["separable"]


def test_a_variable_the_target_ignores_is_named() -> None:
    X = uniform(600, 3)
    result = separability_test(X, np.sin(X[:, 0]) + X[:, 1] ** 2, NAMES3)
    by_first = {t["groups"][0][0]: t for t in result["tests"]}
    assert by_first["x2"]["no_effect"] == [["x2"]] and by_first["x2"]["additive"]["separable"]
    assert by_first["x0"]["no_effect"] == []


def test_noise_above_the_bar_is_undetermined_not_a_no() -> None:
    X = uniform(600, 3)
    y = X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + np.random.default_rng(1).normal(0, 0.01, 600)
    result = separability_test(X, y, NAMES3)
    assert result["surrogate"]["holdout_error"] > 2e-3
    assert {t["additive"]["verdict"] for t in result["tests"]} == {"undetermined"}
    assert not any(t["additive"]["separable"] for t in result["tests"])


def test_bad_or_too_wide_data_is_an_error_or_undetermined_never_a_crash() -> None:
    X = uniform(300, 3)
    with pytest.raises(AnalysisRequestError, match="constant"):
        separability_test(X, np.full(300, 2.0), NAMES3)
    with pytest.raises(AnalysisRequestError, match="too large"):
        separability_test(X, 1e300 * X[:, 0] * X[:, 1], NAMES3)
    with pytest.raises(AnalysisRequestError, match="too few training rows"):
        separability_test(X[:40], X[:40, 0], NAMES3)
    width = MAX_VARS + 1
    W = uniform(900, width)
    names = tuple(f"v{k}" for k in range(width))
    wide = separability_test(W, W.sum(axis=1), names)
    assert len(wide["tests"]) == width and "note" in wide and wide["symmetries"] == []
    assert {t["additive"]["verdict"] for t in wide["tests"]} == {"undetermined"}
    holes = X.copy()
    holes[3, 1] = np.nan
    y = X[:, 0] + X[:, 1]
    y[5] = np.inf
    assert separability_test(holes, y, NAMES3)["rows"] == 298


def test_fit_power_law_is_the_cores_robust_fit() -> None:
    X = uniform(400, 2, 0.5, 4.0)
    y = 2.5 * X[:, 0] ** 1.5 * X[:, 1] ** -2
    y[::20] *= 3.0  # 5% of the rows off the law
    fit = fit_power_law(X, y, ("x0", "x1"))
    law = power_law(Sample(X, y), ["x0", "x1"])
    assert law is not None
    assert f"x0**{law.exponents['x0']:.8g}" in fit.formula and "Huber" in fit.note
    assert abs(law.exponents["x0"] - 1.5) < 1e-3  # plain least squares on logs misses by more
    plain, *_ = np.linalg.lstsq(np.column_stack([np.ones(400), np.log(X)]), np.log(y), rcond=None)
    assert abs(plain[1] - 1.5) > abs(law.exponents["x0"] - 1.5)
    constant = np.column_stack([X[:, 0], np.full(400, 2.0)])
    flat = fit_power_law(constant, 3 * X[:, 0] ** 2, ("x0", "x1"))
    assert flat.formula == "3*x0**2" and flat.train_nmse < 1e-20
    with pytest.raises(FitRequestError, match="at least 8 training rows"):
        fit_power_law(X[:5], y[:5], ("x0", "x1"))


def test_the_tool_and_the_proposer_read_the_same_pi_groups() -> None:
    for equation in feynman_equations():
        dataset = load_dataset(f"feynman:{equation.filename}", n=20, units="feynman")
        names = list(dataset.feature_names)
        tool = buckingham_groups(dataset.units, dataset.target_name)
        units = units_from_info(problem_info(dataset), names)
        assert units is not None
        basis = dimensional_basis(names, *units)
        if basis is None:
            assert tool["prefactor"] is None
            continue
        assert [g["exponents"] for g in tool["groups"]] == [{k: str(v) for k, v in g.items()} for g in basis.groups]
        assert tool["prefactor"]["exponents"] == {k: str(v) for k, v in basis.particular.items()}


def test_unit_basis_of_coulombs_law() -> None:
    # q1, q2 [kg m^2 s^-2 V^-1], epsilon [kg m s^-2 V^-2], r [m]; F [kg m s^-2].
    q = (F(1), F(2), F(-2), F(-1))
    basis = unit_basis([q, q, (F(1), F(1), F(-2), F(-2)), (F(0), F(1), F(0), F(0))], (F(1), F(1), F(-2), F(0)))
    assert basis.rank == 3 and basis.pivots == (0, 2, 3) and basis.free == (1,)
    assert basis.groups == ((F(-1), F(1), F(0), F(0)),)
    assert basis.particular == (F(2), F(0), F(-1), F(-2))
    assert unit_basis([(F(0), F(1))], (F(1), F(0))).particular is None
    with pytest.raises(ValueError, match="exponents"):
        unit_basis([(F(1),)], (F(1), F(0)))
