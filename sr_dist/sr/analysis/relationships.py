"""How the target depends on each variable alone: correlations, mutual information,
monotonicity and the best of a few one-variable shapes.

The shapes (each with an additive offset, every parameter fitted by least squares, the one
nonlinear parameter by a grid search): ``linear`` a*x + b, ``log`` a*log(x) + b, ``power``
a*x**p + b, ``exp`` a*exp(k*x) + b and ``periodic`` A*sin(w*x + phi) + b. A grid rather than a
nonlinear optimiser keeps every fit a fixed, small amount of linear algebra, with no starting
point to guess and no failure to converge.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sr_dist.sr.analysis._common import nmse, number_text, pearson, spearman

__all__ = ["SHAPES", "ShapeFit", "best_shape", "fit_shapes", "mutual_information", "monotonicity",
           "variable_relationships"]

#: The shapes tried, simplest first, with their parameter counts.
SHAPES: dict[str, int] = {"linear": 2, "log": 2, "power": 3, "exp": 3, "periodic": 4}
#: NMSE charged per parameter when choosing the best shape, so a shape with more parameters
#: must fit visibly better to win (a sine can always bend a little closer to noise).
_PARAMETER_COST = 0.005
_POWERS = np.round(np.concatenate([np.arange(-3.0, 0.0, 0.05), np.arange(0.05, 3.0001, 0.05)]), 2)
#: Exponential rates, as multiples of 1/(range of x).
_RATES = np.concatenate([np.linspace(-8.0, -0.25, 32), np.linspace(0.25, 8.0, 32)])
#: Periods of the sine, as fractions of the range of x (from a tenth of it to four times it).
_PERIODS = np.geomspace(0.1, 4.0, 96)
#: Bins (equal-frequency) of the binned mean used for monotonicity.
_MONOTONE_BINS = 10


@dataclass(frozen=True)
class ShapeFit:
    """One fitted one-variable shape: its NMSE against the target and its formula."""

    shape: str
    train_nmse: float
    formula: str

    def as_dict(self) -> dict[str, Any]:
        return {"shape": self.shape, "train_nmse": self.train_nmse, "formula": self.formula}


def _line(t: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least squares ``y = a*t + b``: (a, b, NMSE); a constant ``t`` fits the mean."""
    tc = t - t.mean()
    denominator = float(tc @ tc)
    a = float(tc @ (y - y.mean())) / denominator if denominator > 0 else 0.0
    b = float(y.mean() - a * t.mean())
    return a, b, nmse(y, a * t + b)


def _grid(columns: np.ndarray, y: np.ndarray) -> tuple[int, float, float, float]:
    """The column of ``columns`` (n x k) that best fits ``y = a*t + b``: (index, a, b, NMSE)."""
    centred = columns - columns.mean(axis=0)
    denominator = np.einsum("ij,ij->j", centred, centred)
    yc = y - y.mean()
    with np.errstate(all="ignore"):
        slope = np.where(denominator > 0, (centred.T @ yc) / np.where(denominator > 0, denominator, 1.0), 0.0)
        sse = float(yc @ yc) - slope * (centred.T @ yc)
    sse = np.where(np.isfinite(sse) & np.all(np.isfinite(columns), axis=0), sse, np.inf)
    best = int(np.argmin(sse))
    a, b, score = _line(columns[:, best], y)
    return best, a, b, score


def _plus(text: str, b: float, scale: float = 0.0) -> str:
    """``text + b``, without an offset that is only rounding noise against ``scale``."""
    return text if abs(b) <= 1e-9 * scale else f"{text} + {number_text(b)}"


def fit_shapes(x: np.ndarray, y: np.ndarray, name: str) -> list[ShapeFit]:
    """Every shape that applies to ``x`` (log and power need x > 0), fitted to ``y``."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    fits: list[ShapeFit] = []
    scale = float(np.max(np.abs(y))) if y.size else 0.0
    a, b, score = _line(x, y)
    fits.append(ShapeFit("linear", score, _plus(f"{number_text(a)}*{name}", b, scale)))
    span = float(x.max() - x.min()) if x.size else 0.0
    if span <= 0:
        return fits
    if np.all(x > 0):
        a, b, score = _line(np.log(x), y)
        fits.append(ShapeFit("log", score, _plus(f"{number_text(a)}*log({name})", b, scale)))
        with np.errstate(all="ignore"):
            columns = x[:, None] ** _POWERS[None, :]
        k, a, b, score = _grid(columns, y)
        fits.append(ShapeFit("power", score, _plus(f"{number_text(a)}*{name}**{number_text(float(_POWERS[k]))}", b, scale)))
    centre = float(x.min())
    rates = _RATES / span
    with np.errstate(all="ignore"):
        columns = np.exp((x[:, None] - centre) * rates[None, :])
    k, a, b, score = _grid(columns, y)
    rate = float(rates[k])
    factor = a * math.exp(-rate * centre)
    fits.append(ShapeFit("exp", score, _plus(f"{number_text(factor)}*exp({number_text(rate)}*{name})", b, scale)))
    fits.append(_periodic(x, y, name, span, scale))
    return fits


def _periodic(x: np.ndarray, y: np.ndarray, name: str, span: float, scale: float) -> ShapeFit:
    """The sine over a geometric grid of periods, then three finer grids around the best."""
    ones = np.ones_like(x)

    def fit(w: float) -> tuple[float, float, float, float, float]:
        A = np.column_stack([np.sin(w * x), np.cos(w * x), ones])
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        return nmse(y, A @ coef), w, float(coef[0]), float(coef[1]), float(coef[2])

    omegas = 2 * math.pi / (_PERIODS * span)
    best = min((fit(float(w)) for w in omegas), key=lambda r: r[0])
    step = float(omegas[0] / omegas[1] - 1.0) * best[1]
    for _ in range(3):
        best = min((fit(float(w)) for w in np.linspace(best[1] - step, best[1] + step, 11) if w > 0),
                   key=lambda r: r[0])
        step /= 5.0
    score, w, s, c, b = best
    amplitude, phase = math.hypot(s, c), math.atan2(c, s)
    inner = f"{number_text(w)}*{name}" + ("" if phase == 0 else f" + {number_text(phase)}")
    return ShapeFit("periodic", score, _plus(f"{number_text(amplitude)}*sin({inner})", b, scale))


def best_shape(fits: Sequence[ShapeFit]) -> ShapeFit:
    """The shape with the lowest NMSE after a small charge per parameter."""
    return min(fits, key=lambda f: f.train_nmse + _PARAMETER_COST * SHAPES[f.shape])


def _bins(values: np.ndarray, count: int) -> np.ndarray:
    edges = np.unique(np.quantile(values, np.linspace(0, 1, count + 1)))
    if edges.size < 2:
        return np.zeros(values.size, dtype=int)
    return np.asarray(np.clip(np.searchsorted(edges, values, side="right") - 1, 0, edges.size - 2))


def mutual_information(x: np.ndarray, y: np.ndarray) -> float:
    """Mutual information in nats from an equal-frequency 2-D histogram (a plug-in estimate,
    biased upward by about (bins-1)**2/(2n): compare variables with it, do not read it alone)."""
    n = x.size
    if n < 4:
        return 0.0
    count = int(max(4, min(20, math.sqrt(n / 5))))
    bx, by = _bins(x, count), _bins(y, count)
    joint = np.zeros((bx.max() + 1, by.max() + 1))
    np.add.at(joint, (bx, by), 1.0)
    joint /= n
    px, py = joint.sum(axis=1, keepdims=True), joint.sum(axis=0, keepdims=True)
    nonzero = joint > 0
    return float(np.sum(joint[nonzero] * np.log(joint[nonzero] / (px @ py)[nonzero])))


def monotonicity(x: np.ndarray, y: np.ndarray) -> str:
    """``increasing``, ``decreasing``, ``flat`` or ``not monotonic``: the steps of the target's
    mean over equal-frequency bins of ``x``, where a step smaller than twice its standard error
    (the other variables' scatter) counts as neither up nor down (``constant``: x takes one value)."""
    bins = _bins(x, _MONOTONE_BINS)
    if bins.max() == 0:
        return "constant"
    groups = [y[bins == k] for k in range(bins.max() + 1) if np.any(bins == k)]
    means = np.array([g.mean() for g in groups])
    errors = np.array([g.std() / np.sqrt(g.size) for g in groups])
    steps = np.diff(means)
    noise = 2.0 * np.sqrt(errors[1:] ** 2 + errors[:-1] ** 2)
    up, down = bool(np.any(steps > noise)), bool(np.any(steps < -noise))
    if up and not down:
        return "increasing"
    if down and not up:
        return "decreasing"
    return "flat" if not (up or down) else "not monotonic"


def variable_relationships(X: np.ndarray, y: np.ndarray, names: Sequence[str]) -> dict[str, Any]:
    """For each variable against the target: Pearson, Spearman, mutual information,
    monotonicity, every shape's fit and the best shape (rows with a non-finite value skipped)."""
    X = np.asarray(X, dtype=float).reshape(len(y), -1)
    y = np.asarray(y, dtype=float)
    out: dict[str, Any] = {}
    for j, name in enumerate(names):
        keep = np.isfinite(X[:, j]) & np.isfinite(y)
        x, t = X[keep, j], y[keep]
        if x.size < 5 or float(np.std(t)) == 0.0:
            out[name] = {"pearson": None, "spearman": None, "mutual_information": None,
                         "monotonicity": "unknown", "shapes": [], "best": None}
            continue
        fits = fit_shapes(x, t, name)
        out[name] = {
            "pearson": pearson(x, t),
            "spearman": spearman(x, t),
            "mutual_information": mutual_information(x, t),
            "monotonicity": monotonicity(x, t),
            "shapes": [f.as_dict() for f in fits],
            "best": best_shape(fits).as_dict(),
        }
    return {"variables": out, "rows": int(len(y))}
