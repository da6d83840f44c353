"""A product of two groups' functions where the target changes sign: a rank-one surrogate.

``log|t|`` is not there to turn the product into a sum, so the restricted model is
``(Fa u) * (Fb v)`` in orthonormal bases of the groups' surrogate features, fitted by
alternating least squares (as for a rank-one matrix) and then Gauss-Newton on ``(u, v)``
together (minimum-norm steps: the split of the scale between the factors is free).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sr_dist.sr.structure.separability import bipartitions, log_target
from sr_dist.sr.structure.surrogate import TOLERANCE, StructureTest, features, held_out_error, structure_verdict

__all__ = ["PRODUCT_NEWTON_STEPS", "PRODUCT_SWEEPS", "best_product", "factor_features", "product_test", "rank_one_fit"]


#: Alternating least-squares sweeps, then Gauss-Newton steps, of the rank-one model of
#: :func:`product_test` (alternating sweeps alone creep: 30 leave 1e-3 where 200 reach 1e-14).
PRODUCT_SWEEPS = 4


PRODUCT_NEWTON_STEPS = 15


def rank_one_fit(Fa: np.ndarray, Fb: np.ndarray, t: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
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


def factor_features(X: np.ndarray, group: Sequence[int]) -> np.ndarray:
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
    # and the Gauss-Newton steps of :func:`rank_one_fit` wander in such a basis.
    U, S, _ = np.linalg.svd(F, full_matrices=False)
    out: np.ndarray = U[:, S > 1e-10 * S[0]]
    return out


def product_test(X: np.ndarray, t: np.ndarray, group_a: Sequence[int], group_b: Sequence[int],
                 tolerance: float = TOLERANCE) -> tuple[StructureTest, np.ndarray, np.ndarray]:
    """Is ``t = g(X[:, A]) * h(X[:, B])`` where ``t`` changes sign (so ``log|t|`` is not there
    to make the product a sum)? The restricted model is rank one, ``(Fa u) * (Fb v)`` in the
    groups' surrogate features (each with a constant), fitted by ``rank_one_fit`` (a bilinear
    start, alternating least squares, then Gauss-Newton); the unrestricted one is the surrogate
    of all the variables. Returns the verdict and the two factors' values on every row (their
    scales are arbitrary, their product is the fit)."""
    fail = StructureTest(np.inf, np.inf, False), np.ones(len(t)), np.ones(len(t))
    if not np.all(np.isfinite(t)) or np.std(t) == 0:
        return fail
    Fa, Fb = factor_features(X, group_a), factor_features(X, group_b)
    test = np.arange(len(t)) % 4 == 0
    fitted = rank_one_fit(Fa, Fb, t, ~test)
    if fitted is None:
        return fail
    scale = float(np.std(t))
    with np.errstate(all="ignore"):
        r = t[test] - (Fa[test] @ fitted[0]) * (Fb[test] @ fitted[1])
        restricted = float(np.sqrt(np.mean(r**2)) / scale)
    restricted = restricted if np.isfinite(restricted) else np.inf
    unrestricted = held_out_error(features([X[:, k] for k in range(X.shape[1])]), t)
    verdict = structure_verdict(restricted, unrestricted, tolerance)
    if not verdict.accepted:
        return verdict, fail[1], fail[2]
    whole = rank_one_fit(Fa, Fb, t, np.ones(len(t), dtype=bool)) or fitted
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
    if n < 2 or n > max_vars or (log_target(t) is not None and not any_sign) \
            or not np.all(np.isfinite(t)) or np.std(t) == 0:
        return None
    best = None
    for a, b in bipartitions(n):
        verdict, comp_a, comp_b = product_test(X, t, a, b)
        if verdict.accepted and (best is None or verdict.restricted < best[0].restricted):
            best = (verdict, a, b, comp_a, comp_b)
    return None if best is None else best[1:]
