"""Structure found in the data, turned into proposals: separability, symmetries, recursion.

What AI Feynman does and the plain search does not: from the training sample alone, test
whether the target splits into parts over disjoint groups of variables, solve each part as a
smaller problem, and combine the answers.

**Why smooth surrogates and held-out rows.** The sample is scattered (no grid), so a test that
moves one variable while holding the others fixed needs a model of ``f`` between the sample
points. Instead of a neural network (slow, seed-dependent) the tests fit *linear* models in a
basis of Chebyshev polynomials (plus ``log x`` and ``1/x`` for positive variables, which
polynomials approximate poorly near 0): one model restricted to the structure under test
(``g(A) + h(B)``: no terms that mix the groups; or ``f(u, rest)``: the pair enters only through
``u = x-y, x+y, x*y, x/y``) and one unrestricted model of the same degree. Both are fitted on
three quarters of the sample and judged on the held-out quarter, so extra terms cannot win by
over-fitting. The structure is accepted when the restricted model is accurate in absolute terms
(relative RMS below ``tolerance``) *and* the unrestricted model is not much better (the mixed
terms explain nothing). A smooth function without the structure leaves mixed terms that the
restricted model cannot absorb, so it fails the second test however good the basis is.

- additive ``f = g(A) + h(B)``: the test on ``f``; multiplicative ``f = g(A) * h(B)``: the same
  test on ``log|f|`` when ``f`` keeps one sign, and when it changes sign a rank-one model
  ``(Fa u) * (Fb v)`` in the groups' features, fitted by alternating least squares; and the
  additive test on ``f**2`` and ``1/f`` (``sqrt(g + h)``, ``1/(g + h)``);
- symmetries: the pair ``(x, y)`` enters only as ``x - y``, ``x + y``, ``x * y`` or ``x / y``.

**Recursion.** A separated part gets its own data (its component of the restricted fit, then,
once the other part has a formula, the exact remainder ``f - other`` or ``f / other``); a
symmetry replaces the pair by one new variable. Each smaller problem is solved by the same
function: sparse sums of the seed-library basis fitted to the part and to its transforms
(``1/t``, ``t**2``, ``1/t**2``, ``sqrt t``, ``log t``, ``exp t``: nested forms such as
``1/sqrt(1 - u**2)``), ratios of sums whose denominator starts with ``1`` or with any one
variable (``(a*x + b*y)/(x + y)``), power laws, and again decomposition, to ``depth`` levels.
Every candidate carries its predictions on the sample, so combinations are ranked by their
error on the real target, and only the best few of each part are combined.

The order is data, not a per-problem rule: every test runs on every problem, candidates are
ranked by sample error, and the caller places the near-exact ones first. Nothing here sees a
test split, a problem name or a ground truth.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.seeding import (
    Sample,
    _basis,
    _monomial,
    _pursuit,
    _rational,
    best_of_each_size,
    power_law,
    sparse_sums,
)
from sr_dist.sr.evolve.transforms import TRANSFORMS
from sr_dist.sr.evolve.tree import binary, const, count_constants, num, product, size, total, unary, var

__all__ = [
    "Candidate",
    "StructureTest",
    "additive_test",
    "multiplicative_test",
    "product_test",
    "best_product",
    "symmetry_test",
    "find_symmetries",
    "best_split",
    "affine_test",
    "best_affine",
    "solve",
    "decomposition_seeds",
    "substitute",
    "evaluate",
    "rank",
]

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
#: Candidates kept per (sub)problem.
KEEP = 4
#: Pair combinations the symmetry test tries, and how each is computed.
SYMMETRIES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "sub": lambda a, b: a - b,
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


@dataclass(frozen=True)
class StructureTest:
    """Held-out relative RMS of the restricted and the unrestricted model, and the verdict."""

    restricted: float
    unrestricted: float
    accepted: bool


@dataclass(frozen=True)
class Candidate:
    """A proposal for one (sub)problem: its tree, its values on the sample, its relative RMS
    error there, and whether it carries a free overall scale (so a sum need not add one)."""

    tree: Node
    pred: np.ndarray
    error: float
    scaled: bool = True


# --------------------------------------------------------------------------------------------
# Surrogate features and the tests
# --------------------------------------------------------------------------------------------


def _scaled(col: np.ndarray) -> np.ndarray:
    lo, hi = float(np.min(col)), float(np.max(col))
    return np.zeros_like(col) if hi <= lo else (2 * col - (lo + hi)) / (hi - lo)


def _degree(n_vars: int) -> int:
    return {1: 10, 2: 7, 3: 5, 4: 4, 5: 3}.get(n_vars, 2)


def features(columns: Sequence[np.ndarray], degree: int | None = None, extras: bool = True) -> np.ndarray:
    """Chebyshev products of total degree <= ``degree`` over the columns (no constant column),
    plus ``log x``, ``1/x`` (and their products with ``T1`` of the others) for positive columns."""
    if not columns:
        return np.zeros((0, 0))
    n = len(columns[0])
    d = _degree(len(columns)) if degree is None else degree
    vanders = [np.polynomial.chebyshev.chebvander(_scaled(c), d) for c in columns]
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
                    out.append(_scaled(e))
    return np.column_stack(out) if out else np.zeros((n, 0))


def _held_out(F: np.ndarray, t: np.ndarray) -> float:
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


def _verdict(restricted: float, unrestricted: float, tolerance: float) -> StructureTest:
    ok = restricted < tolerance and restricted <= RATIO * unrestricted + 1e-9
    return StructureTest(restricted, unrestricted, bool(ok))


def _coarse_verdict(restricted: float, unrestricted: float, tolerance: float) -> StructureTest:
    """:func:`_verdict`, also accepting where the surrogate is too coarse for the absolute test
    (an oscillation over the range) but the restricted model fits the held-out rows about as
    well as the free one (a pair or variable that matters beyond the restriction loses most of
    the fit: ten times and more in the tests): nothing was lost by the restriction."""
    verdict = _verdict(restricted, unrestricted, tolerance)
    if not verdict.accepted and restricted <= COARSE_RATIO * unrestricted and unrestricted < COARSE:
        return StructureTest(restricted, unrestricted, True)
    return verdict


def _mixed(fa: np.ndarray, fb: np.ndarray, k: int = 6) -> np.ndarray:
    """Products of the first ``k`` features of each group: what a non-separable part needs."""
    return np.column_stack([fa[:, i] * fb[:, j] for i in range(min(k, fa.shape[1])) for j in range(min(k, fb.shape[1]))])


def additive_test(X: np.ndarray, t: np.ndarray, group_a: Sequence[int], group_b: Sequence[int],
                  tolerance: float = TOLERANCE) -> StructureTest:
    """Is ``t = g(X[:, A]) + h(X[:, B])`` on the sample? (See the module docstring.)"""
    if not np.all(np.isfinite(t)) or np.std(t) == 0:
        return StructureTest(np.inf, np.inf, False)
    fa = features([X[:, j] for j in group_a])
    fb = features([X[:, j] for j in group_b])
    restricted = _held_out(np.column_stack([fa, fb]), t)
    unrestricted = _held_out(np.column_stack([fa, fb, _mixed(fa, fb)]), t)
    return _verdict(restricted, unrestricted, tolerance)


def _log_target(t: np.ndarray) -> np.ndarray | None:
    if np.all(t > 0) or np.all(t < 0):
        out: np.ndarray = np.log(np.abs(t))
        return out
    return None


def multiplicative_test(X: np.ndarray, t: np.ndarray, group_a: Sequence[int], group_b: Sequence[int],
                        tolerance: float = TOLERANCE) -> StructureTest:
    """Is ``t = g(X[:, A]) * h(X[:, B])``? The additive test on ``log|t|`` (``t`` of one sign)."""
    log_t = _log_target(t)
    if log_t is None:
        return StructureTest(np.inf, np.inf, False)
    return additive_test(X, log_t, group_a, group_b, tolerance)


#: Alternating least-squares sweeps, then Gauss-Newton steps, of the rank-one model of
#: :func:`product_test` (alternating sweeps alone creep: 30 leave 1e-3 where 200 reach 1e-14).
PRODUCT_SWEEPS = 4
PRODUCT_NEWTON_STEPS = 15


def _rank_one(Fa: np.ndarray, Fb: np.ndarray, t: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Coefficients ``(u, v)`` of ``t ~ (Fa @ u) * (Fb @ v)`` fitted on ``rows``: started from
    the leading singular pair of a small bilinear fit (the first seven columns of each side;
    from ``v = e_0`` a factor of zero mean would start at nothing), a few alternating
    least-squares sweeps, then Gauss-Newton steps on ``(u, v)`` together (the minimum-norm
    step: the split of the scale between the factors is free)."""
    A, B, y = Fa[rows], Fb[rows], t[rows]
    k = min(7, A.shape[1]), min(7, B.shape[1])
    mixed = (A[:, : k[0], None] * B[:, None, : k[1]]).reshape(len(y), -1)
    try:
        with np.errstate(all="ignore"):
            coef, *_ = np.linalg.lstsq(mixed, y, rcond=None)
            _, S, Vt = np.linalg.svd(coef.reshape(k))
            v = np.zeros(B.shape[1])
            v[: k[1]] = Vt[0] * S[0]
            u = np.zeros(A.shape[1])
            for _ in range(PRODUCT_SWEEPS):
                u, *_ = np.linalg.lstsq(A * (B @ v)[:, None], y, rcond=None)
                v, *_ = np.linalg.lstsq(B * (A @ u)[:, None], y, rcond=None)
            loss = float(np.sum((y - (A @ u) * (B @ v)) ** 2))
            for _ in range(PRODUCT_NEWTON_STEPS):
                g, h = A @ u, B @ v
                J = np.column_stack([A * h[:, None], B * g[:, None]])
                step, *_ = np.linalg.lstsq(J, y - g * h, rcond=None)
                for length in (1.0, 0.5, 0.25, 0.1):  # backtracking: the full step may overshoot
                    nu, nv = u + length * step[: len(u)], v + length * step[len(u):]
                    new = float(np.sum((y - (A @ nu) * (B @ nv)) ** 2))
                    if new < loss:
                        break
                if not new < loss:
                    break
                stalled = new > 0.9 * loss  # converged, or creeping on a non-product
                u, v, loss = nu, nv, new
                if stalled:
                    break
    except np.linalg.LinAlgError:
        return None
    return (u, v) if np.all(np.isfinite(u)) and np.all(np.isfinite(v)) else None


def _factor_features(X: np.ndarray, group: Sequence[int]) -> np.ndarray:
    """An orthonormal basis of: a constant, the group's surrogate features, and ``exp`` of each
    of its variables (a polynomial of the surrogate's degree follows ``exp(x)`` over a range of
    several units poorly)."""
    cols = [np.ones(len(X)), *features([X[:, j] for j in group]).T]
    for j in group:
        with np.errstate(all="ignore"):
            e = np.exp(X[:, j] - np.max(X[:, j]))
        if np.all(np.isfinite(e)) and np.std(e) > 0:
            cols.append(e)
    F = np.column_stack(cols)
    if not np.all(np.isfinite(F)):
        return F[:, :1]
    # An orthonormal basis of the same span: the raw columns are conditioned 1e9 and worse,
    # and the Gauss-Newton steps of :func:`_rank_one` wander in such a basis.
    U, S, _ = np.linalg.svd(F, full_matrices=False)
    out: np.ndarray = U[:, S > 1e-10 * S[0]]
    return out


def product_test(X: np.ndarray, t: np.ndarray, group_a: Sequence[int], group_b: Sequence[int],
                 tolerance: float = TOLERANCE) -> tuple[StructureTest, np.ndarray, np.ndarray]:
    """Is ``t = g(X[:, A]) * h(X[:, B])`` where ``t`` changes sign (so ``log|t|`` is not there
    to make the product a sum)? The restricted model is rank one, ``(Fa u) * (Fb v)`` in the
    groups' surrogate features (each with a constant), fitted by ``_rank_one`` (a bilinear
    start, alternating least squares, then Gauss-Newton); the unrestricted one is the surrogate
    of all the variables. Returns the verdict and the two factors' values on every row (their
    scales are arbitrary, their product is the fit)."""
    fail = StructureTest(np.inf, np.inf, False), np.ones(len(t)), np.ones(len(t))
    if not np.all(np.isfinite(t)) or np.std(t) == 0:
        return fail
    Fa, Fb = _factor_features(X, group_a), _factor_features(X, group_b)
    test = np.arange(len(t)) % 4 == 0
    fitted = _rank_one(Fa, Fb, t, ~test)
    if fitted is None:
        return fail
    scale = float(np.std(t))
    with np.errstate(all="ignore"):
        r = t[test] - (Fa[test] @ fitted[0]) * (Fb[test] @ fitted[1])
        restricted = float(np.sqrt(np.mean(r**2)) / scale)
    restricted = restricted if np.isfinite(restricted) else np.inf
    unrestricted = _held_out(features([X[:, k] for k in range(X.shape[1])]), t)
    verdict = _verdict(restricted, unrestricted, tolerance)
    if not verdict.accepted:
        return verdict, fail[1], fail[2]
    whole = _rank_one(Fa, Fb, t, np.ones(len(t), dtype=bool)) or fitted
    g, h = Fa @ whole[0], Fb @ whole[1]
    if min(float(np.std(g)) / (float(np.mean(np.abs(g))) or 1.0),
           float(np.std(h)) / (float(np.mean(np.abs(h))) or 1.0)) < 1e-6:
        # A constant factor: the group's variables do not enter ``t`` (a product in name only).
        return StructureTest(restricted, unrestricted, False), fail[1], fail[2]
    return verdict, g, h


def best_product(X: np.ndarray, t: np.ndarray, max_vars: int = 6, any_sign: bool = False
                 ) -> tuple[tuple[int, ...], tuple[int, ...], np.ndarray, np.ndarray] | None:
    """The accepted bipartition of :func:`product_test` with the lowest restricted error and
    its two factors, or None; only for a ``t`` that changes sign (otherwise the additive test
    on ``log|t|`` asks the same) unless ``any_sign``."""
    n = X.shape[1]
    if n < 2 or n > max_vars or (_log_target(t) is not None and not any_sign) \
            or not np.all(np.isfinite(t)) or np.std(t) == 0:
        return None
    best = None
    for a, b in _splits(n):
        verdict, comp_a, comp_b = product_test(X, t, a, b)
        if verdict.accepted and (best is None or verdict.restricted < best[0].restricted):
            best = (verdict, a, b, comp_a, comp_b)
    return None if best is None else best[1:]


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
    d = _degree(len(others) + 1)
    restricted = _held_out(features([u, *others], d), t)
    if unrestricted is None:
        unrestricted = _held_out(features([X[:, k] for k in range(X.shape[1])], d), t)
    verdict = _coarse_verdict(restricted, unrestricted, tolerance)
    log_t = None if verdict.accepted or log_done else _log_target(t)
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
    d = _degree(X.shape[1] - 1)
    log_t = _log_target(t)
    targets = [t] if log_t is None else [t, log_t]
    free = [_held_out(features([X[:, k] for k in range(X.shape[1])], d), z) for z in targets]
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
    d = _degree(len(others))
    fo = features(others, d)
    xj = X[:, j][:, None]
    restricted = _held_out(np.column_stack([fo, xj, xj * fo]), t)
    if unrestricted is None:
        unrestricted = _held_out(features([X[:, k] for k in range(X.shape[1])], d + 1), t)
    return _coarse_verdict(restricted, unrestricted, tolerance)


def best_affine(X: np.ndarray, t: np.ndarray, max_vars: int = 4) -> tuple[int, StructureTest] | None:
    """The variable ``t`` is affine in with the lowest restricted error, among those whose
    slope ``B`` is not a constant (that is an additive split, tested on its own) and matters;
    None when there is none."""
    n = X.shape[1]
    if n < 2 or n > max_vars or not np.all(np.isfinite(t)) or np.std(t) == 0:
        return None
    free = _held_out(features([X[:, k] for k in range(n)], _degree(n - 1) + 1), t)
    best = None
    for j in range(n):
        test = affine_test(X, t, j, unrestricted=free)
        if not test.accepted or (best is not None and test.restricted >= best[1].restricted):
            continue
        _, slope = _affine_components(X, t, j)
        spread = float(np.std(X[:, j] * slope))
        if spread > 1e-3 * float(np.std(t)) and float(np.std(slope)) > 1e-3 * float(np.mean(np.abs(slope))):
            best = (j, test)
    return best


def _affine_components(X: np.ndarray, t: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray]:
    """``A`` and ``B`` of ``t = A + x_j * B`` from the restricted fit on all rows."""
    others = [X[:, k] for k in range(X.shape[1]) if k != j]
    fo = features(others, _degree(len(others)))
    xj = X[:, j][:, None]
    A = np.column_stack([np.ones(len(t)), fo, xj, xj * fo])
    coef, *_ = np.linalg.lstsq(A, t, rcond=None)
    k = fo.shape[1]
    return coef[0] + fo @ coef[1 : 1 + k], coef[1 + k] + fo @ coef[2 + k :]


def _splits(n: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
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
    for a, b in _splits(X.shape[1]):
        test = additive_test(X, t, a, b)
        if test.accepted and (best is None or test.restricted < best[2].restricted):
            best = (a, b, test)
    return best


def _components(X: np.ndarray, t: np.ndarray, a: Sequence[int], b: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The two parts of the additive fit on all rows (the intercept goes to the first)."""
    fa = features([X[:, j] for j in a])
    fb = features([X[:, j] for j in b])
    A = np.column_stack([np.ones(len(t)), fa, fb])
    coef, *_ = np.linalg.lstsq(A, t, rcond=None)
    na = fa.shape[1]
    return coef[0] + fa @ coef[1 : 1 + na], fb @ coef[1 + na :]


# --------------------------------------------------------------------------------------------
# Solving a (sub)problem
# --------------------------------------------------------------------------------------------


def _rel(pred: np.ndarray, t: np.ndarray) -> float:
    scale = float(np.std(t)) or float(np.mean(np.abs(t))) or 1.0
    with np.errstate(all="ignore"):
        value = float(np.sqrt(np.mean((pred - t) ** 2)) / scale)
    return value if np.isfinite(value) else np.inf


def _cx(node: Node) -> Node:
    return binary("mul", const(), node)


#: The transforms of a part's target that the leaves try, in order (:mod:`transforms`): all of
#: them for a part of one variable, the algebraic ones for a part of several.
_LEAF_TRANSFORMS = ("id", "inv", "sq", "invsq", "sqrt", "log", "exp")
_SEVERAL_VARIABLE_LEAF_TRANSFORMS = ("id", "inv", "sq", "invsq")


def _linear(V: np.ndarray, z: np.ndarray, intercept: bool) -> np.ndarray | None:
    A = np.column_stack([np.ones(len(z)), V]) if intercept else V
    if A.shape[1] == 0 or not np.all(np.isfinite(A)) or not np.all(np.isfinite(z)):
        return None
    try:
        with np.errstate(all="ignore"):
            coef, *_ = np.linalg.lstsq(A, z, rcond=None)
            fit = A @ coef
    except np.linalg.LinAlgError:
        return None
    return fit if np.all(np.isfinite(fit)) else None


def _leaves(names: Sequence[str], X: np.ndarray, t: np.ndarray, free_offset: bool = False,
            rows: int = 200, rational_leads: bool = False) -> list[Candidate]:
    """Sparse sums (with and without intercept) of transforms of ``t``, ratios of sums, and
    power laws, each with its values on the sample. With ``free_offset`` (a part of an
    additive split, defined only up to a constant) the intercept is fitted but left out of the
    tree and of its values, so the remainder of the target keeps its natural zero."""
    out: list[Candidate] = []
    fit_rows = slice(0, rows)
    sample = Sample(X[fit_rows], t[fit_rows])
    basis = _basis(sample, names, list(range(len(names))), 1500)
    if basis is None:
        return out
    index = {term: k for k, term in enumerate(basis.terms)}
    kinds = _LEAF_TRANSFORMS if len(names) == 1 else _SEVERAL_VARIABLE_LEAF_TRANSFORMS
    for kind in kinds:
        transform = TRANSFORMS[kind]
        if not transform.usable(t):
            continue
        with np.errstate(all="ignore"):
            z = transform.forward(t)
        if not np.all(np.isfinite(z)) or np.std(z) == 0:
            continue
        sums = sparse_sums(basis, z[fit_rows], max_terms=3)
        picked = sums[:3]
        if sums and sums[0][0] > 1e-7:
            # Nothing exact (an estimated part): also the best sum of two and of three terms.
            picked += [s for s in best_of_each_size(sums) if len(s[1]) > 1]
        for _, terms in picked:
            cols = [index[term] for term in terms]
            with np.errstate(all="ignore"):
                V = np.column_stack([_term_values(term, names, X) for term in terms]) if len(t) > rows else basis.V[:, cols]
            for intercept in (False, True):
                if kind != "id" and len(terms) == 1 and not intercept:
                    continue  # sqrt(x**2), 1/(1/x): the plain sum has it, simpler
                fit = _linear(V, z, intercept)
                if fit is None:
                    continue
                A = np.column_stack([np.ones(len(z)), V]) if intercept else V
                coef, *_ = np.linalg.lstsq(A, z, rcond=None)
                if kind == "id" and free_offset and intercept:
                    # The part's own values: the fit without its intercept.
                    body = total([_cx(term) for term in terms])
                    out.append(Candidate(body, V @ coef[1:], _rel(fit, t), True))
                    continue
                body, has_scale = _body(terms, float(coef[1 if intercept else 0]), intercept, kind)
                with np.errstate(all="ignore"):
                    pred = transform.inverse_values(fit)
                out.append(Candidate(transform.inverse(body), pred, _rel(pred, t), has_scale))
        if kind == "id":
            leads: list[tuple[np.ndarray, Node]] = [(np.ones(len(sample.y)), num(1.0))]
            if rational_leads and len(names) > 1:
                leads += [(sample.X[:, j], var(name)) for j, name in enumerate(names)]
            for s0, s0_node in leads:
                for err, tree in _rational(basis, z[fit_rows], s0, s0_node)[:1]:
                    out.append(_near_exact(tree, t, err))
    law = power_law(sample, names)
    if law is not None and law.exponents:
        for step in (0.5, 1.0):
            exps = law.rounded(step)
            shape = np.ones(len(t))
            with np.errstate(all="ignore"):
                for j, name in enumerate(names):
                    shape = shape * X[:, j] ** exps.get(name, 0.0)
            fit = _linear(shape[:, None], t, False)
            if fit is not None:
                out.append(Candidate(_monomial(exps), fit, _rel(fit, t), True))
    return out


def _body(terms: Sequence[Node], lead: float, intercept: bool, kind: str) -> tuple[Node, bool]:
    """The sum a transform is inverted around, without a redundant constant, and whether the
    inverted tree keeps a free scale. ``1/(c*x + c)`` carries its scale twice over once it
    multiplies another part (``c*y/(c*x + c)`` fits no better than ``c*y/(x + c)`` but its
    constants no longer snap), so inside ``1/.``, ``sqrt(.)``, ``(.)**-0.5`` and ``log(.)`` the first
    term keeps the coefficient 1 (its sign from the fit) and the scale comes from outside;
    inside ``exp(.)`` the intercept is the scale; inside ``log(.)`` (``c*log(x + c)``) a
    factor would only shift the sum's constant."""
    if kind in ("inv", "sq", "invsq", "exp") and terms:
        first = terms[0] if lead > 0 else unary("neg", terms[0])
        return total([first] + [_cx(t) for t in terms[1:]] + ([const()] if intercept else [])), False
    if kind == "log" and intercept:
        return total([_cx(t) for t in terms]), False
    return total([_cx(t) for t in terms] + ([const()] if intercept else [])), kind != "exp"


def _term_values(term: Node, names: Sequence[str], X: np.ndarray) -> np.ndarray:
    return evaluate(term, names, X, ())


def evaluate(node: Node, names: Sequence[str], X: np.ndarray, constants: Sequence[float]) -> np.ndarray:
    """Values of ``node`` at the rows of ``X``; free constants take ``constants`` in reading order
    (the order :func:`~sr_dist.sr.evolve.tree.render` names them)."""
    index = {n: j for j, n in enumerate(names)}
    values = iter(constants)

    def go(n: Node) -> np.ndarray:
        if n.op == "var":
            return X[:, index[n.name or ""]]
        if n.op == "const":
            return np.full(X.shape[0], float(next(values)))
        if n.op == "num":
            return np.full(X.shape[0], float(n.value or 0.0))
        args = [go(a) for a in n.args]
        return _OPS[n.op](*args)

    with np.errstate(all="ignore"):
        return go(node)


_OPS: dict[str, Callable[..., np.ndarray]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "neg": np.negative, "sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp, "log": np.log,
    "sqrt": np.sqrt, "abs": np.abs, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh,
    "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
}


def _denominator_ok(N: np.ndarray, w: np.ndarray, lhs: np.ndarray, lead: np.ndarray, s: np.ndarray) -> bool:
    """Whether ``lead + b*s`` (``b`` from the linear fit) keeps one sign, well away from 0."""
    A = np.column_stack([np.ones(len(lhs)), N, w])
    try:
        coef, *_ = np.linalg.lstsq(A, lhs, rcond=None)
    except np.linalg.LinAlgError:
        return False
    den = lead + coef[-1] * s
    return bool(np.all(np.isfinite(den)) and np.min(np.abs(den)) > 0.05 * np.max(np.abs(den))
                and (np.all(den > 0) or np.all(den < 0)))


def _fit_rel(V: np.ndarray, t: np.ndarray) -> float:
    fit = _linear(V, t, True)
    return np.inf if fit is None else _rel(fit, t)


def _near_exact(tree: Node, t: np.ndarray, error: float) -> Candidate:
    """A ratio of sums fits its data near-exactly (the seed library keeps only those), so its
    values are taken to be the data: no nonlinear refit of its many constants is needed."""
    return Candidate(tree, t.copy(), max(error, 1e-12), True)


def substitute(node: Node, name: str, expr: Node) -> Node:
    """``node`` with every variable ``name`` replaced by ``expr``."""
    if node.op == "var" and node.name == name:
        return expr
    if not node.args:
        return node
    return Node(node.op, tuple(substitute(a, name, expr) for a in node.args), node.value, node.name)


def rank(c: Candidate) -> float:
    """Decades of error plus a price per constant and per node: on a part's estimated data
    (accurate to about 1e-5) an over-fitted ratio of sums must not beat the simple truth."""
    return float(np.log10(max(c.error, 1e-12)) + 0.1 * count_constants(c.tree) + 0.01 * size(c.tree))


def _best(cands: Sequence[Candidate], k: int = KEEP) -> list[Candidate]:
    out: list[Candidate] = []
    seen: set[Node] = set()
    for c in sorted(cands, key=rank):
        if c.tree not in seen and np.isfinite(c.error):
            seen.add(c.tree)
            out.append(c)
        if len(out) >= k:
            break
    return out


def _combine_sum(t: np.ndarray, a: Candidate, b: Candidate) -> Candidate:
    fit = _linear(np.column_stack([a.pred, b.pred]), t, True)
    error = np.inf if fit is None else _rel(fit, t)
    terms = [p.tree if p.scaled else _cx(p.tree) for p in (a, b)] + [const()]
    return Candidate(total(terms), fit if fit is not None else a.pred, error, True)


def _combine_product(t: np.ndarray, a: Candidate, b: Candidate) -> Candidate:
    fit = _linear((a.pred * b.pred)[:, None], t, False)
    error = np.inf if fit is None else _rel(fit, t)
    factors = [a.tree, b.tree] if (a.scaled or b.scaled) else [const(), a.tree, b.tree]
    return Candidate(product(factors), fit if fit is not None else a.pred, error, True)


@dataclass(frozen=True)
class _Problem:
    names: tuple[str, ...]
    X: np.ndarray
    t: np.ndarray

    def columns(self, idx: Sequence[int]) -> _Problem:
        return _Problem(tuple(self.names[i] for i in idx), self.X[:, list(idx)], self.t)

    def with_target(self, t: np.ndarray) -> _Problem:
        return _Problem(self.names, self.X, t)


def _solve_parts(p: _Problem, a: Sequence[int], b: Sequence[int], comp_a: np.ndarray, comp_b: np.ndarray,
                 multiplicative: bool, depth: int, budget: Budget, logged: bool = True) -> list[Candidate]:
    """Both orders of backfitting: solve one part from its estimated component, then the
    other from the exact remainder of the target given the first part's best formula. The
    components of a product are logs (from the split of ``log|t|``) unless ``logged`` is
    False (from :func:`product_test`)."""
    out: list[Candidate] = []
    combine = _combine_product if multiplicative else _combine_sum
    for first, second, comp in ((a, b, comp_a), (b, a, comp_b)):
        est = np.exp(comp) if multiplicative and logged else comp
        firsts = solve(p.columns(first).names, p.X[:, list(first)], est, depth - 1,
                       free_offset=not multiplicative, budget=budget)
        if not firsts:
            continue
        f0 = firsts[0]
        with np.errstate(all="ignore"):
            if multiplicative:
                rest = p.t / f0.pred
            else:
                # The part was fitted to its own component, so it has the right scale (a
                # regression of the target on it would be biased by the other part).
                rest = p.t - f0.pred
        if not np.all(np.isfinite(rest)):
            continue
        seconds = solve(p.columns(second).names, p.X[:, list(second)], rest, depth - 1, budget=budget)
        for fa, fb in itertools.product(firsts[:2], seconds[:2]):
            out.append(combine(p.t, fa, fb))
    return out


def _sum_terms(tree: Node) -> list[Node | None] | None:
    """The terms of a sum of ``c*term`` and ``c`` (None stands for the constant), or None when
    ``tree`` is not such a sum (a constant may only stand alone)."""
    parts: list[Node] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if node.op == "add":
            stack.extend(reversed(node.args))
        else:
            parts.append(node)
    out: list[Node | None] = []
    for part in parts:
        if part.op == "const":
            out.append(None)
        elif part.op == "mul" and part.args[0].op == "const" and count_constants(part.args[1]) == 0:
            out.append(part.args[1])
        else:
            return None
    return out


def _solve_affine(p: _Problem, j: int, depth: int, budget: Budget) -> list[Candidate]:
    """``t = A(others) + x_j * B(others)``: the slope ``B`` solved from its estimate, then ``A``
    from the exact remainder, and the other way round; each combination refitted as a sum."""
    others = [k for k in range(p.X.shape[1]) if k != j]
    sub = p.columns(others)
    xj = p.X[:, j]
    comp_a, comp_b = _affine_components(p.X, p.t, j)
    lead = var(p.names[j])
    out: list[Candidate] = []

    def combine(a: Candidate, b: Candidate) -> Candidate:
        ta, tb = _sum_terms(a.tree), _sum_terms(b.tree)
        if ta is not None and tb is not None:
            # Both parts are sums of terms: fit every coefficient at once on the real target
            # (each part was fitted to an estimate, so their own coefficients are not exact).
            ta = [term for term in ta if term is not None]  # the sum's own constant covers it
            cols = [_term_values(term, sub.names, sub.X) for term in ta]
            cols += [xj * (np.ones(len(xj)) if term is None else _term_values(term, sub.names, sub.X))
                     for term in tb]
            fit = _linear(np.column_stack(cols), p.t, True)
            if fit is not None:
                slope = total([const() if term is None else _cx(term) for term in tb])
                tree = total([*(_cx(term) for term in ta), binary("mul", lead, slope), const()])
                return Candidate(tree, fit, _rel(fit, p.t), True)
        fit = _linear(np.column_stack([a.pred, xj * b.pred]), p.t, True)
        error = np.inf if fit is None else _rel(fit, p.t)
        slope = binary("mul", lead, b.tree if b.scaled else _cx(b.tree))
        tree = total([a.tree if a.scaled else _cx(a.tree), slope, const()])
        return Candidate(tree, fit if fit is not None else a.pred, error, True)

    slopes = solve(sub.names, sub.X, comp_b, depth - 1, budget=budget)
    if slopes:
        with np.errstate(all="ignore"):
            rest = p.t - xj * slopes[0].pred
        if np.all(np.isfinite(rest)):
            for a, b in itertools.product(solve(sub.names, sub.X, rest, depth - 1, free_offset=True,
                                                budget=budget)[:2], slopes[:2]):
                out.append(combine(a, b))
    intercepts = solve(sub.names, sub.X, comp_a, depth - 1, free_offset=True, budget=budget)
    if intercepts:
        with np.errstate(all="ignore"):
            slope = (p.t - intercepts[0].pred) / xj
        if np.all(np.isfinite(slope)):
            for a, b in itertools.product(intercepts[:2], solve(sub.names, sub.X, slope, depth - 1,
                                                                budget=budget)[:2]):
                out.append(combine(a, b))
    return out


class Budget:
    """How many more sub-problems the recursion may solve: a count, not a clock, so the
    library stays deterministic; the tests run in a fixed order, so what is cut is the last."""

    def __init__(self, solves: int) -> None:
        self.solves = solves

    def take(self) -> bool:
        self.solves -= 1
        return self.solves >= 0


#: Sub-problems one decomposition may solve (each is a few sparse fits; about 0.1 s here).
SOLVES = 24


def solve(names: Sequence[str], X: np.ndarray, t: np.ndarray, depth: int = 3,
          free_offset: bool = False, leaves: bool = True, budget: Budget | None = None) -> list[Candidate]:
    """The best few candidates for ``t`` as a function of the columns ``names`` of ``X``:
    leaves, then (``depth`` > 0) additive and multiplicative splits, splits of ``t**2`` and
    ``1/t``, and pair symmetries, each solved recursively. Ranked by relative error on ``t``.
    ``leaves=False`` skips the plain fits (the seed library already has them for the whole
    problem) except the ratios of sums led by a variable."""
    p = _Problem(tuple(names), np.asarray(X, dtype=float), np.asarray(t, dtype=float))
    budget = Budget(SOLVES) if budget is None else budget
    if not np.all(np.isfinite(p.t)) or np.std(p.t) == 0 or len(p.t) < 16 or not budget.take():
        return []
    cands = _leaves(p.names, p.X, p.t, free_offset) if leaves else _variable_led(p)
    best = _best(cands, 1)
    if depth <= 0 or p.X.shape[1] < 2 or (leaves and best and best[0].error < 1e-9):
        return _best(cands)
    n = p.X.shape[1]
    targets: list[tuple[str, np.ndarray]] = [("id", p.t)]
    log_t = _log_target(p.t)
    if log_t is not None:
        targets.append(("log", log_t))
    if n <= 4:
        for kind in ("sq", "inv"):
            if TRANSFORMS[kind].usable(p.t):
                with np.errstate(all="ignore"):
                    targets.append((kind, TRANSFORMS[kind].forward(p.t)))
    log_split = False
    for kind, z in targets:
        split = best_split(p.X, z)
        if split is None:
            continue
        log_split = log_split or kind == "log"
        comp_a, comp_b = _components(p.X, z, split[0], split[1])
        if kind == "log":
            # The split of log|t| names the groups; the rank-one fit of t itself over them
            # estimates the factors far better (2.9e-12 against 1e-3 for
            # ``(exp(x0) - 2.2*x2)*x3*(2.9 + x1)``), and a part is solved from its estimate.
            verdict, fac_a, fac_b = product_test(p.X, p.t, split[0], split[1])
            if verdict.accepted and verdict.restricted < split[2].restricted:
                cands += _solve_parts(p, split[0], split[1], fac_a, fac_b, True, depth, budget, logged=False)
                continue
        if kind in ("id", "log"):
            cands += _solve_parts(p, split[0], split[1], comp_a, comp_b, kind == "log", depth, budget)
            continue
        transform = TRANSFORMS[kind]
        for c in _best(_solve_parts(p.with_target(z), split[0], split[1], comp_a, comp_b, False, depth, budget), 2):
            with np.errstate(all="ignore"):
                pred = transform.inverse_values(c.pred)
            cands.append(Candidate(transform.inverse(c.tree), pred, _rel(pred, p.t), True))
    # Where t changes sign; and for the whole problem also where it keeps one but the
    # surrogate of log|t| was too coarse to accept a split (``log(exp(x0) - 2.2*x2)``).
    product = best_product(p.X, p.t, any_sign=not leaves) if log_t is None or not (leaves or log_split) else None
    if product is not None:
        a, b, comp_a, comp_b = product
        cands += _solve_parts(p, a, b, comp_a, comp_b, True, depth, budget, logged=False)
    if depth >= 2 and not any(c.error < 1e-6 for c in cands):
        # Only where the splits found nothing near-exact: each level of it solves four parts.
        affine = best_affine(p.X, p.t)
        if affine is not None:
            cands += _solve_affine(p, affine[0], depth, budget)
    for i, j, kind, _ in find_symmetries(p.X, p.t)[: 2 if depth >= 3 else 1]:
        with np.errstate(all="ignore"):
            u = SYMMETRIES[kind](p.X[:, i], p.X[:, j])
        name = f"_u{depth}"
        keep = [k for k in range(n) if k not in (i, j)]
        reduced_names = (name, *(p.names[k] for k in keep))
        reduced = np.column_stack([u, *(p.X[:, k] for k in keep)])
        expr = binary(kind, var(p.names[i]), var(p.names[j]))
        for c in solve(reduced_names, reduced, p.t, depth - 1, free_offset, budget=budget):
            cands.append(Candidate(substitute(c.tree, name, expr), c.pred, c.error, c.scaled))
    if n <= CHANGE_VARS and not any(c.error < 1e-9 for c in cands):
        cands += _changed_variables(p, depth, budget)
    return _best(cands)


#: Most variables for which the changes of variable are tried (each ordered pair and kind is a
#: few additive tests: 20 tests for two variables, 180 for three).
CHANGE_VARS = 3
#: The new variable that replaces ``x_j`` beside the kept ``x_i``: (operation, operands swapped),
#: ``x_j - x_i``, ``x_j + x_i``, ``x_j * x_i``, ``x_j / x_i``, ``x_i / x_j``.
CHANGES: tuple[tuple[str, bool], ...] = (("sub", True), ("add", True), ("mul", True), ("div", True), ("div", False))


def _changed_variables(p: _Problem, depth: int, budget: Budget) -> list[Candidate]:
    """Splits after a change of variable: keep ``x_i``, replace ``x_j`` by ``u = kind(x_i, x_j)``
    and test ``t`` and ``log|t|`` for a split with ``x_i`` and ``u`` on different sides. What a
    symmetry cannot see: ``exp(-(x/y)**2/2)/y`` depends on ``y`` beyond ``x/y``, but it is
    ``h(y) * g(x/y)``; ``(t - u*x)/sqrt(1 - u**2)`` is ``(t/x - u) * h(u)`` in ``(u, t/x - u)``."""
    out: list[Candidate] = []
    n = p.X.shape[1]
    log_t = _log_target(p.t)
    targets = [("id", p.t)] + ([("log", log_t)] if log_t is not None else [])
    name = f"_w{depth}"
    for i, j in itertools.permutations(range(n), 2):
        for kind, swap in CHANGES:
            a, b = (j, i) if swap else (i, j)
            with np.errstate(all="ignore"):
                u = SYMMETRIES[kind](p.X[:, a], p.X[:, b])
            if not np.all(np.isfinite(u)) or np.std(u) == 0:
                continue
            X = p.X.copy()
            X[:, j] = u
            names = tuple(name if k == j else p.names[k] for k in range(n))
            expr = binary(kind, var(p.names[a]), var(p.names[b]))
            for target_kind, z in targets:
                split = best_split(X, z)
                if split is None or (i in split[0]) == (j in split[0]):
                    continue
                comp_a, comp_b = _components(X, z, split[0], split[1])
                changed = _Problem(names, X, p.t)
                for c in _solve_parts(changed, split[0], split[1], comp_a, comp_b, target_kind == "log", depth, budget):
                    out.append(Candidate(substitute(c.tree, name, expr), c.pred, c.error, c.scaled))
    return out


def _variable_led(p: _Problem, rows: int = 200) -> list[Candidate]:
    """Ratios of sums whose denominator starts with a variable, ``(a*x + b*y)/(x + y)``: the
    seed library's ratios all start their denominator with 1. Linear in the unknowns:
    ``t*x_j = sum(a_k t_k) - b*t*s`` with numerator terms of up to two factors and one
    denominator term ``s`` (``y``, ``y**2``, ``1/y``, ``sqrt(y)`` of another variable). Each
    ``s`` is forced into the fit and the numerator is found by pursuit on what it leaves:
    a free pursuit picks denominator proxies first and misses the numerator."""
    if p.X.shape[1] > 4 or p.X.shape[1] < 2:
        return []
    sample = Sample(p.X[:rows], p.t[:rows])
    basis = _basis(sample, p.names, list(range(len(p.names))), 1500)
    out: list[Candidate] = []
    if basis is None:
        return out
    low = np.flatnonzero(basis.order <= 2)
    y = sample.y
    for j, name in enumerate(p.names):
        lead = var(name)
        with np.errstate(all="ignore"):
            lhs = y * sample.X[:, j]
        for k, other in enumerate(p.names):
            if k == j:
                continue
            x = sample.X[:, k]
            node = var(other)
            for s_values, s_node in ((x, node), (x**2, binary("pow", node, num(2.0))),
                                     (1 / x, binary("div", num(1.0), node)), (np.sqrt(np.abs(x)), unary("sqrt", node))):
                w = -y * s_values
                if not np.all(np.isfinite(w)) or np.std(w) == 0:
                    continue
                q = (w - w.mean()) / np.linalg.norm(w - w.mean())
                r = lhs - lhs.mean()
                r = r - q * (q @ r)
                Z = basis.Z[:, low] - np.outer(q, q @ basis.Z[:, low])
                found = _pursuit(Z, r, 3, 3, 6)
                best = sorted(found.items(), key=lambda kv: (kv[1] > 1e-7, len(kv[0]), kv[1]))[:1]
                for support, err in best:
                    # The denominator term must matter (without it the ratio is a sum over
                    # x_j) and must not vanish on the sample (a removable pole, x**2-y**2 over
                    # x-y, is a sum in disguise).
                    if err < 1e-6 and _fit_rel(basis.V[:, low[list(support)]] / sample.X[:, [j]], y) > 1e-4 \
                            and _denominator_ok(basis.V[:, low[list(support)]], w, lhs, sample.X[:, j], s_values):
                        numerator = total([_cx(basis.terms[int(low[i])]) for i in support])
                        denominator = binary("add", lead, _cx(s_node))
                        out.append(_near_exact(binary("div", numerator, denominator), p.t, err))
    return out


def decomposition_seeds(sample: Sample, variables: Sequence[str], max_rows: int = 400,
                        depth: int = 3) -> list[tuple[float, Node]]:
    """``(relative error on the sample, tree)`` for the best candidates the decomposition finds
    (leaves of the whole problem included), best first. Deterministic; training rows only."""
    rows = min(max_rows, len(sample.y))
    X, y = sample.X[:rows], sample.y[:rows]
    if X.shape[1] > 6 or rows < 32:
        return []
    with np.errstate(all="ignore"):
        found = solve(tuple(variables), X, y, depth, leaves=False)
    return [(c.error, c.tree if c.scaled else _cx(c.tree)) for c in found]
