"""Sparse sums past the beam: every pair of a small basis with its best third, and sums under
``log`` and ``exp`` in the whole problem's library."""

from __future__ import annotations

import numpy as np
import pytest

from sr_dist.formula import parse_formula
from sr_dist.sr.evolve.library import Sample
from sr_dist.sr.evolve.library.basis import build_basis
from sr_dist.sr.evolve.library.sources.transformed_sums import transformed_sum_seeds
from sr_dist.sr.evolve.library.sparse_sums import EXHAUSTIVE_TERMS, sparse_sums
from sr_dist.sr.evolve.tree import render, tidy
from sr_dist.sr.structure.partners import all_triples


def _near_exact_trees(sample: Sample, names: list[str], outers: list[dict[str, float]]) -> list:
    """The trees of the near-exact seeds; each names the sub-search that made it."""
    exact, _ = transformed_sum_seeds(sample, names, outers)
    assert all(seed.source.startswith("transformed_sums/") for seed in exact)
    return [seed.tree for seed in exact]


def _canonical(text: str, names: list[str]) -> str:
    return parse_formula(text, names).canonical


def test_a_collinear_triple_in_one_variable_is_found() -> None:
    # exp(x)/x, exp(x)/x**2 and x**2 alone each explain less than exp(x) or x**3: the beam
    # steps end at 6e-4; scoring every pair with its best third finds the law.
    x = np.random.default_rng(3).uniform(1, 5, size=(256, 1))
    y = (1.1 * x[:, 0] + 2.9) * np.exp(x[:, 0]) / x[:, 0] ** 2 - 2.263 * x[:, 0] ** 2
    basis = build_basis(Sample(x, y), ["x0"], [0], 4500, shape_products=True)
    assert basis is not None and basis.Z.shape[1] <= EXHAUSTIVE_TERMS
    err, terms = sparse_sums(basis, y, every_pair=True)[0]
    assert err < 1e-9
    assert sorted(render(t) for t in terms) == sorted(["x0**2", "1/x0*exp(x0)", "x0**(-2)*exp(x0)"])


def test_all_triples_finds_a_planted_triple_and_scores_it_exactly() -> None:
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(200, 30))
    Z[:, 7] = Z[:, 3] + 0.1 * rng.normal(size=200)  # a near-duplicate proxy
    Z = (Z - Z.mean(axis=0)) / Z.std(axis=0)
    t = 2.0 * Z[:, 3] - 1.5 * Z[:, 11] + 0.3 * Z[:, 25]
    found = all_triples(Z, t)
    best = min(found, key=found.__getitem__)
    assert best == (3, 11, 25) and found[best] < 1e-12
    assert all(len(support) == 3 for support in found)


def test_all_triples_is_empty_for_a_basis_too_small_for_three() -> None:
    Z = np.random.default_rng(1).normal(size=(50, 2))
    assert all_triples(Z, Z[:, 0]) == {}


@pytest.mark.parametrize(
    "label,fn,expected",
    [
        # log of a sum: its exp is the sum.
        ("log of a sum", lambda X: np.log(2.5 * X[:, 0] * X[:, 2] + X[:, 1] ** 3),
         "log(c0*x0*x2 + c1*x1**3 + c2)"),
        # exp of a sum beyond a power law.
        ("exp of a sum", lambda X: np.exp(0.7 * X[:, 0] * X[:, 1] + 0.4 * np.sin(X[:, 2])),
         "exp(c0*x0*x1 + c1*sin(x2) + c2)"),
    ],
)
def test_sums_under_log_and_exp_are_near_exact_candidates(label: str, fn, expected: str) -> None:  # type: ignore[no-untyped-def]
    names = ["x0", "x1", "x2"]
    X = np.random.default_rng(2).uniform(0.5, 2.0, size=(300, 3))
    exact = _near_exact_trees(Sample(X, fn(X)), names, [])
    assert _canonical(expected, names) in {_canonical(render(tidy(t)), names) for t in exact}, label


@pytest.mark.parametrize(
    "label,fn,expected",
    [
        # A half-integer power past sqrt, under a reciprocal.
        ("x0**1.5 in a ratio", lambda X: X[:, 1] / (X[:, 1] - X[:, 0] ** 1.5), "1/(c0*x0**1.5/x1 + c1)"),
        # A cosine of a sum (its argument stays in [0, pi]) times a power law.
        ("cosine of a sum", lambda X: X[:, 0] * np.cos(0.5 * X[:, 1] + 0.3 * X[:, 2] ** 2), "x0*cos(c0*x1 + c1*x2**2 + c2)"),
    ],
)
def test_half_powers_and_arccos_give_near_exact_candidates(label: str, fn, expected: str) -> None:  # type: ignore[no-untyped-def]
    names = ["x0", "x1", "x2"]
    X = np.random.default_rng(4).uniform(0.5, 2.0, size=(300, 3))
    X[:, 1] += 2.0  # keeps x1 - x0**1.5 away from 0
    law_free = _near_exact_trees(Sample(X, fn(X)), names, [{"x0": 1.0}])
    assert _canonical(expected, names) in {_canonical(render(tidy(t)), names) for t in law_free}, label


def test_core_terms_stay_first_terms_beside_the_half_powers() -> None:
    # I1 + I2 + 2*sqrt(I1*I2)*cos(delta): x1**-0.5*cos(x2) correlates better than the law's
    # product, which the tiers below the half powers still offer as a first term.
    X = np.random.default_rng(12).uniform(1, 5, size=(256, 3))
    y = X[:, 0] + X[:, 1] + 2 * np.sqrt(X[:, 0] * X[:, 1]) * np.cos(X[:, 2])
    basis = build_basis(Sample(X, y), ["x0", "x1", "x2"], [0, 1, 2], 4500, shape_products=True)
    assert basis is not None
    err, terms = sparse_sums(basis, y, every_pair=True)[0]
    assert err < 1e-9 and sorted(render(t) for t in terms) == ["sqrt(x0)*sqrt(x1)*cos(x2)", "x0", "x1"]


@pytest.mark.parametrize(
    "label,fn,expected",
    [
        ("a shape of a shape", lambda x: 0.7 + np.cos(np.sqrt(x)), "c0*cos(sqrt(x0)) + c1"),
        ("under an arcsin", lambda x: np.sin(np.cos(np.sqrt(x))), "sin(c0*cos(sqrt(x0)) + c1)"),
    ],
)
def test_one_variable_nests_shapes(label: str, fn, expected: str) -> None:  # type: ignore[no-untyped-def]
    x = np.random.default_rng(5).uniform(0.5, 9.0, size=(300, 1))
    exact = _near_exact_trees(Sample(x, fn(x[:, 0])), ["x0"], [])
    assert _canonical(expected, ["x0"]) in {_canonical(render(tidy(t)), ["x0"]) for t in exact}, label
