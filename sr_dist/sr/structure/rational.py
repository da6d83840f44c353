"""Rational functions found in one linear solve: ``y = P(x) / Q(x)`` with polynomial ``P``, ``Q``.

On exact data ``P(x) - y*Q(x) = 0`` at every row, so the coefficients of ``P`` and ``Q`` over
all monomials up to a degree are a null vector of the matrix ``[M_P, -y*M_Q]`` (the
linearised rational fit of Levy, 1959, in its homogeneous form: no coefficient is fixed, so a
denominator without a constant term, ``c**2 + u*v``, is found as easily as ``1 + a*b``). The
smallest right singular vector gives it; backward elimination then drops every monomial whose
removal keeps the ratio exact on the rows, so the answer is the sparse law, not a dense
polynomial pair. A greedy pursuit over numerator terms misses ``(a + b)/(1 + a*b)`` (one
term at a time, ``a*b`` explains more than ``a`` or ``b``); the joint solve does not.

Refused: a fit whose denominator changes sign or nearly vanishes on the rows (a pole, or a
removable one such as ``(x**2 - y**2)/(x - y)``). A constant denominator gives a polynomial,
kept when it has three monomials or more (the sparse sums hold the shorter ones, and miss
longer ones: ``(x0 + 2*x1)**3`` is four monomials a greedy pursuit does not assemble).
Monomials are exponent tuples, one entry per column; no formula trees here.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["RationalFit", "monomial_values", "monomials", "null_fit", "prune", "ratio_error", "rational_fits"]


#: Relative RMS error on the rows below which a ratio counts as exact.
EXACT = 1e-7


#: Rows used (the solve is dense: rows x (terms of P + terms of Q)).
ROWS = 256


#: Most variables, and the degrees of P and Q tried, fewest unknowns first (with five or six
#: variables only the low degrees fit under ``MAX_UNKNOWNS``: ``1/((x2-x1)**2 + (y2-y1)**2 +
#: (z2-z1)**2)`` is degrees (0, 2)).
MAX_VARS = 6


DEGREES: tuple[tuple[int, int], ...] = ((1, 1), (2, 1), (1, 2), (2, 2), (3, 2), (2, 3))


#: Higher degrees, tried after ``DEGREES`` for two or three variables only: the square of a
#: relativistic law is one (``(v/sqrt(1 - v**2/c**2))**2 = v**2*c**2/(c**2 - v**2)``, degrees
#: (4, 2); ``c**6/(c**2 - v**2)``, (6, 2)); a sum of two ratios with different denominators
#: is (3, 3) (``(a + b)/c**2 + (a + 1.9)/(c + 2.7)``). Not for one variable, where a ratio of that many
#: coefficients approximates any smooth curve on a short range to the exactness bar. In two
#: variables they pass ``EXACT`` on smooth non-rational surfaces too (``exp(a)*b``,
#: ``sqrt(a + b)`` on [1, 2]**2 at 3e-9 to 9e-8), so they must meet ``HIGH_EXACT``: a true ratio
#: fits to float64 rounding (1e-15), an approximant no closer than 1e-9.
HIGH_EXACT = 1e-12


HIGH_DEGREES: tuple[tuple[int, int], ...] = ((3, 3), (4, 2), (2, 4), (6, 2), (2, 6))


HIGH_DEGREE_VARS = (2, 3)


#: Fewest monomials of a polynomial (a constant denominator) worth proposing.
POLYNOMIAL_MIN_TERMS = 3


#: Most unknowns in one solve (4 variables at degrees (3, 2): 35 + 15).
MAX_UNKNOWNS = 50


def monomials(n_vars: int, degree: int) -> list[tuple[int, ...]]:
    """Exponent tuples of every monomial of total degree at most ``degree``, lowest first."""
    out = [e for d in range(degree + 1)
           for e in itertools.product(range(d + 1), repeat=n_vars) if sum(e) == d]
    return out


def monomial_values(X: np.ndarray, exps: Sequence[tuple[int, ...]]) -> np.ndarray:
    return np.column_stack([np.prod(X ** np.array(e, dtype=float), axis=1) for e in exps])


def null_fit(A: np.ndarray, scale: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Unit-norm coefficients (on the unscaled columns) of the best null vector of the active
    columns; zeros elsewhere."""
    _, _, vt = np.linalg.svd(A[:, active] / scale[active], full_matrices=False)
    coef = np.zeros(A.shape[1])
    coef[active] = vt[-1] / scale[active]
    return coef


def ratio_error(P: np.ndarray, Q: np.ndarray, y: np.ndarray, coef: np.ndarray) -> float:
    k = P.shape[1]
    num_v = P @ coef[:k]
    den_v = Q @ coef[k:]
    scale = float(np.max(np.abs(den_v))) if den_v.size else 0.0
    # A pole or a near-vanishing denominator on the rows is no law.
    if scale == 0 or np.min(den_v) * np.max(den_v) <= 0 or np.min(np.abs(den_v)) < 1e-6 * scale:
        return np.inf
    with np.errstate(all="ignore"):
        r = num_v / den_v - y
    norm = float(np.sqrt(np.mean((y - y.mean()) ** 2))) or 1.0
    err = float(np.sqrt(np.mean(r**2)) / norm)
    return err if np.isfinite(err) else np.inf


def prune(A: np.ndarray, P: np.ndarray, Q: np.ndarray, y: np.ndarray, scale: np.ndarray,
           bar: float = EXACT) -> np.ndarray | None:
    """Backward elimination from every column: drop the column whose removal keeps the ratio
    exact with the smallest error, until none can go. None when even the full fit is not exact."""
    k = P.shape[1]
    active = np.ones(A.shape[1], dtype=bool)
    coef = null_fit(A, scale, active)
    if ratio_error(P, Q, y, coef) >= bar:
        return None
    while True:
        best: tuple[float, int, np.ndarray] | None = None
        # Try the columns with the smallest scaled coefficients first; the first few suffice.
        weights = np.abs(coef) * scale
        order = [i for i in np.argsort(weights) if active[i]]
        for i in order[:8]:
            trial = active.copy()
            trial[i] = False
            if not trial[:k].any() or not trial[k:].any():
                continue
            c = null_fit(A, scale, trial)
            err = ratio_error(P, Q, y, c)
            if err < bar and (best is None or err < best[0]):
                best = (err, int(i), c)
        if best is None:
            return coef
        active[best[1]] = False
        coef = best[2]


@dataclass(frozen=True)
class RationalFit:
    """``P/Q`` as monomial exponent tuples: the numerator's, the denominator's, and which
    denominator monomial leads (written without a constant; None for a polynomial, whose
    denominator is the constant 1)."""

    error: float
    numerator: tuple[tuple[int, ...], ...]
    denominator: tuple[tuple[int, ...], ...]
    lead: int | None


def rational_fits(X: np.ndarray, y: np.ndarray) -> list[RationalFit]:
    """The sparse exact ratios of polynomials in the columns of ``X`` (see the module
    docstring), at the lowest degrees that fit; relative error on the rows. Empty when there are
    more than ``MAX_VARS`` variables."""
    X = np.asarray(X, dtype=float)[:ROWS]
    y = np.asarray(y, dtype=float)[:ROWS]
    n_vars = X.shape[1]
    if n_vars == 0 or n_vars > MAX_VARS or len(y) < 16 or not np.all(np.isfinite(X)) \
            or not np.all(np.isfinite(y)) or np.std(y) == 0:
        return []
    out: list[RationalFit] = []
    seen: set[tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]] = set()
    degrees = DEGREES + (HIGH_DEGREES if n_vars in HIGH_DEGREE_VARS else ())
    for dp, dq in degrees:
        num_exps, den_exps = monomials(n_vars, dp), monomials(n_vars, dq)
        if len(num_exps) + len(den_exps) > min(MAX_UNKNOWNS, len(y) // 2):
            continue
        with np.errstate(all="ignore"):
            P, Q = monomial_values(X, num_exps), monomial_values(X, den_exps)
            A = np.column_stack([P, -y[:, None] * Q])
        if not np.all(np.isfinite(A)):
            continue
        scale = np.linalg.norm(A, axis=0)
        scale[scale == 0] = 1.0
        coef = prune(A, P, Q, y, scale, EXACT if (dp, dq) in DEGREES else HIGH_EXACT)
        if coef is None:
            continue
        k = len(num_exps)
        top = tuple(e for e, c in zip(num_exps, coef[:k], strict=True) if c != 0)
        bottom_c = [(e, c) for e, c in zip(den_exps, coef[k:], strict=True) if c != 0]
        bottom = tuple(e for e, _ in bottom_c)
        key = (top, bottom)
        if key in seen:
            continue
        seen.add(key)
        if all(sum(e) == 0 for e, _ in bottom_c):
            # A polynomial: the sparse sums hold those of one or two terms; a greedy pursuit
            # does not assemble ``(x0 + 2*x1)**3`` (four monomials, each a poor fit alone).
            if len(top) >= POLYNOMIAL_MIN_TERMS:
                out.append(RationalFit(ratio_error(P, Q, y, coef), top, (), None))
                break
            continue
        # The denominator's largest term (on the rows) leads without a constant: the ratio's
        # scale is the numerator's.
        Qv = monomial_values(X, list(bottom)) * np.array([c for _, c in bottom_c])
        lead = int(np.argmax(np.mean(np.abs(Qv), axis=0)))
        out.append(RationalFit(ratio_error(P, Q, y, coef), top, bottom, lead))
        break  # the lowest degrees that fit: higher ones only add common factors
    return out
