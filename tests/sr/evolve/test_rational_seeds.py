"""Ratios of polynomials in one homogeneous solve (``sr_dist.sr.structure.rational``, as trees by ``sr_dist.sr.evolve.library.sources.rational``): the sparse
law comes back, with its constants fitted it is exact on fresh points, and what is no ratio, a
ratio with a pole on the rows, or a plain polynomial gives nothing."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy.optimize import least_squares  # type: ignore[import-untyped]

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.sources.rational import rational_seeds
from sr_dist.sr.evolve.tree import count_constants, render
from sr_dist.sr.evolve.tree import values as evaluate
from sr_dist.sr.structure.rational import monomials

Fn = Callable[[np.ndarray], np.ndarray]
NAMES = ("a", "b", "c")


def _X(rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 5.0, size=(rows, 3))


def _fresh_nmse(tree: Node, fn: Fn) -> float:
    """Constants fitted on one sample, scored on another: the float64 floor means the law."""
    X, fresh = _X(300, 0), _X(500, 7)
    y = fn(X)
    k = count_constants(tree)
    fit = least_squares(lambda c: evaluate(tree, NAMES, X, c) - y, np.ones(k), method="lm", max_nfev=4000)
    truth = fn(fresh)
    return float(np.mean((evaluate(tree, NAMES, fresh, fit.x) - truth) ** 2) / np.var(truth))


RATIOS: list[tuple[str, Fn, int]] = [
    # label, law, most terms P and Q may keep between them
    ("(a + b)/(1 + a*b)", lambda X: (X[:, 0] + X[:, 1]) / (1 + X[:, 0] * X[:, 1]), 4),
    ("(a + b)/(1 + a*b/c**2)", lambda X: (X[:, 0] + X[:, 1]) / (1 + X[:, 0] * X[:, 1] / X[:, 2] ** 2), 4),
    ("(a*b + 2.5*c)/(a + c)", lambda X: (X[:, 0] * X[:, 1] + 2.5 * X[:, 2]) / (X[:, 0] + X[:, 2]), 4),
    ("1.3*a/(b + 0.7) + c**2", lambda X: 1.3 * X[:, 0] / (X[:, 1] + 0.7) + X[:, 2] ** 2, 5),
]


@pytest.mark.parametrize(("label", "fn", "terms"), RATIOS, ids=[r[0] for r in RATIOS])
def test_the_sparse_ratio_is_found_and_fits_fresh_points_exactly(label: str, fn: Fn, terms: int) -> None:
    X = _X(300, 0)
    found = rational_seeds(X, fn(X), NAMES)
    assert len(found) == 1, label
    err, tree = found[0]
    assert err < 1e-9, (label, render(tree))
    # Sparse: the pruning kept only what the law needs (one constant per term, the leading
    # denominator term has none).
    assert count_constants(tree) <= terms, (label, render(tree))
    assert _fresh_nmse(tree, fn) < 1e-20, (label, render(tree))


NOT_RATIOS: list[tuple[str, Fn]] = [
    ("a*sin(b)", lambda X: X[:, 0] * np.sin(X[:, 1])),
    ("exp(-a)*c", lambda X: np.exp(-X[:, 0]) * X[:, 2]),
    # Exactly a ratio, but its denominator changes sign on the rows: a pole is no law.
    ("1/(a - 2.5)", lambda X: 1 / (X[:, 0] - 2.5)),
    # A polynomial: the sparse sums propose it; the ratio search does not.
    ("a*b + c**2", lambda X: X[:, 0] * X[:, 1] + X[:, 2] ** 2),
]


def test_a_polynomial_longer_than_the_sparse_sums_is_proposed() -> None:
    # a*b*(2.5 + b) + (a + b)**3 = a**3 + 3*a**2*b + 4*a*b**2 + b**3 + 2.5*a*b: five monomials,
    # beyond the sparse sums' four terms.
    X = _X(300, 0)

    def fn(X: np.ndarray) -> np.ndarray:
        return X[:, 0] * X[:, 1] * (2.5 + X[:, 1]) + (X[:, 0] + X[:, 1]) ** 3

    found = rational_seeds(X[:, :2], fn(X), NAMES[:2])
    assert len(found) == 1
    err, tree = found[0]
    assert err < 1e-7
    text = render(tree)
    assert "/" not in text, text
    assert count_constants(tree) == 5, text  # the five monomials; no constant term


@pytest.mark.parametrize(("label", "fn"), NOT_RATIOS, ids=[r[0] for r in NOT_RATIOS])
def test_no_ratio_is_proposed_where_there_is_none(label: str, fn: Fn) -> None:
    X = _X(300, 0)
    assert rational_seeds(X, fn(X), NAMES) == [], label


def test_bad_input_gives_nothing_rather_than_an_error() -> None:
    X = _X(300, 0)
    y = X[:, 0] / (1 + X[:, 1])
    assert rational_seeds(X[:8], y[:8], NAMES) == []  # too few rows
    assert rational_seeds(X, np.full(300, 2.0), NAMES) == []  # a constant target
    bad = y.copy()
    bad[3] = np.nan
    assert rational_seeds(X, bad, NAMES) == []
    wide = np.random.default_rng(1).uniform(1, 2, size=(300, 7))  # more than MAX_VARS
    assert rational_seeds(wide, wide[:, 0] / wide[:, 1], [f"x{i}" for i in range(7)]) == []


def test_six_variables_fit_the_low_degrees() -> None:
    # G*m1*m2/((x2-x1)**2 + (y2-y1)**2 + (z2-z1)**2) after its power-law part: 1/Q, Q quadratic.
    X = np.random.default_rng(2).uniform(1, 4, size=(300, 6))
    y = 1 / ((X[:, 1] - X[:, 0]) ** 2 + (X[:, 3] - X[:, 2]) ** 2 + (X[:, 5] - X[:, 4]) ** 2)
    names = [f"x{i}" for i in range(6)]
    found = rational_seeds(X, y, names)
    assert found and found[0][0] < 1e-7
    assert count_constants(found[0][1]) == 9  # c over nine quadratic monomials, the largest led


def test_deterministic() -> None:
    X = _X(300, 0)
    y = (X[:, 0] + X[:, 1]) / (1 + X[:, 0] * X[:, 1])
    first = [(e, render(t)) for e, t in rational_seeds(X, y, NAMES)]
    again = [(e, render(t)) for e, t in rational_seeds(X.copy(), y.copy(), NAMES)]
    assert first == again


def test_monomials_are_every_exponent_tuple_up_to_the_degree() -> None:
    assert monomials(2, 2) == [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (2, 0)]
    assert len(monomials(3, 3)) == 20


RELATIVISTIC_SQUARES: list[tuple[str, Fn, str]] = [
    # The squares of m*v/sqrt(1 - v**2/c**2) and m*c**2/sqrt(1 - v**2/c**2) after their power-law
    # part m: degrees (4, 2) and (6, 2), beyond DEGREES, in two variables (v, c).
    ("v**2*c**2/(c**2 - v**2)", lambda X: X[:, 0] ** 2 * X[:, 1] ** 2 / (X[:, 1] ** 2 - X[:, 0] ** 2), "v**2*c**2/"),
    ("c**6/(c**2 - v**2)", lambda X: X[:, 1] ** 6 / (X[:, 1] ** 2 - X[:, 0] ** 2), "c**6"),
]


@pytest.mark.parametrize(("label", "fn", "needle"), RELATIVISTIC_SQUARES, ids=[r[0] for r in RELATIVISTIC_SQUARES])
def test_two_variables_reach_the_high_degrees_of_a_relativistic_square(label: str, fn: Fn, needle: str) -> None:
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.uniform(1, 2, 300), rng.uniform(3, 10, 300)])  # v < c
    found = rational_seeds(X, fn(X), ["v", "c"])
    assert len(found) == 1, label
    err, tree = found[0]
    assert err < 1e-9, (label, render(tree))
    assert count_constants(tree) == 2, render(tree)  # c0*numerator/(c**2 + c1*v**2)
    assert needle in render(tree), render(tree)


@pytest.mark.parametrize("fn", [np.exp, np.log, np.sqrt, np.tanh], ids=["exp", "log", "sqrt", "tanh"])
def test_one_variable_gets_no_high_degree_approximant(fn: Callable[[np.ndarray], np.ndarray]) -> None:
    # A (6, 2) ratio has nine coefficients: enough to pass the exactness bar on a smooth curve
    # over a short range, so one variable stops at DEGREES (whose ratios these curves are not).
    x = np.random.default_rng(4).uniform(1.0, 2.0, size=(300, 1))
    assert rational_seeds(x, fn(x[:, 0]), ["a"]) == []


SMOOTH_SURFACES: list[tuple[str, Fn]] = [
    ("exp(a)*b", lambda X: np.exp(X[:, 0]) * X[:, 1]),
    ("sqrt(a + b)", lambda X: np.sqrt(X[:, 0] + X[:, 1])),
    ("sin(a) + b", lambda X: np.sin(X[:, 0]) + X[:, 1]),
    ("a**1.5*b", lambda X: X[:, 0] ** 1.5 * X[:, 1]),
    ("exp(-a/b)", lambda X: np.exp(-X[:, 0] / X[:, 1])),
]


@pytest.mark.parametrize(("label", "fn"), SMOOTH_SURFACES, ids=[r[0] for r in SMOOTH_SURFACES])
def test_two_variables_get_no_high_degree_approximant(label: str, fn: Fn) -> None:
    # On [1, 2]**2 each passes EXACT (3e-9 to 9e-8) at degrees (4, 2) or (6, 2); HIGH_EXACT
    # keeps them out.
    X = np.random.default_rng(5).uniform(1.0, 2.0, size=(300, 2))
    assert rational_seeds(X, fn(X), ["a", "b"]) == [], label


def test_a_cube_of_a_sum_is_proposed_as_its_four_monomials() -> None:
    # (a + 2*b)**3: four monomials, each a poor fit alone, so the greedy sparse sums miss it.
    X = _X(300, 0)
    found = rational_seeds(X[:, :2], (X[:, 0] + 2 * X[:, 1]) ** 3, NAMES[:2])
    assert len(found) == 1
    err, tree = found[0]
    assert err < 1e-9 and "/" not in render(tree), render(tree)
    assert count_constants(tree) == 4, render(tree)


def test_a_sum_of_two_ratios_with_different_denominators_is_degree_three_over_three() -> None:
    X = np.random.default_rng(8).uniform(0.5, 4.0, size=(300, 3))
    y = (X[:, 0] + X[:, 1]) / X[:, 2] ** 2 + (1.9 + X[:, 0]) / (X[:, 2] + 2.7)
    found = rational_seeds(X, y, list(NAMES))
    assert len(found) == 1
    err, tree = found[0]
    assert err < 1e-12, render(tree)
    assert _fresh_nmse(tree, lambda X: (X[:, 0] + X[:, 1]) / X[:, 2] ** 2 + (1.9 + X[:, 0]) / (X[:, 2] + 2.7)) < 1e-20
