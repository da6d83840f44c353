"""AI Feynman's separability and symmetry tests, run on a smooth surrogate of the data.

The data are scattered points, but the tests need the function at new combinations of
inputs (variable group A from one row, group B from another). A polynomial surrogate fitted by
least squares supplies them. Why a polynomial rather than a kNN or RBF model: one linear solve
(fast and deterministic, no hyperparameter but the degree, chosen on held-out training rows),
smooth, so small differences of it are not noise, and a mixed difference of a polynomial is
exactly its cross terms, so an additive truth that the polynomial fits well gives a score
near zero. Its weakness: a target that no polynomial of modest degree follows in the sampled
range (a sharp peak, a pole) gives a poor surrogate, and ``surrogate.holdout_nmse`` then says
the verdicts are not to be trusted.

* Additive separability of groups A and B: ``f(a,b) - f(a',b) - f(a,b') + f(a',b') = 0``.
* Multiplicative: the same on ``log|f|`` (the target of one sign; otherwise on ``f`` itself,
  ``f(a,b)*f(a',b') - f(a',b)*f(a,b') = 0``).
* Symmetries of a pair (x, y): the function does not change when (x, y) move along the line
  that keeps ``x-y``, ``x+y``, ``x*y`` or ``x/y`` fixed.

Scores are the size of the criterion relative to the size of the groups' own effects: about 0
for a separable or symmetric function, about 1 for one that is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sr_dist.sr.analysis._common import AnalysisRequestError, nmse
from sr_dist.sr.analysis.closed_fits import least_squares, monomial_matrix, monomial_powers

__all__ = ["MAX_ROWS", "NEAR_SCORE", "SEPARABLE_SCORE", "SYMMETRY_SCORE", "Surrogate", "fit_surrogate", "separability_test",
           "symmetry_tests"]

#: Verdict thresholds on the scores (below: separable / symmetric).
SEPARABLE_SCORE = 0.05
SYMMETRY_SCORE = 0.05
#: Most monomials the surrogate may use, and its degrees tried.
SURROGATE_TERMS = 330
_DEGREES = (2, 3, 4, 5, 6)
#: Training rows the surrogate is fitted on at most (a seeded subset of a larger split): plenty
#: for a polynomial of a few hundred terms, and it keeps a call well under a second.
MAX_ROWS = 2000
#: Scores below this but above the verdict threshold are reported as "near" (a weaker hint).
NEAR_SCORE = 0.15
#: Row pairs the criteria are averaged over.
PAIRS = 400
#: Pairs of variables whose symmetries are tested at most (the most informative first).
MAX_SYMMETRY_PAIRS = 15
#: Step of the symmetry moves, as a fraction of the variables' spread (additive moves) or of
#: their value (multiplicative moves).
_STEP = 0.05
#: A group whose own effect is below this share of the target's spread does not matter.
_NO_EFFECT = 1e-6


@dataclass(frozen=True, eq=False)
class Surrogate:
    """A polynomial in the inputs scaled to [-1, 1]; ``predict`` takes unscaled rows."""

    powers: tuple[tuple[int, ...], ...]
    coefficients: np.ndarray
    centre: np.ndarray
    half_range: np.ndarray
    degree: int
    holdout_nmse: float
    log_target: bool = False
    sign: float = 1.0

    def predict(self, X: np.ndarray) -> np.ndarray:
        scaled = (np.asarray(X, dtype=float) - self.centre) / self.half_range
        return np.asarray(monomial_matrix(scaled, self.powers) @ self.coefficients)


def _scaled_solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    scale = np.sqrt(np.mean(A ** 2, axis=0))
    scale[scale == 0] = 1.0
    return np.asarray(least_squares(A / scale, b) / scale)


def _quick_solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares by the normal equations (a tiny ridge keeps them solvable): about ten
    times cheaper than ``lstsq`` and precise enough to compare degrees on held-out rows; the
    chosen degree is refitted with :func:`_scaled_solve`."""
    scale = np.sqrt(np.mean(A ** 2, axis=0))
    scale[scale == 0] = 1.0
    scaled = A / scale
    gram = scaled.T @ scaled
    gram[np.diag_indices_from(gram)] += 1e-10 * len(A)
    return np.asarray(np.linalg.solve(gram, scaled.T @ b) / scale)


def fit_surrogate(X: np.ndarray, t: np.ndarray, *, log_target: bool = False, sign: float = 1.0) -> Surrogate:
    """The polynomial of the degree (2 to 6, within the term budget) that predicts every fifth
    row best when fitted on the others, refitted on all rows."""
    X, t = np.asarray(X, dtype=float), np.asarray(t, dtype=float)
    low, high = X.min(axis=0), X.max(axis=0)
    centre = (low + high) / 2
    half = np.where(high > low, (high - low) / 2, 1.0)
    scaled = (X - centre) / half
    held = np.zeros(len(t), dtype=bool)
    held[::5] = True
    budget = min(SURROGATE_TERMS, max(3, int(held.size * 0.8) // 4))
    best: tuple[float, int, list[tuple[int, ...]]] | None = None
    for degree in _DEGREES:
        powers = monomial_powers(X.shape[1], degree)
        if len(powers) > budget:
            break
        A = monomial_matrix(scaled, powers)
        coef = _quick_solve(A[~held], t[~held])
        score = nmse(t[held], A[held] @ coef)
        if best is None or score < best[0]:
            best = (score, degree, powers)
    if best is None:
        needed = len(monomial_powers(X.shape[1], _DEGREES[0]))
        raise AnalysisRequestError(
            f"too few training rows ({len(t)}) for the surrogate: a degree-{_DEGREES[0]} polynomial in "
            f"{X.shape[1]} variables has {needed} terms and needs about {needed * 5} rows (or at most "
            f"{SURROGATE_TERMS} terms), so separability cannot be tested on this data; use "
            "variable_relationships or fit_polynomial instead")
    score, degree, powers = best
    coef = _scaled_solve(monomial_matrix(scaled, powers), t)
    return Surrogate(tuple(powers), coef, centre, half, degree, score, log_target, sign)


def _rms(values: np.ndarray) -> float:
    return float(np.sqrt(np.mean(values ** 2))) if values.size else 0.0


def _mixed(surrogate: Surrogate, X: np.ndarray, a: list[int], b: list[int],
           rng: np.random.Generator) -> tuple[float, float, float]:
    """(rms mixed difference, rms effect of A, rms effect of B) over random row pairs."""
    count = min(PAIRS, len(X))
    i = rng.integers(0, len(X), count)
    j = rng.integers(0, len(X), count)
    base = X[i].copy()
    moved_a = base.copy()
    moved_a[:, a] = X[j][:, a]
    moved_b = base.copy()
    moved_b[:, b] = X[j][:, b]
    both = moved_a.copy()
    both[:, b] = X[j][:, b]
    s00, s10, s01, s11 = (surrogate.predict(p) for p in (base, moved_a, moved_b, both))
    return _rms(s00 - s10 - s01 + s11), _rms(s10 - s00), _rms(s01 - s00)


def _score(mixed: float, effect_a: float, effect_b: float, spread: float) -> float | None:
    """Mixed difference over the smaller group effect; ``None`` when a group has no effect."""
    smaller = min(effect_a, effect_b)
    if smaller <= _NO_EFFECT * spread:
        return None
    return mixed / smaller


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


def separability_test(X: np.ndarray, y: np.ndarray, names: Sequence[str],
                      groups: Sequence[Sequence[str]] | None = None, *, seed: int = 0) -> dict[str, Any]:
    """Additive and multiplicative separability between two variable groups (default: each
    variable against all the others), and the pair symmetries. Variables in neither group keep
    the values of the base row."""
    X = np.asarray(X, dtype=float).reshape(len(y), -1)
    y = np.asarray(y, dtype=float)
    pairs = _groups(groups, names)
    keep = np.flatnonzero(np.all(np.isfinite(X), axis=1) & np.isfinite(y))
    if keep.size > MAX_ROWS:
        keep = np.sort(np.random.default_rng(seed).choice(keep, MAX_ROWS, replace=False))
    X, y = X[keep], y[keep]
    index = {name: j for j, name in enumerate(names)}
    surrogate = fit_surrogate(X, y)
    one_sign = bool(np.all(y > 0) or np.all(y < 0))
    sign = 1.0 if np.all(y > 0) else -1.0
    log_surrogate = fit_surrogate(X, np.log(sign * y), log_target=True, sign=sign) if one_sign else None
    spread = float(np.std(y)) or 1.0
    log_spread = (float(np.std(np.log(sign * y))) or 1.0) if one_sign else 1.0
    tests = []
    for a_names, b_names in pairs:
        a, b = [index[n] for n in a_names], [index[n] for n in b_names]
        mixed, ea, eb = _mixed(surrogate, X, a, b, np.random.default_rng(seed))
        additive = _score(mixed, ea, eb, spread)
        if log_surrogate is not None:
            lm, la, lb = _mixed(log_surrogate, X, a, b, np.random.default_rng(seed))
            multiplicative = _score(lm, la, lb, log_spread)
            method = "log"
        else:
            multiplicative = _product_score(surrogate, X, a, b, np.random.default_rng(seed), spread)
            method = "product"
        tests.append({
            "groups": [a_names, b_names],
            "additive": {"score": additive, "separable": additive is not None and additive < SEPARABLE_SCORE},
            "multiplicative": {"score": multiplicative, "method": method,
                               "separable": multiplicative is not None and multiplicative < SEPARABLE_SCORE},
            "no_effect": [g for g, e in ((a_names, ea), (b_names, eb)) if e <= _NO_EFFECT * spread],
        })
    return {
        "rows": int(len(y)),
        "surrogate": {"kind": "polynomial", "degree": surrogate.degree, "terms": len(surrogate.powers),
                      "holdout_nmse": surrogate.holdout_nmse,
                      **({"log_holdout_nmse": log_surrogate.holdout_nmse} if log_surrogate else {})},
        "tests": tests,
        "symmetries": symmetry_tests(surrogate, X, names, seed=seed),
    }


def _product_score(surrogate: Surrogate, X: np.ndarray, a: list[int], b: list[int],
                   rng: np.random.Generator, spread: float) -> float | None:
    count = min(PAIRS, len(X))
    i, j = rng.integers(0, len(X), count), rng.integers(0, len(X), count)
    base = X[i].copy()
    moved_a, moved_b = base.copy(), base.copy()
    moved_a[:, a] = X[j][:, a]
    moved_b[:, b] = X[j][:, b]
    both = moved_a.copy()
    both[:, b] = X[j][:, b]
    s00, s10, s01, s11 = (surrogate.predict(p) for p in (base, moved_a, moved_b, both))
    size = _rms(s00 * s11) + _rms(s10 * s01)
    if min(_rms(s10 - s00), _rms(s01 - s00)) <= _NO_EFFECT * spread or size == 0:
        return None
    return 2 * _rms(s00 * s11 - s10 * s01) / size


#: The moves along which each symmetry keeps its combination fixed: (x, y) -> (x', y').
def _moves(kind: str, x: np.ndarray, y: np.ndarray, step_x: float, step_y: float,
           ) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
    step = min(step_x, step_y)
    if kind == "x-y":
        return (x + step, y + step), x + step, y + step
    if kind == "x+y":
        return (x + step, y - step), x + step, y - step
    factor = 1.0 + _STEP
    if kind == "x*y":
        return (x * factor, y / factor), x * factor, y / factor
    return (x * factor, y * factor), x * factor, y * factor  # x/y


def symmetry_tests(surrogate: Surrogate, X: np.ndarray, names: Sequence[str], *, seed: int = 0) -> list[dict[str, Any]]:
    """For pairs of variables (every pair up to :data:`MAX_SYMMETRY_PAIRS`, else the pairs of
    the variables with the largest effects), whether the surrogate is invariant under each
    move: score = change along the invariant move over the mean change of each half-move."""
    d = X.shape[1]
    if d < 2:
        return []
    rng = np.random.default_rng(seed)
    rows = X[rng.integers(0, len(X), min(PAIRS, len(X)))]
    base = surrogate.predict(rows)
    spread = float(np.std(surrogate.predict(X))) or 1.0
    stds = X.std(axis=0)
    effect = np.zeros(d)
    for j in range(d):
        moved = rows.copy()
        moved[:, j] += _STEP * stds[j]
        effect[j] = _rms(surrogate.predict(moved) - base)
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    if len(pairs) > MAX_SYMMETRY_PAIRS:
        pairs.sort(key=lambda p: -min(effect[p[0]], effect[p[1]]))
        pairs = pairs[:MAX_SYMMETRY_PAIRS]
    out = []
    for i, j in pairs:
        for kind in ("x-y", "x+y", "x*y", "x/y"):
            (xi, xj), single_i, single_j = _moves(kind, rows[:, i], rows[:, j],
                                                   _STEP * stds[i], _STEP * stds[j])
            both, only_i, only_j = rows.copy(), rows.copy(), rows.copy()
            both[:, i], both[:, j] = xi, xj
            only_i[:, i] = single_i
            only_j[:, j] = single_j
            change_i = _rms(surrogate.predict(only_i) - base)
            change_j = _rms(surrogate.predict(only_j) - base)
            if min(change_i, change_j) <= _NO_EFFECT * spread:
                continue  # the target does not depend on one of the two: no pair symmetry
            score = 2 * _rms(surrogate.predict(both) - base) / (change_i + change_j)
            out.append({"pair": [names[i], names[j]], "kind": f"{names[i]}{kind[1]}{names[j]}",
                        "relation": kind, "score": score, "symmetric": bool(score < SYMMETRY_SCORE),
                        "near": bool(SYMMETRY_SCORE <= score < NEAR_SCORE)})
    return out
