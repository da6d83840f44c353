"""Extra per-candidate metrics (``search.metrics``), computed on the host from predictions.

They are opt-in: each costs a prediction pass per fitted structure. ``mae``, ``r2``,
``pearson_r`` and ``spearman_r`` are measured on the validation split (like ``val_nmse``; on
the train split when there is no validation split); ``aic`` and ``bic`` on the train split,
the rows the constants were fitted to (Gaussian likelihood: ``n ln(MSE) + 2k`` and
``n ln(MSE) + k ln n``, ``k`` the number of free constants). With sample weights every mean,
variance and correlation is weighted. Plain numpy: the numeric core.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: The metric names ``search.metrics`` accepts.
EXTRA_METRICS: tuple[str, ...] = ("mae", "r2", "aic", "bic", "pearson_r", "spearman_r")
#: Metrics where a larger value is better (``search.rank_by`` ranks them descending).
HIGHER_IS_BETTER: frozenset[str] = frozenset({"r2", "pearson_r", "spearman_r"})


def check_metrics(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as a tuple of distinct known metric names; ``ValueError`` names a bad one."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise ValueError(f"metrics must be a list of names from {', '.join(EXTRA_METRICS)}, "
                         f"got {names!r}")
    seen: list[str] = []
    for name in names:
        if name not in EXTRA_METRICS:
            raise ValueError(f"unknown metric {name!r}; choose from {', '.join(EXTRA_METRICS)}")
        if name in seen:
            raise ValueError(f"metric {name!r} is listed twice")
        seen.append(str(name))
    return tuple(seen)


def _wmean(values: np.ndarray, w: np.ndarray) -> float:
    return float(np.sum(w * values) / np.sum(w))


def _wcorr(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> float | None:
    da, db = a - _wmean(a, w), b - _wmean(b, w)
    va, vb = _wmean(da * da, w), _wmean(db * db, w)
    if not (va > 0 and vb > 0):
        return None
    return float(_wmean(da * db, w) / math.sqrt(va * vb))


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties getting their average rank (as Spearman's coefficient needs)."""
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    starts = np.flatnonzero(np.r_[True, sorted_vals[1:] != sorted_vals[:-1]])
    ends = np.r_[starts[1:], len(values)]
    for start, end in zip(starts, ends):
        ranks[order[start:end]] = 0.5 * (start + end - 1) + 1.0
    return ranks


def extra_metrics(
    names: Sequence[str], *, y_train: np.ndarray, pred_train: np.ndarray, w_train: np.ndarray,
    y_val: np.ndarray, pred_val: np.ndarray | None, w_val: np.ndarray, n_constants: int,
    r2: float | None,
) -> dict[str, float | None]:
    """The requested metrics of one fitted candidate (``None`` where undefined: non-finite
    predictions, a constant prediction for a correlation). ``r2`` is the evaluator's own
    (``1 - val_nmse``), so the column and the metric always agree."""
    out: dict[str, float | None] = {}
    if pred_val is not None and len(y_val):
        y_eval, p_eval, w_eval = y_val, pred_val, w_val
    else:
        y_eval, p_eval, w_eval = y_train, pred_train, w_train
    eval_ok = bool(np.all(np.isfinite(p_eval))) and float(np.sum(w_eval)) > 0
    train_ok = bool(np.all(np.isfinite(pred_train))) and float(np.sum(w_train)) > 0
    for name in names:
        value: float | None = None
        if name == "r2":
            value = r2
        elif name == "mae" and eval_ok:
            value = _wmean(np.abs(y_eval - p_eval), w_eval)
        elif name == "pearson_r" and eval_ok:
            value = _wcorr(p_eval, y_eval, w_eval)
        elif name == "spearman_r" and eval_ok:
            value = _wcorr(_ranks(p_eval), _ranks(y_eval), w_eval)
        elif name in ("aic", "bic") and train_ok:
            n = len(y_train)
            mse = max(_wmean((y_train - pred_train) ** 2, w_train), np.finfo(np.float64).tiny)
            penalty = 2.0 * n_constants if name == "aic" else n_constants * math.log(n)
            value = n * math.log(mse) + penalty
        out[name] = value if value is None or math.isfinite(value) else None
    return out


__all__ = ["EXTRA_METRICS", "HIGHER_IS_BETTER", "check_metrics", "extra_metrics"]
