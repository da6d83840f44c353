"""Small numeric helpers the analysis modules share: scores, ranks, number text for formulas.

Plain numpy, no state. Every function tolerates non-finite values by ignoring those rows, so
one bad row in a dataset never turns a whole analysis into ``nan``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "FORMULA_DIGITS",
    "AnalysisRequestError",
    "finite_pair",
    "fresh_name",
    "nmse",
    "number_text",
    "pearson",
    "ranks",
    "spearman",
    "term_text",
]

#: Significant digits of numbers written into returned formulas: enough that the formula
#: scores as well as the fit it came from, few enough to read.
FORMULA_DIGITS = 8


class AnalysisRequestError(ValueError):
    """An analysis that cannot be made as asked; the message says how to fix the request."""


def finite_pair(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` restricted to the rows where both are finite."""
    keep = np.isfinite(a) & np.isfinite(b)
    return a[keep], b[keep]


def fresh_name(prefix: str, index: int, taken: Sequence[str]) -> str:
    """A free-constant name ``prefix + index`` that is not one of ``taken`` (the variables)."""
    name = f"{prefix}{index}"
    while name in taken:
        name = "k" + name
    return name


def nmse(y: np.ndarray, prediction: np.ndarray) -> float:
    """Mean squared error over the target's population variance (sr-dist's NMSE); ``inf`` when
    a prediction is not finite, ``0`` vs ``inf`` for a constant target."""
    y = np.asarray(y, dtype=float)
    prediction = np.asarray(prediction, dtype=float)
    if not np.all(np.isfinite(prediction)):
        return float("inf")
    mse = float(np.mean((y - prediction) ** 2))
    var = float(np.var(y))
    if var == 0.0:
        return 0.0 if mse == 0.0 else float("inf")
    return mse / var


def pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson's r over the finite rows; ``None`` when either side is constant or too short."""
    a, b = finite_pair(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    if a.size < 3 or float(np.std(a)) == 0.0 or float(np.std(b)) == 0.0:
        return None
    return float(np.clip(np.corrcoef(a, b)[0, 1], -1.0, 1.0))


def ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions), as Spearman's rho needs."""
    values = np.asarray(values, dtype=float)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mean_rank = ends - (counts - 1) / 2.0  # 1-based mean position of each tie group
    return np.asarray(mean_rank[inverse], dtype=float)


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rho: Pearson's r of the ranks (finite rows only)."""
    a, b = finite_pair(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    if a.size < 3:
        return None
    return pearson(ranks(a), ranks(b))


def number_text(value: float, digits: int = FORMULA_DIGITS) -> str:
    """A number as sr-dist's formula parser reads it, parenthesised when negative."""
    text = format(float(value), f".{digits}g")
    return f"({text})" if text.startswith("-") else text


def term_text(names: Sequence[str], powers: Sequence[int | float]) -> str:
    """A monomial such as ``x0**2*x1`` (``1`` for the empty product)."""
    parts = []
    for name, power in zip(names, powers, strict=True):
        if power == 0:
            continue
        if power == 1:
            parts.append(name)
        elif float(power).is_integer() and power > 0:
            parts.append(f"{name}**{int(power)}")
        else:
            parts.append(f"{name}**{number_text(float(power))}")
    return "*".join(parts) if parts else "1"
