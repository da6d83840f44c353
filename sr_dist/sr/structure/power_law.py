"""Power laws fitted robustly in log-log space: the commonest shape of a physical law.

``log|y| ~ b + sum(a_j log x_j)`` over the strictly positive variables, fitted by iteratively
reweighted least squares with Huber's weights (Huber, "Robust estimation of a location
parameter", 1964; tuning constant 1.345 and the MAD scale, as in Holland & Welsch, 1977), so a
few rows far off the law (a factor that is not a power) do not bend the exponents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sr_dist.sr.structure.sample import Sample

__all__ = ["PowerLaw", "huber_lstsq", "power_law"]


@dataclass(frozen=True)
class PowerLaw:
    """``log|y| ~ b + sum(a_j log x_j)`` over the positive variables; ``rmse`` of the residual."""

    exponents: Mapping[str, float]
    rmse: float
    #: Per variable: the share of the log-log residual that a few non-power terms of that
    #: variable explain (near 0 when the variable enters as a pure power).
    gains: Mapping[str, float]

    def rounded(self, step: float) -> dict[str, float]:
        return {k: round(a / step) * step for k, a in self.exponents.items()}

    def misfit(self, name: str) -> float:
        """How far the variable's exponent is from a half-integer (0 for clean power laws)."""
        a = self.exponents.get(name)
        return 1.0 if a is None else abs(a - round(a * 2) / 2)

    def outer_sets(self) -> list[dict[str, float]]:
        """Candidate power-law factors: sets of variables that look like pure powers, with their
        exponents rounded to halves, loosest evidence last; at most four distinct sets."""
        half = self.rounded(0.5)
        looks_pure = {k: self.gains.get(k, 1.0) < 0.03 for k in self.exponents}
        strict = {k: half[k] for k in self.exponents if self.misfit(k) < 0.1 and looks_pure[k]}
        relaxed = {k: half[k] for k in self.exponents if self.misfit(k) < 0.16 and looks_pure[k]}
        integer = {k: float(round(a)) for k, a in self.exponents.items()
                   if abs(a - round(a)) < 0.2 and round(a) != 0 and looks_pure[k]}
        singles = [{k: half[k]} for k in sorted(self.exponents, key=lambda k: (self.misfit(k), k))
                   if self.misfit(k) < 0.2 and half[k] != 0 and looks_pure[k]]
        out: list[dict[str, float]] = []
        for cand in [strict, relaxed, integer, *singles[:2]]:
            cand = {k: a for k, a in cand.items() if a != 0}
            if cand and cand not in out:
                out.append(cand)
        return out[:4]


def huber_lstsq(A: np.ndarray, b: np.ndarray, iterations: int = 5) -> tuple[np.ndarray, np.ndarray]:
    w = np.ones_like(b)
    coef = np.zeros(A.shape[1])
    for _ in range(iterations):
        sw = np.sqrt(w)
        coef, *_ = np.linalg.lstsq(A * sw[:, None], b * sw, rcond=None)
        r = b - A @ coef
        scale = 1.4826 * np.median(np.abs(r - np.median(r))) + 1e-12
        k = 1.345 * scale
        w = np.where(np.abs(r) <= k, 1.0, k / np.maximum(np.abs(r), 1e-300))
    return coef, b - A @ coef


def power_law(sample: Sample, variables: Sequence[str]) -> PowerLaw | None:
    """Robust log-log fit of ``|y|`` on the strictly positive variables, or None if impossible."""
    nonzero = sample.y != 0
    if nonzero.sum() < 8:
        return None
    X, y = sample.X[nonzero], sample.y[nonzero]
    positive = [j for j in range(X.shape[1]) if np.all(X[:, j] > 0) and np.ptp(X[:, j]) > 0]
    if not positive:
        return None
    A = np.column_stack([np.ones(len(y))] + [np.log(X[:, j]) for j in positive])
    target = np.log(np.abs(y))
    coef, resid = huber_lstsq(A, target)
    exps = {variables[j]: float(coef[i + 1]) for i, j in enumerate(positive)}
    rss = float(np.sum(resid**2))
    gains: dict[str, float] = {}
    for j in positive:
        x = X[:, j]
        extended = np.column_stack([A, x, x**2, 1 / x, np.sin(x), np.cos(x)])
        _, r = huber_lstsq(extended, target)
        gains[variables[j]] = float(1 - np.sum(r**2) / rss) if rss > 0 else 0.0
    return PowerLaw(exps, float(np.sqrt(np.mean(resid**2))), gains)
