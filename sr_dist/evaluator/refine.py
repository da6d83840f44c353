"""A float64 refit of near-exact fits: the last digits that a float32 fit cannot give.

The batched fit runs in the working dtype (float32 by default: twice the throughput, and what a
GPU is fast at). Its constants are then good to a few parts in a million, and its NMSE bottoms
out near 1e-12 to 1e-14 where float32 rounding, not the formula, is the error. For a formula
that is (nearly) the law that matters: ``sqrt((c0*v + c1*c)/(c2*v + c))`` came back with
``c0 = 1.0000325``, which snaps to no closed form, and a long formula whose extra terms soak up
float32 rounding can look better than the simple law it contains. So a fit whose training NMSE
is already below :data:`REFINE_BELOW` is refitted from its constants by Levenberg-Marquardt in
float64 on all training rows (MINPACK's ``lmder`` through :func:`scipy.optimize.least_squares`,
Moré 1978), and its metrics are recomputed in float64 (only those, for a formula without
constants), so that an exact law's NMSE is float64's and a stop rule can tell it from an
approximant's. Such fits are rare (the laws a search
is closing in on), so the host-side cost stays small; every other fit is untouched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sr_dist.formula import Node, evaluate_numpy

__all__ = ["REFINE_BELOW", "REFINE_ABOVE", "needs_refit", "refit_float64", "split_sse"]

#: Training NMSE under which a fit is refitted in float64 (a worse fit is not a law whose last
#: digits matter).
REFINE_BELOW = 1e-7
#: ... and above which it is left alone (already exact to float64 rounding: nothing to gain).
REFINE_ABOVE = 1e-24
#: Function evaluations the float64 refit may spend, per constant.
EVALS_PER_CONSTANT = 40


def needs_refit(train_nmse: float | None) -> bool:
    """Whether a fit is near-exact but not yet exact to float64 rounding. A formula without
    constants has nothing to refit, but its metrics are recomputed in float64 all the same: an
    exact law then reads near 1e-32 rather than float32's 1e-14, as a refitted one does."""
    return (train_nmse is not None and math.isfinite(train_nmse)
            and REFINE_ABOVE < train_nmse < REFINE_BELOW)


def _predict(tree: Node, names: Sequence[str], c: np.ndarray, X: np.ndarray) -> np.ndarray:
    return np.asarray(evaluate_numpy(tree, X, names, {f"c{j}": float(v) for j, v in enumerate(c)}),
                      dtype=np.float64)


def refit_float64(tree: Node, names: Sequence[str], constants: Sequence[float] | np.ndarray, X: np.ndarray,
                  y: np.ndarray) -> np.ndarray | None:
    """Constants of ``tree`` (a canonical tree, constants ``c0, c1, ...``) refitted in float64
    by least squares on ``(X, y)``, starting from ``constants``; None when the refit fails or
    does not lower the sum of squares."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    c0 = np.asarray(constants, dtype=np.float64)
    if c0.size == 0 or not np.all(np.isfinite(c0)) or len(y) <= c0.size:
        return None

    def residual(c: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            r = _predict(tree, names, c, X) - y
        return np.where(np.isfinite(r), r, 1e150)

    start = residual(c0)
    before = float(start @ start)
    if not math.isfinite(before):
        return None
    try:
        with np.errstate(all="ignore"):
            fit = least_squares(residual, c0, method="lm", xtol=1e-15, ftol=1e-15, gtol=1e-15,
                                max_nfev=EVALS_PER_CONSTANT * (c0.size + 1))
    except (ValueError, FloatingPointError, OverflowError):
        return None
    c = np.asarray(fit.x, dtype=np.float64)
    after = residual(c)
    if not np.all(np.isfinite(c)) or not float(after @ after) < before:
        return None
    return c


def split_sse(tree: Node, names: Sequence[str], constants: Sequence[float] | np.ndarray,
              splits: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Per split, the float64 sum of squared errors and the count of non-finite predictions
    (what the batched fit reports), for ``splits`` = ``[(X, y), ...]``."""
    c = np.asarray(constants, dtype=np.float64)
    sse = np.zeros(len(splits))
    bad = np.zeros(len(splits), dtype=np.int64)
    for s, (X, y) in enumerate(splits):
        y = np.asarray(y, dtype=np.float64).ravel()
        if len(y) == 0:
            continue
        with np.errstate(all="ignore"):
            pred = _predict(tree, names, c, np.asarray(X, dtype=np.float64))
        finite = np.isfinite(pred)
        bad[s] = int((~finite).sum())
        r = np.where(finite, pred - y, 0.0)
        sse[s] = float(r @ r)
    return sse, bad
