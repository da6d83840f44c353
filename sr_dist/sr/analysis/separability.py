"""AI Feynman's separability and symmetry tests, decided by the structure core.

Every verdict here is one of :mod:`sr_dist.sr.structure` (the tests the offline proposer's
decomposition runs on the same question), so an agent's ``separability_test`` and the proposer
agree. The data are scattered points, so each test compares two *linear* surrogates in a
Chebyshev basis (plus ``log x`` and ``1/x`` of positive variables), fitted on three quarters of
the rows and judged on the held-out quarter (:mod:`sr_dist.sr.structure.surrogate`): one
restricted to the structure under test, one free. A structure is accepted when the restricted
model's held-out relative RMS error is below ``TOLERANCE`` (2e-3) and the free model is not more
than ``RATIO`` (4) times better.

* Additive ``f(A) + g(B)``: :func:`~sr_dist.sr.structure.separability.additive_test`.
* Multiplicative ``f(A) * g(B)``: the additive test on ``log|f|`` where the target keeps one
  sign (``method: log``, :func:`~sr_dist.sr.structure.separability.multiplicative_test`),
  otherwise a rank-one product of the groups' surrogates (``method: product``,
  :func:`~sr_dist.sr.structure.product.product_test`).
* Variables in neither group enter both parts: the test is ``f(A, C) + g(B, C)`` (what the old
  mixed-difference test with ``C`` held at the base row asked).
* Without groups, :func:`~sr_dist.sr.structure.separability.best_split` (and ``best_product``)
  also search every bipartition with at most two variables on one side.
* Symmetries of a pair (``x-y``, ``x+y``, ``x*y``, ``x/y``):
  :func:`~sr_dist.sr.structure.symmetry.symmetry_test` on the target, then on ``log|target|``,
  as :func:`~sr_dist.sr.structure.symmetry.find_symmetries` does.

A test the surrogate cannot decide (it does not fit even the free model of all the variables
to ``TOLERANCE``, or the test could not be made) has the verdict ``undetermined``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sr_dist.sr.analysis._common import AnalysisRequestError
from sr_dist.sr.structure.product import best_product, product_test
from sr_dist.sr.structure.separability import additive_test, best_split, log_target, multiplicative_test
from sr_dist.sr.structure.surrogate import (
    TOLERANCE,
    StructureTest,
    features,
    held_out_error,
    structure_verdict,
    surrogate_degree,
)
from sr_dist.sr.structure.symmetry import SYMMETRIES, symmetry_test

__all__ = ["MAX_ROWS", "MAX_VARS", "NEAR_SCORE", "NO_EFFECT", "SEPARABLE_SCORE", "SPLIT_MAX_VARS",
           "SYMMETRY_MAX_VARS", "SYMMETRY_SCORE", "separability_test", "symmetry_tests"]

#: The bar on a test's ``score`` (the restricted model's held-out relative RMS error): the
#: structure core's ``TOLERANCE``. A score below it is separable (symmetric) unless the free
#: model is more than ``RATIO`` (4) times better; a pair symmetry is also accepted where the
#: free surrogate is coarse (below ``COARSE``, 0.1) and the pair model at most ``COARSE_RATIO``
#: (2) times worse (the core's ``coarse_verdict``).
SEPARABLE_SCORE = TOLERANCE
SYMMETRY_SCORE = TOLERANCE
#: A pair symmetry not accepted whose score is below this is reported as ``near`` (a hint).
NEAR_SCORE = 10 * TOLERANCE
#: A group whose removal leaves the free surrogate's error this good does not matter.
NO_EFFECT = 1e-6
#: Training rows the tests read at most (a seeded subset of a larger split).
MAX_ROWS = 2000
#: Most variables the tests run on: the surrogate's basis is built term by term over
#: ``(degree + 1) ** n`` exponent tuples, seconds per test beyond ten variables.
MAX_VARS = 10
#: Most variables of the bipartition search (``best_split``'s own limit) and of the pair
#: symmetries (``find_symmetries``' own: the surrogate is too coarse beyond it).
SPLIT_MAX_VARS = 6
SYMMETRY_MAX_VARS = 4
#: Fitted rows (three quarters of them) needed per term of the free surrogate.
ROWS_PER_TERM = 2
#: The analysis tools' names of the structure core's pair combinations.
RELATIONS = {"sub": "x-y", "add": "x+y", "mul": "x*y", "div": "x/y"}

UNDECIDED = StructureTest(math.inf, math.inf, False)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _safe(test: Callable[..., StructureTest], *args: Any, **kwargs: Any) -> StructureTest:
    """The core's ``test(*args, **kwargs)``, or an undecided one where its linear algebra fails."""
    try:
        return test(*args, **kwargs)
    except np.linalg.LinAlgError:
        return UNDECIDED


def _product(X: np.ndarray, y: np.ndarray, a: Sequence[int], b: Sequence[int]) -> StructureTest:
    return product_test(X, y, a, b)[0]


def _free_error(X: np.ndarray, z: np.ndarray, degree: int | None = None) -> float:
    """Held-out error of the free surrogate of all the variables (``inf`` where it fails)."""
    try:
        return held_out_error(features([X[:, k] for k in range(X.shape[1])], degree), z)
    except np.linalg.LinAlgError:
        return math.inf


def _verdict(test: StructureTest, free: float, **extra: Any) -> dict[str, Any]:
    """The result of one test: ``score`` is the restricted model's held-out error."""
    if test.accepted:
        verdict = "separable"
    elif math.isfinite(test.restricted) and free < TOLERANCE:
        verdict = "not separable"
    else:  # the surrogate does not fit the data to the bar: a no would be its coarseness
        verdict = "undetermined"
    return {"score": _finite(test.restricted), "separable": bool(test.accepted), "verdict": verdict,
            "restricted_error": _finite(test.restricted), "unrestricted_error": _finite(test.unrestricted),
            **extra}


def _surrogate_terms(X: np.ndarray) -> tuple[int, int]:
    """Degree and number of terms of the free surrogate (without building it)."""
    n = X.shape[1]
    degree = surrogate_degree(n)
    positive = int(np.sum(np.all(X > 0, axis=0)))
    return degree, math.comb(n + degree, degree) - 1 + 2 * positive


def _groups(groups: Sequence[Sequence[str]] | None, names: Sequence[str]) -> list[tuple[list[str], list[str]]]:
    if groups is None:
        if len(names) < 2:
            raise AnalysisRequestError("separability needs at least two variables; this dataset has one")
        return [([name], [other for other in names if other != name]) for name in names]
    if len(groups) != 2:
        raise AnalysisRequestError(f"groups must be two lists of variable names, e.g. "
                                   f"[[\"{names[0]}\"], [\"{names[-1]}\"]], got {len(groups)} list(s)")
    a, b = [list(dict.fromkeys(str(n) for n in g)) for g in groups]
    if not a or not b:
        raise AnalysisRequestError("each group needs at least one variable; omit groups to test "
                                   "each variable against the rest")
    unknown = [n for n in (*a, *b) if n not in names]
    if unknown:
        raise AnalysisRequestError(f"unknown variable(s) {', '.join(unknown)}; the variables are "
                                   f"{', '.join(names)}")
    overlap = [n for n in a if n in b]
    if overlap:
        raise AnalysisRequestError(f"{', '.join(overlap)} appear(s) in both groups; a variable "
                                   "belongs to one group only")
    return [(a, b)]


def _rows(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The finite rows (at most ``MAX_ROWS``, seeded), refused when too few or unusable."""
    keep = np.flatnonzero(np.all(np.isfinite(X), axis=1) & np.isfinite(y))
    if keep.size > MAX_ROWS:
        keep = np.sort(np.random.default_rng(seed).choice(keep, MAX_ROWS, replace=False))
    X, y = X[keep], y[keep]
    degree, terms = _surrogate_terms(X)
    needed = math.ceil(ROWS_PER_TERM * (terms + 1) * 4 / 3)
    if len(y) < needed:
        raise AnalysisRequestError(
            f"too few training rows ({len(y)}) for the surrogate: its degree-{degree} basis in "
            f"{X.shape[1]} variables has {terms} terms and needs about {needed} finite rows, so "
            "separability cannot be tested on this data; use variable_relationships or "
            "fit_polynomial instead")
    with np.errstate(over="ignore"):  # a spread that overflows is refused just below
        spread = float(np.std(y))
    if not math.isfinite(spread):
        raise AnalysisRequestError("the target's values are too large to test (their spread "
                                   "overflows); rescale the target and test again")
    if spread == 0.0:
        raise AnalysisRequestError("the target is constant on the training rows: there is nothing "
                                   "to separate")
    return X, y


def separability_test(X: np.ndarray, y: np.ndarray, names: Sequence[str],
                      groups: Sequence[Sequence[str]] | None = None, *, seed: int = 0) -> dict[str, Any]:
    """Additive and multiplicative separability between two variable groups (default: each
    variable against all the others, and the best bipartition), and the pair symmetries, as
    the structure core decides them (see the module docstring)."""
    X = np.asarray(X, dtype=float).reshape(len(y), -1)
    y = np.asarray(y, dtype=float)
    pairs = _groups(groups, names)
    X, y = _rows(X, y, seed)
    n = X.shape[1]
    index = {name: j for j, name in enumerate(names)}
    log_y = log_target(y)
    degree, terms = _surrogate_terms(X)
    wide = n > MAX_VARS
    free = math.inf if wide else _free_error(X, y)
    free_log = math.inf if wide or log_y is None else _free_error(X, log_y)
    method = "log" if log_y is not None else "product"
    tests = []
    for a_names, b_names in pairs:
        a, b = [index[m] for m in a_names], [index[m] for m in b_names]
        rest = [k for k in range(n) if k not in a and k not in b]
        ga, gb = a + rest, b + rest
        if wide:
            additive = multiplicative = UNDECIDED
            no_effect: list[list[str]] = []
        else:
            additive = _safe(additive_test, X, y, ga, gb)
            multiplicative = _safe(multiplicative_test if log_y is not None else _product, X, y, ga, gb)
            # A group the target does not depend on makes the split additive; only then ask.
            no_effect = [g for g, own in ((a_names, a), (b_names, b))
                         if additive.accepted and _no_effect(X, y, own, free)]
        tests.append({
            "groups": [a_names, b_names],
            "additive": _verdict(additive, free),
            "multiplicative": _verdict(multiplicative, free_log if log_y is not None else free, method=method),
            "no_effect": no_effect,
        })
    out: dict[str, Any] = {
        "rows": int(len(y)),
        "surrogate": {"kind": "chebyshev", "degree": degree, "terms": terms,
                      "holdout_error": None if wide else _finite(free),
                      "holdout_nmse": None if wide else _finite(free ** 2),
                      **({"log_holdout_error": None if wide else _finite(free_log),
                          "log_holdout_nmse": None if wide else _finite(free_log ** 2)} if log_y is not None else {})},
        "tests": tests,
        "best_split": _best_split(X, y, log_y, names, free, free_log) if groups is None else None,
        "symmetries": symmetry_tests(X, y, names),
    }
    if wide:
        out["note"] = (f"{n} variables: the structure tests run on at most {MAX_VARS} (the "
                       "surrogate's basis grows too fast beyond), so every verdict is undetermined; "
                       "find the variables that matter with variable_relationships or fit_power_law")
    return out


def _no_effect(X: np.ndarray, y: np.ndarray, group: Sequence[int], free: float) -> bool:
    """Whether the surrogate without ``group``'s variables fits as well as the free one."""
    others = [k for k in range(X.shape[1]) if k not in group]
    try:
        restricted = held_out_error(features([X[:, k] for k in others]), y)
    except np.linalg.LinAlgError:
        return False
    return structure_verdict(restricted, free, NO_EFFECT).accepted


def _best_split(X: np.ndarray, y: np.ndarray, log_y: np.ndarray | None, names: Sequence[str],
                free: float, free_log: float) -> dict[str, Any] | None:
    """The structure core's best accepted bipartitions, additive and multiplicative (None where
    it does not search: more than ``SPLIT_MAX_VARS`` variables)."""
    if not 2 <= X.shape[1] <= SPLIT_MAX_VARS:
        return None

    def named(a: Sequence[int], b: Sequence[int], test: StructureTest, **extra: Any) -> dict[str, Any]:
        return {"groups": [[names[k] for k in a], [names[k] for k in b]],
                **_verdict(test, free_log if extra.get("method") == "log" else free, **extra)}

    try:
        additive = best_split(X, y, SPLIT_MAX_VARS)
        if log_y is not None:
            split = best_split(X, log_y, SPLIT_MAX_VARS)
            multiplicative = None if split is None else named(*split, method="log")
        else:
            product = best_product(X, y, SPLIT_MAX_VARS)
            multiplicative = None if product is None else named(
                product[0], product[1], product_test(X, y, product[0], product[1])[0], method="product")
    except np.linalg.LinAlgError:
        return None
    return {"additive": None if additive is None else named(*additive), "multiplicative": multiplicative}


def symmetry_tests(X: np.ndarray, y: np.ndarray, names: Sequence[str]) -> list[dict[str, Any]]:
    """Every pair and combination of :data:`~sr_dist.sr.structure.symmetry.SYMMETRIES`, judged
    as :func:`~sr_dist.sr.structure.symmetry.find_symmetries` judges them (the target, then
    ``log|target|``); none above ``SYMMETRY_MAX_VARS`` variables, where it tests none."""
    n = X.shape[1]
    if not 2 <= n <= SYMMETRY_MAX_VARS:
        return []
    log_y = log_target(y)
    targets = [("target", y)] + ([("log|target|", log_y)] if log_y is not None else [])
    free = [_free_error(X, z, surrogate_degree(n - 1)) for _, z in targets]
    out = []
    for i, j in itertools.combinations(range(n), 2):
        for kind in SYMMETRIES:
            tried: list[tuple[str, StructureTest]] = []
            for (on, z), unrestricted in zip(targets, free, strict=True):
                test = _safe(symmetry_test, X, z, i, j, kind, unrestricted=unrestricted, log_done=True)
                tried.append((on, test))
                if test.accepted:
                    break
            on, test = tried[-1] if tried[-1][1].accepted else min(tried, key=lambda t: t[1].restricted)
            relation = RELATIONS[kind]
            out.append({"pair": [names[i], names[j]], "kind": f"{names[i]}{relation[1]}{names[j]}",
                        "relation": relation, "score": _finite(test.restricted),
                        "symmetric": bool(test.accepted),
                        "near": bool(not test.accepted and test.restricted < NEAR_SCORE),
                        "restricted_error": _finite(test.restricted),
                        "unrestricted_error": _finite(test.unrestricted), "on": on})
    return out

