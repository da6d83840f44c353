"""Per-column statistics of a data table: range, quantiles, sign, integrality, log-uniformity,
outliers. What an agent reads before guessing a formula's shape (a log-uniform positive
variable hints at a power law; an integer one at a count or a quantum number)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["OUTLIER_Z", "QUANTILES", "column_statistics", "data_statistics"]

#: Quantiles reported per column.
QUANTILES: tuple[float, ...] = (0.01, 0.25, 0.5, 0.75, 0.99)
#: A value whose robust z-score (distance from the median over 1.4826 * MAD) exceeds this is an
#: outlier. 6 keeps a normal sample of a million rows almost free of false alarms.
OUTLIER_Z = 6.0
#: Rows listed per column among its outliers.
MAX_OUTLIER_ROWS = 5
#: Largest max/min ratio of a positive column for which log-uniformity is not worth checking.
_MIN_LOG_SPAN = 10.0


def _sign(values: np.ndarray) -> str:
    if values.size == 0:
        return "empty"
    low, high = float(values.min()), float(values.max())
    if low > 0:
        return "positive"
    if high < 0:
        return "negative"
    if low == 0 and high == 0:
        return "zero"
    if low >= 0:
        return "non-negative"
    if high <= 0:
        return "non-positive"
    return "mixed"


def _uniform_distance(values: np.ndarray) -> float:
    """Kolmogorov-Smirnov distance between ``values`` and a uniform law on their own range."""
    low, high = float(values.min()), float(values.max())
    if high <= low:
        return 1.0
    ordered = np.sort((values - low) / (high - low))
    n = ordered.size
    upper = np.arange(1, n + 1) / n - ordered
    lower = ordered - np.arange(0, n) / n
    return float(max(upper.max(), lower.max()))


def _robust_z(values: np.ndarray) -> np.ndarray:
    median = float(np.median(values))
    mad = float(np.median(np.abs(values - median))) * 1.4826
    if mad == 0.0:
        spread = float(np.std(values))
        if spread == 0.0:
            return np.zeros_like(values)
        mad = spread
    return np.asarray(np.abs(values - median) / mad)


def column_statistics(values: np.ndarray) -> dict[str, Any]:
    """The statistics of one column (non-finite values counted, then left out)."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    out: dict[str, Any] = {"count": int(values.size), "non_finite": int(values.size - finite.size)}
    if finite.size == 0:
        return {**out, "sign": "empty", "integer": False, "log_uniform": False, "outliers": 0,
                "outlier_rows": []}
    out.update({
        "min": float(finite.min()),
        "max": float(finite.max()),
        "mean": float(finite.mean()),
        "std": float(finite.std()),
        "quantiles": {f"q{round(q * 100):02d}": float(np.quantile(finite, q)) for q in QUANTILES},
        "sign": _sign(finite),
        "distinct": int(np.unique(finite).size),
    })
    integral = bool(np.all(finite == np.round(finite)))
    out["integer"] = integral
    log_uniform = False
    scale = "linear"
    if out["sign"] == "positive" and out["max"] / out["min"] >= _MIN_LOG_SPAN and not integral:
        linear_ks, log_ks = _uniform_distance(finite), _uniform_distance(np.log(finite))
        log_uniform = log_ks < 0.05 and log_ks < linear_ks
        out["uniform_ks"] = {"linear": linear_ks, "log": log_ks}
        if log_uniform:
            scale = "log"
    out["log_uniform"] = log_uniform
    # Outliers on the scale the column lives on: a log-uniform column's large values are normal.
    z = _robust_z(np.log(finite) if scale == "log" else finite)
    flagged = np.flatnonzero(np.isfinite(values))[z > OUTLIER_Z]
    order = flagged[np.argsort(-z[z > OUTLIER_Z])]
    out["outliers"] = int(flagged.size)
    out["outlier_rows"] = [{"row": int(i), "value": float(values[i])} for i in order[:MAX_OUTLIER_ROWS]]
    return out


def data_statistics(X: np.ndarray, y: np.ndarray, names: Sequence[str], target: str) -> dict[str, Any]:
    """Statistics of every column of ``X`` (named ``names``) and of the target ``y``.

    ``outlier_rows`` give row numbers within the arrays passed (the tools pass the training
    split, so they are training-row numbers).
    """
    X = np.asarray(X, dtype=float).reshape(len(y), -1)
    columns = {name: column_statistics(X[:, j]) for j, name in enumerate(names)}
    return {"rows": int(len(y)), "target": target, "variables": columns,
            "target_stats": column_statistics(np.asarray(y, dtype=float))}
