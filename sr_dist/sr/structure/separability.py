"""Additive and multiplicative separability: does ``t`` split over two groups of variables?

``t = g(A) + h(B)`` when the surrogate without terms that mix the groups fits the held-out rows
(:mod:`sr_dist.sr.structure.surrogate`); ``t = g(A) * h(B)`` by the same test on ``log|t|``
where ``t`` keeps one sign (AI Feynman's separability tests, Udrescu & Tegmark 2020).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from sr_dist.sr.structure.surrogate import (
    TOLERANCE,
    StructureTest,
    features,
    held_out_error,
    mixed_features,
    structure_verdict,
)

__all__ = ["additive_components", "additive_test", "best_split", "bipartitions", "log_target", "multiplicative_test"]


def log_target(t: np.ndarray) -> np.ndarray | None:
    if np.all(t > 0) or np.all(t < 0):
        out: np.ndarray = np.log(np.abs(t))
        return out
    return None


def additive_test(X: np.ndarray, t: np.ndarray, group_a: Sequence[int], group_b: Sequence[int],
                  tolerance: float = TOLERANCE) -> StructureTest:
    """Is ``t = g(X[:, A]) + h(X[:, B])`` on the sample? (See the module docstring.)"""
    if not np.all(np.isfinite(t)) or np.std(t) == 0:
        return StructureTest(np.inf, np.inf, False)
    fa = features([X[:, j] for j in group_a])
    fb = features([X[:, j] for j in group_b])
    restricted = held_out_error(np.column_stack([fa, fb]), t)
    unrestricted = held_out_error(np.column_stack([fa, fb, mixed_features(fa, fb)]), t)
    return structure_verdict(restricted, unrestricted, tolerance)


def multiplicative_test(X: np.ndarray, t: np.ndarray, group_a: Sequence[int], group_b: Sequence[int],
                        tolerance: float = TOLERANCE) -> StructureTest:
    """Is ``t = g(X[:, A]) * h(X[:, B])``? The additive test on ``log|t|`` (``t`` of one sign)."""
    log_t = log_target(t)
    if log_t is None:
        return StructureTest(np.inf, np.inf, False)
    return additive_test(X, log_t, group_a, group_b, tolerance)


def bipartitions(n: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Bipartitions of ``n`` variables with at most two on the smaller side (the surrogate of
    two large groups is too coarse to tell more)."""
    out = []
    for k in range(1, min(n // 2, 2) + 1):
        for a in itertools.combinations(range(n), k):
            b = tuple(k for k in range(n) if k not in a)
            if k * 2 == n and a > b:
                continue
            out.append((a, b))
    return out


def best_split(X: np.ndarray, t: np.ndarray, max_vars: int = 6) -> tuple[tuple[int, ...], tuple[int, ...], StructureTest] | None:
    """The accepted bipartition ``t = g(A) + h(B)`` with the lowest restricted error, or None."""
    if X.shape[1] < 2 or X.shape[1] > max_vars or not np.all(np.isfinite(t)) or np.std(t) == 0:
        return None
    best = None
    for a, b in bipartitions(X.shape[1]):
        test = additive_test(X, t, a, b)
        if test.accepted and (best is None or test.restricted < best[2].restricted):
            best = (a, b, test)
    return best


def additive_components(X: np.ndarray, t: np.ndarray, a: Sequence[int], b: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The two parts of the additive fit on all rows (the intercept goes to the first)."""
    fa = features([X[:, j] for j in a])
    fb = features([X[:, j] for j in b])
    A = np.column_stack([np.ones(len(t)), fa, fb])
    coef, *_ = np.linalg.lstsq(A, t, rcond=None)
    na = fa.shape[1]
    return coef[0] + fa @ coef[1 : 1 + na], fb @ coef[1 + na :]
