"""The numeric core of the analysis tools on data with known structure (numpy only, no tools).

Each test builds a small noise-free (or lightly noisy) table whose answer is known by
construction and checks that the analysis finds it, and that a near miss is not found.
"""

from __future__ import annotations

import numpy as np
import pytest

from sr_dist.data import load_dataset
from sr_dist.formula import check_dimensions, evaluate_numpy, parse_formula
from sr_dist.sr.analysis import (
    FitRequestError,
    buckingham_groups,
    data_statistics,
    fit_polynomial,
    fit_power_law,
    fit_rational,
    residual_analysis,
    separability_test,
    variable_relationships,
)
from sr_dist.sr.analysis.separability import SEPARABLE_SCORE

NAMES3 = ("x0", "x1", "x2")


def uniform(n: int, d: int, low: float = 1.0, high: float = 3.0, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=(n, d))


def scores(result: dict, groups: list[list[str]]) -> tuple[float, float]:
    (test,) = [t for t in result["tests"] if t["groups"] == groups]
    return test["additive"]["score"], test["multiplicative"]["score"]


def reparsed(formula: str, X: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """The returned formula, as sr-dist's parser reads it, on ``X``."""
    return evaluate_numpy(parse_formula(formula, names), X, names)


# --------------------------------------------------------------------------- separability


def test_separability_finds_an_additive_split_and_refuses_the_wrong_one() -> None:
    X = uniform(1200, 3)
    x0, x1, x2 = X.T
    result = separability_test(X, x0 * x1 + np.sin(x2), NAMES3, [["x0", "x1"], ["x2"]])
    additive, multiplicative = scores(result, [["x0", "x1"], ["x2"]])
    assert additive < SEPARABLE_SCORE / 10 and multiplicative > 3 * SEPARABLE_SCORE
    assert result["tests"][0]["additive"]["separable"] and not result["tests"][0]["multiplicative"]["separable"]
    # Default groups: each variable against the rest; only x2 splits off (x0*x1 couples the others).
    default = separability_test(X, x0 * x1 + np.sin(x2), NAMES3)
    verdicts = {t["groups"][0][0]: t["additive"]["separable"] for t in default["tests"]}
    assert verdicts == {"x0": False, "x1": False, "x2": True}


def test_separability_finds_a_product_on_every_split() -> None:
    X = uniform(1200, 3)
    x0, x1, x2 = X.T
    result = separability_test(X, x0 * x1 * np.exp(x2), NAMES3)
    for test in result["tests"]:
        assert test["multiplicative"]["separable"] and test["multiplicative"]["method"] == "log"
        assert not test["additive"]["separable"] and test["additive"]["score"] > 0.1


def test_a_non_separable_target_is_neither() -> None:
    X = uniform(1200, 3)
    x0, x1, x2 = X.T
    result = separability_test(X, (x0 + x2) ** 2 * x1, NAMES3, [["x0", "x1"], ["x2"]])
    additive, multiplicative = scores(result, [["x0", "x1"], ["x2"]])
    assert additive > 3 * SEPARABLE_SCORE and multiplicative > 2 * SEPARABLE_SCORE
    assert result["surrogate"]["holdout_nmse"] < 1e-9  # the verdict is not the surrogate's fault


def test_a_sign_changing_target_uses_the_product_criterion() -> None:
    X = uniform(800, 2, -2.0, 2.0)
    result = separability_test(X, X[:, 0] * np.cos(X[:, 1]), ("x0", "x1"), [["x0"], ["x1"]])
    test = result["tests"][0]
    assert test["multiplicative"]["method"] == "product" and test["multiplicative"]["separable"]
    assert not test["additive"]["separable"]


def test_symmetry_tests_find_the_difference_and_the_ratio() -> None:
    X = uniform(1200, 3)
    x0, x1, x2 = X.T
    found = {s["relation"]: s for s in separability_test(X, np.sin(x0 - x1) * x2, NAMES3)["symmetries"]
             if s["pair"] == ["x0", "x1"]}
    assert found["x-y"]["symmetric"] and found["x-y"]["kind"] == "x0-x1"
    assert not any(found[k]["symmetric"] for k in ("x+y", "x*y", "x/y"))
    ratio = {s["relation"]: s for s in separability_test(X, x0 / x1 + x2, NAMES3)["symmetries"]
             if s["pair"] == ["x0", "x1"]}
    assert ratio["x/y"]["symmetric"] and not ratio["x-y"]["symmetric"]


@pytest.mark.parametrize(("groups", "words"), [
    ([["x0"], []], "at least one variable"),
    ([["x0"], ["x0", "x1"]], "both groups"),
    ([["x0"], ["zz"]], "unknown variable(s) zz"),
    ([["x0"]], "two lists"),
])
def test_bad_groups_say_how_to_fix_them(groups: list[list[str]], words: str) -> None:
    from sr_dist.sr.analysis import AnalysisRequestError

    X = uniform(100, 3)
    with pytest.raises(AnalysisRequestError, match=words.replace("(", r"\(").replace(")", r"\)")):
        separability_test(X, X.sum(axis=1), NAMES3, groups)


# --------------------------------------------------------------------------- closed-form fits


def test_fit_power_law_recovers_the_law() -> None:
    X = uniform(400, 2, 0.5, 4.0)
    y = 2.5 * X[:, 0] ** 1.5 * X[:, 1] ** -2
    fit = fit_power_law(X, y, ("x0", "x1"))
    assert fit.formula == "2.5*x0**1.5*x1**(-2)" and fit.train_nmse < 1e-20
    assert fit.template == "c0*x0**b0*x1**b1"
    negative = fit_power_law(X, -y, ("x0", "x1"))
    assert negative.formula.startswith("(-2.5)*") and negative.train_nmse < 1e-20


def test_fit_power_law_refuses_data_it_cannot_take_logs_of() -> None:
    X = uniform(100, 2, -1.0, 1.0)
    with pytest.raises(FitRequestError, match="strictly positive variables; x0, x1"):
        fit_power_law(X, np.ones(100) + X[:, 0] ** 2, ("x0", "x1"))
    with pytest.raises(FitRequestError, match="one sign"):
        fit_power_law(np.abs(X) + 0.1, X[:, 0], ("x0", "x1"))


def test_fit_polynomial_recovers_a_polynomial_with_only_its_terms() -> None:
    X = uniform(300, 2, -2.0, 2.0)
    y = 1.5 * X[:, 0] ** 2 - 2 * X[:, 0] * X[:, 1] + 3
    fit = fit_polynomial(X, y, ("x0", "x1"), 3)
    assert fit.formula == "3 + 1.5*x0**2 - 2*x0*x1" and fit.terms == 3 and fit.train_nmse < 1e-20
    assert np.allclose(reparsed(fit.formula, X, ("x0", "x1")), y)
    with pytest.raises(FitRequestError, match="degree must be an integer from 1 to 6"):
        fit_polynomial(X, y, ("x0", "x1"), 9)


def test_fit_rational_recovers_a_rational_function() -> None:
    X = uniform(300, 2)
    y = 3 * X[:, 0] ** 2 / (2 + X[:, 0] * X[:, 1])
    fit = fit_rational(X, y, ("x0", "x1"), 2, 2)
    assert fit.formula == "(1.5*x0**2)/(1 + 0.5*x0*x1)" and fit.train_nmse < 1e-20
    assert fit.note == ""
    assert np.allclose(reparsed(fit.formula, X, ("x0", "x1")), y)
    parse_formula(fit.template, ("x0", "x1"))
    noisy = y + np.random.default_rng(1).normal(0, 0.01 * y.std(), y.size)
    rough = fit_rational(X, noisy, ("x0", "x1"), 2, 2)
    assert rough.train_nmse < 3e-4, rough  # the noise's share is 1e-4


# --------------------------------------------------------------------------- statistics, relationships


def test_data_statistics_flags_an_integer_column_an_outlier_and_a_log_uniform_one() -> None:
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 1, 500), rng.integers(1, 6, 500), np.exp(rng.uniform(0, 6, 500))])
    X[17, 0] = 40.0
    stats = data_statistics(X, X[:, 1] * 2.0, NAMES3, "y")
    x0, x1, x2 = (stats["variables"][n] for n in NAMES3)
    assert x0["outliers"] == 1 and x0["outlier_rows"] == [{"row": 17, "value": 40.0}]
    assert not x0["integer"] and x1["integer"] and x1["distinct"] == 5 and x1["outliers"] == 0
    assert x2["log_uniform"] and not x0["log_uniform"] and x2["outliers"] == 0
    assert x2["sign"] == "positive" and stats["target_stats"]["integer"]


def test_variable_relationships_pick_the_right_shape() -> None:
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.uniform(0.5, 5, 800), rng.uniform(0.5, 3, 800), rng.uniform(-3, 3, 800)])
    cases = {"log": (0, 2 * np.log(X[:, 0]) + 1), "power": (1, 3 * X[:, 1] ** -1.5),
             "periodic": (2, np.sin(2 * X[:, 2] + 0.3)), "exp": (1, 1.5 * np.exp(0.8 * X[:, 1])),
             "linear": (0, 2 * X[:, 0] - 1)}
    for shape, (column, y) in cases.items():
        name = NAMES3[column]
        found = variable_relationships(X, y, NAMES3)["variables"][name]
        assert found["best"]["shape"] == shape, (shape, found["best"])
        assert found["best"]["train_nmse"] < 1e-3
        assert np.allclose(reparsed(found["best"]["formula"], X, NAMES3), y, atol=0.05 * y.std())
    power = variable_relationships(X, 3 * X[:, 1] ** -1.5, NAMES3)["variables"]
    assert power["x1"]["monotonicity"] == "decreasing" and power["x1"]["spearman"] == pytest.approx(-1.0)
    assert power["x1"]["mutual_information"] > 5 * power["x0"]["mutual_information"]


# --------------------------------------------------------------------------- residuals


def test_residual_analysis_names_the_missing_variable_and_the_worst_rows() -> None:
    X = uniform(600, 3)
    x0, x1, x2 = X.T
    y = 2.5 * x0 * x1 + 0.8 * x2 ** 2
    prediction = 2.5 * x0 * x1 + np.mean(0.8 * x2 ** 2)
    result = residual_analysis(X, y, prediction, NAMES3)
    assert result["still_depends_on"] == ["x2"]
    assert result["variables"]["x2"]["explained"] > 0.99 and result["variables"]["x2"]["shape"] == "power"
    assert result["variables"]["x0"]["explained"] < 0.01
    worst = result["worst_rows"][0]
    assert abs(worst["residual"]) == pytest.approx(np.max(np.abs(y - prediction)))


def test_residual_analysis_sees_an_error_that_grows_with_the_prediction() -> None:
    X = uniform(600, 2)
    y = X[:, 0] * X[:, 1] * (1 + 0.05 * np.random.default_rng(3).normal(size=600))
    result = residual_analysis(X, y, X[:, 0] * X[:, 1], ("x0", "x1"))
    assert result["heteroscedasticity"]["prediction"]["flagged"]
    assert result["still_depends_on"] == []
    exact = residual_analysis(X, X[:, 0], X[:, 0], ("x0", "x1"))
    assert exact["exact"] and exact["variables"] == {}


# --------------------------------------------------------------------------- dimensional groups


def test_dimensional_groups_of_coulombs_law_match_the_hand_derivation() -> None:
    # I.12.2, F = q1*q2/(4*pi*epsilon*r**2): q [kg m^2 s^-2 V^-1], epsilon [kg m s^-2 V^-2],
    # r [m], F [kg m s^-2]. Four variables, rank 3: one group, the charge ratio q2/q1; a
    # prefactor from q1, epsilon, r: q1^a epsilon^b r^c = N gives a=2, b=-1, c=-2.
    dataset = load_dataset("feynman:I.12.2", n=50, units="feynman")
    result = buckingham_groups(dataset.units, "F")
    assert result["rank"] == 3
    assert [g["formula"] for g in result["groups"]] == ["q2/q1"]
    assert result["prefactor"]["formula"] == "q1**2/(epsilon*r**2)"
    assert result["prefactor"]["exponents"] == {"q1": "2", "epsilon": "-1", "r": "-2"}
    assert result["form"] == "F = q1**2/(epsilon*r**2) * phi(q2/q1)"
    suggestion = parse_formula(result["suggestion"], dataset.feature_names)
    check = check_dimensions(suggestion, dataset.units)
    assert check.consistent, check.reason


def test_dimensional_groups_of_relativistic_mass_and_without_units() -> None:
    # I.10.7, m = m_0/sqrt(1 - v**2/c**2): the one group is the speed ratio (c/v, given the
    # column order), the prefactor m_0; c is a variable, so the suggestion's constants avoid it.
    dataset = load_dataset("feynman:I.10.7", n=50, units="feynman")
    result = buckingham_groups(dataset.units, "m")
    assert [g["formula"] for g in result["groups"]] == ["c/v"]
    assert result["prefactor"]["formula"] == "m_0" and result["suggestion"] == "c0*m_0*(c/v)**b0"
    none = buckingham_groups(None, "m")
    assert none["has_units"] is False and "dataset.units" in none["reason"]
