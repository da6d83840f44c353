"""Symmetries of a pair and affinity in one variable, judged by the held-out surrogate.

A pair ``(x, y)`` may enter only as ``x - y``, ``x + y``, ``x * y`` or ``x / y`` (AI Feynman's
translational and scaling symmetries); ``t`` may be affine in one variable,
``t = A(others) + x_j * B(others)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from sr_dist.sr.structure.separability import log_target
from sr_dist.sr.structure.surrogate import (
    TOLERANCE,
    StructureTest,
    coarse_verdict,
    features,
    held_out_error,
    surrogate_degree,
)

__all__ = ["SYMMETRIES", "affine_components", "affine_test", "best_affine", "find_symmetries", "symmetry_test"]


#: Pair combinations the symmetry test tries, and how each is computed.
SYMMETRIES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "sub": lambda a, b: a - b,
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


def symmetry_test(X: np.ndarray, t: np.ndarray, i: int, j: int, kind: str,
                  tolerance: float = TOLERANCE, unrestricted: float | None = None,
                  log_done: bool = False) -> StructureTest:
    """Does the pair ``(x_i, x_j)`` enter ``t`` only through ``u = kind(x_i, x_j)``? The restricted
    model sees ``(u, others)``, the unrestricted one all the variables at the same degree
    (``unrestricted``: its error, when the caller has it already)."""
    if not np.all(np.isfinite(t)) or np.std(t) == 0:
        return StructureTest(np.inf, np.inf, False)
    with np.errstate(all="ignore"):
        u = SYMMETRIES[kind](X[:, i], X[:, j])
    if not np.all(np.isfinite(u)) or np.std(u) == 0:
        return StructureTest(np.inf, np.inf, False)
    others = [X[:, k] for k in range(X.shape[1]) if k not in (i, j)]
    d = surrogate_degree(len(others) + 1)
    restricted = held_out_error(features([u, *others], d), t)
    if unrestricted is None:
        unrestricted = held_out_error(features([X[:, k] for k in range(X.shape[1])], d), t)
    verdict = coarse_verdict(restricted, unrestricted, tolerance)
    log_t = None if verdict.accepted or log_done else log_target(t)
    if log_t is not None:
        # The same question of log|t| (a pair enters t only through u iff it enters log|t| so),
        # which a polynomial surrogate often fits far better (a bump, a power law).
        return symmetry_test(X, log_t, i, j, kind, tolerance, log_done=True)
    return verdict


def find_symmetries(X: np.ndarray, t: np.ndarray, max_vars: int = 4) -> list[tuple[int, int, str, StructureTest]]:
    """Accepted pair symmetries, best (lowest restricted error) first; none above ``max_vars``
    variables (the surrogate is too coarse there for the test to mean anything)."""
    if X.shape[1] < 2 or X.shape[1] > max_vars or not np.all(np.isfinite(t)) or np.std(t) == 0:
        return []
    d = surrogate_degree(X.shape[1] - 1)
    log_t = log_target(t)
    targets = [t] if log_t is None else [t, log_t]
    free = [held_out_error(features([X[:, k] for k in range(X.shape[1])], d), z) for z in targets]
    found = []
    for i, j in itertools.combinations(range(X.shape[1]), 2):
        for kind in SYMMETRIES:
            for z, unrestricted in zip(targets, free, strict=True):
                test = symmetry_test(X, z, i, j, kind, unrestricted=unrestricted, log_done=True)
                if test.accepted:
                    found.append((i, j, kind, test))
                    break
    return sorted(found, key=lambda f: f[3].restricted)


def affine_test(X: np.ndarray, t: np.ndarray, j: int, tolerance: float = TOLERANCE,
                unrestricted: float | None = None) -> StructureTest:
    """Is ``t = A(others) + x_j * B(others)`` (affine in ``x_j``)? The restricted model holds the
    features of the other variables, and ``x_j`` times them; the unrestricted one all the
    variables at the same degree."""
    if not np.all(np.isfinite(t)) or np.std(t) == 0 or X.shape[1] < 2:
        return StructureTest(np.inf, np.inf, False)
    others = [X[:, k] for k in range(X.shape[1]) if k != j]
    d = surrogate_degree(len(others))
    fo = features(others, d)
    xj = X[:, j][:, None]
    restricted = held_out_error(np.column_stack([fo, xj, xj * fo]), t)
    if unrestricted is None:
        unrestricted = held_out_error(features([X[:, k] for k in range(X.shape[1])], d + 1), t)
    return coarse_verdict(restricted, unrestricted, tolerance)


def best_affine(X: np.ndarray, t: np.ndarray, max_vars: int = 4) -> tuple[int, StructureTest] | None:
    """The variable ``t`` is affine in with the lowest restricted error, among those whose
    slope ``B`` is not a constant (that is an additive split, tested on its own) and matters;
    None when there is none."""
    n = X.shape[1]
    if n < 2 or n > max_vars or not np.all(np.isfinite(t)) or np.std(t) == 0:
        return None
    free = held_out_error(features([X[:, k] for k in range(n)], surrogate_degree(n - 1) + 1), t)
    best = None
    for j in range(n):
        test = affine_test(X, t, j, unrestricted=free)
        if not test.accepted or (best is not None and test.restricted >= best[1].restricted):
            continue
        _, slope = affine_components(X, t, j)
        spread = float(np.std(X[:, j] * slope))
        if spread > 1e-3 * float(np.std(t)) and float(np.std(slope)) > 1e-3 * float(np.mean(np.abs(slope))):
            best = (j, test)
    return best


def affine_components(X: np.ndarray, t: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray]:
    """``A`` and ``B`` of ``t = A + x_j * B`` from the restricted fit on all rows."""
    others = [X[:, k] for k in range(X.shape[1]) if k != j]
    fo = features(others, surrogate_degree(len(others)))
    xj = X[:, j][:, None]
    A = np.column_stack([np.ones(len(t)), fo, xj, xj * fo])
    coef, *_ = np.linalg.lstsq(A, t, rcond=None)
    k = fo.shape[1]
    return coef[0] + fo @ coef[1 : 1 + k], coef[1 + k] + fo @ coef[2 + k :]
