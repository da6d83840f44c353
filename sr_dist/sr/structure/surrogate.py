"""The held-out surrogate: smooth linear models that judge a structure without a formula.

The sample is scattered (no grid), so a test that moves one variable while holding the others
fixed needs a model of ``f`` between the sample points. Instead of a neural network (slow,
seed-dependent; AI Feynman, Udrescu & Tegmark 2020) the tests fit *linear* models in a basis of
Chebyshev polynomials (plus ``log x`` and ``1/x`` for positive variables, which polynomials
approximate poorly near 0): one model restricted to the structure under test and one
unrestricted model of the same degree. Both are fitted on three quarters of the sample and
judged on the held-out quarter, so extra terms cannot win by over-fitting. The structure is
accepted when the restricted model is accurate in absolute terms (relative RMS below
``tolerance``) *and* the unrestricted model is not much better (the mixed terms explain
nothing).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["COARSE", "COARSE_RATIO", "RATIO", "TOLERANCE", "StructureTest", "coarse_verdict", "features",
           "held_out_error", "mixed_features", "scale_to_unit", "surrogate_degree", "structure_verdict"]


#: Relative held-out RMS the restricted model must reach for a structure to be accepted.
TOLERANCE = 2e-3


#: The unrestricted model may be at most this many times better than the restricted one.
RATIO = 4.0


#: Held-out relative RMS below which the unrestricted surrogate is good enough for a symmetry
#: to be judged against it rather than against ``TOLERANCE``.
COARSE = 0.1


#: How much worse than the unrestricted surrogate the restricted one may be there (it has the
#: same degree in one variable fewer, so fewer terms).
COARSE_RATIO = 2.0


@dataclass(frozen=True)
class StructureTest:
    """Held-out relative RMS of the restricted and the unrestricted model, and the verdict."""

    restricted: float
    unrestricted: float
    accepted: bool


def scale_to_unit(col: np.ndarray) -> np.ndarray:
    lo, hi = float(np.min(col)), float(np.max(col))
    return np.zeros_like(col) if hi <= lo else (2 * col - (lo + hi)) / (hi - lo)


def surrogate_degree(n_vars: int) -> int:
    return {1: 10, 2: 7, 3: 5, 4: 4, 5: 3}.get(n_vars, 2)


def features(columns: Sequence[np.ndarray], degree: int | None = None, extras: bool = True) -> np.ndarray:
    """Chebyshev products of total degree <= ``degree`` over the columns (no constant column),
    plus ``log x``, ``1/x`` (and their products with ``T1`` of the others) for positive columns."""
    if not columns:
        return np.zeros((0, 0))
    n = len(columns[0])
    d = surrogate_degree(len(columns)) if degree is None else degree
    vanders = [np.polynomial.chebyshev.chebvander(scale_to_unit(c), d) for c in columns]
    out: list[np.ndarray] = []
    for powers in itertools.product(range(d + 1), repeat=len(columns)):
        if 0 < sum(powers) <= d:
            col = np.ones(n)
            for v, p in zip(vanders, powers):
                col = col * v[:, p]
            out.append(col)
    if extras:
        for c in columns:
            if np.all(c > 0):
                for e in (np.log(c), 1.0 / c):
                    out.append(scale_to_unit(e))
    return np.column_stack(out) if out else np.zeros((n, 0))


def held_out_error(F: np.ndarray, t: np.ndarray) -> float:
    """Relative RMS on every 4th row of a least-squares fit on the others."""
    scale = float(np.std(t)) or 1.0
    test = np.arange(len(t)) % 4 == 0
    A = np.column_stack([np.ones(len(t)), F])
    if not np.all(np.isfinite(A)):
        return np.inf
    try:
        with np.errstate(all="ignore"):
            coef, *_ = np.linalg.lstsq(A[~test], t[~test], rcond=None)
            r = t[test] - A[test] @ coef
    except np.linalg.LinAlgError:
        return np.inf
    value = float(np.sqrt(np.mean(r**2)) / scale)
    return value if np.isfinite(value) else np.inf


def structure_verdict(restricted: float, unrestricted: float, tolerance: float) -> StructureTest:
    ok = restricted < tolerance and restricted <= RATIO * unrestricted + 1e-9
    return StructureTest(restricted, unrestricted, bool(ok))


def coarse_verdict(restricted: float, unrestricted: float, tolerance: float) -> StructureTest:
    """:func:`verdict`, also accepting where the surrogate is too coarse for the absolute test
    (an oscillation over the range) but the restricted model fits the held-out rows about as
    well as the free one (a pair or variable that matters beyond the restriction loses most of
    the fit: ten times and more in the tests): nothing was lost by the restriction."""
    verdict = structure_verdict(restricted, unrestricted, tolerance)
    if not verdict.accepted and restricted <= COARSE_RATIO * unrestricted and unrestricted < COARSE:
        return StructureTest(restricted, unrestricted, True)
    return verdict


def mixed_features(fa: np.ndarray, fb: np.ndarray, k: int = 6) -> np.ndarray:
    """Products of the first ``k`` features of each group: what a non-separable part needs."""
    return np.column_stack([fa[:, i] * fb[:, j] for i in range(min(k, fa.shape[1])) for j in range(min(k, fb.shape[1]))])
