"""What ``fit``/``predict`` accept: numpy arrays, pandas frames and series, pyarrow tables.

Each input becomes a float64 matrix and its column names here, with the errors scikit-learn's
estimator checks expect (a 1-D ``X``, sparse or complex data, NaN/inf are ``ValueError`` or
``TypeError`` with a message that says what to change). The dataset checks themselves (names
the formula language can spell, enough rows, a varying target) are the data layer's, shared
with the CSV path (:func:`sr_dist.data.dataset_from_arrays`). pandas is never imported: a frame
is recognised by what it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Features", "as_features", "as_target", "check_sample_weight"]


@dataclass(frozen=True, eq=False)
class Features:
    """``X`` as numbers, the column names it came with (``None`` for a plain array)."""

    matrix: np.ndarray
    names: tuple[str, ...] | None


def _is_arrow_table(X: Any) -> bool:
    return type(X).__module__.startswith("pyarrow") and hasattr(X, "column_names")


def _is_frame(X: Any) -> bool:
    return hasattr(X, "columns") and hasattr(X, "to_numpy") and hasattr(X, "dtypes")


def _is_sparse(X: Any) -> bool:
    return hasattr(X, "tocsr") or (hasattr(X, "nnz") and hasattr(X, "toarray"))


def _numbers(values: Any, what: str) -> np.ndarray:
    if _is_sparse(values):
        raise TypeError(f"{what} is a sparse matrix; sparse input is not supported: pass "
                        f"{what}.toarray() (formulas are fitted on dense rows)")
    array = np.asarray(values)
    if np.iscomplexobj(array):
        raise ValueError(f"Complex data not supported: {what} has complex numbers; pass the real "
                         "part (or the parts as two columns)")
    try:
        return np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must hold numbers: {exc}") from None


def _arrow_matrix(table: Any) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for name in table.column_names:
        column = table.column(name)
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                or pa.types.is_decimal(column.type)):
            raise ValueError(f"column {name!r} is not numeric (type {column.type}); convert or "
                             "drop it")
        columns.append(np.asarray(pc.cast(column, pa.float64()).to_numpy(), dtype=np.float64))
    if not columns:
        return np.empty((table.num_rows, 0))
    return np.column_stack(columns)


def _is_arrow_array(value: Any) -> bool:
    return type(value).__module__.startswith("pyarrow") and hasattr(value, "to_pylist")


def as_features(X: Any, *, what: str = "X") -> Features:
    """``X`` as an n x d float64 matrix, with its column names when it is a table."""
    names: tuple[str, ...] | None = None
    if _is_arrow_table(X):
        matrix = _arrow_matrix(X)
        names = tuple(str(c) for c in X.column_names)
    elif _is_frame(X):
        columns = list(X.columns)
        if all(isinstance(c, str) for c in columns):
            names = tuple(columns)
        try:  # nullable columns (Int64, Float64 with pd.NA) become NaN, refused below
            values = X.to_numpy(dtype=float, na_value=np.nan)
        except (TypeError, ValueError):
            values = X.to_numpy()  # not all numbers: _numbers says which
        matrix = _numbers(values, what)
    else:
        matrix = _numbers(X, what)
    if matrix.ndim == 1:
        raise ValueError(f"Expected 2D array, got 1D array instead: {what} must be rows x "
                         f"variables; reshape one variable with {what}.reshape(-1, 1), or one "
                         f"row with {what}.reshape(1, -1)")
    if matrix.ndim != 2:
        raise ValueError(f"{what} must be 2-D (rows x variables), got {matrix.ndim} dimensions")
    if matrix.shape[0] == 0:
        raise ValueError(f"{what} has 0 samples (rows); at least one is needed")
    if matrix.shape[1] == 0:
        raise ValueError(f"{what} has 0 feature(s) (shape={matrix.shape}) while a minimum of 1 "
                         "is required: give at least one variable column")
    return Features(matrix, names)


def as_target(y: Any, rows: int) -> np.ndarray:
    """``y`` as n float64 numbers (a single-column 2-D ``y`` is flattened)."""
    if y is None:
        raise ValueError("SymbolicRegressor requires y to be passed, but the target y is None: "
                         "fit(X, y) needs one target value per row of X")
    if hasattr(y, "to_numpy") and not _is_frame(y):  # a pandas Series or pyarrow array
        try:  # nulls become NaN, which the checks below refuse with the fix
            y = (y.to_numpy(zero_copy_only=False) if _is_arrow_array(y)
                 else y.to_numpy(dtype=float, na_value=np.nan))
        except (TypeError, ValueError):
            y = y.to_numpy() if not _is_arrow_array(y) else y.to_pylist()
    elif _is_frame(y) or _is_arrow_table(y):
        y = as_features(y, what="y").matrix
    target = _numbers(y, "y")
    if target.ndim == 2 and target.shape[1] == 1:
        target = target[:, 0]
    if target.ndim != 1:
        raise ValueError(f"y must be one number per row, got shape {target.shape}; sr-dist "
                         "searches one formula for one target (fit one estimator per column)")
    if target.shape[0] != rows:
        raise ValueError(f"X has {rows} rows but y has {target.shape[0]} values; give one target "
                         "per row")
    return target


def check_sample_weight(sample_weight: Any, rows: int) -> np.ndarray | None:
    """The weights as a float array (``None`` for none): one finite, non-negative number per
    row, not all zero. They enter the fitting loss and the weighted NMSE (docs/objectives.md)."""
    if sample_weight is None:
        return None
    weights = _numbers(sample_weight, "sample_weight")
    if weights.ndim != 1 or weights.shape[0] != rows:
        raise ValueError(f"sample_weight must be one number per row ({rows}), got shape "
                         f"{weights.shape}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    if not np.any(weights):
        raise ValueError("sample_weight is all zero: at least one weight must be non-zero")
    return np.asarray(weights, dtype=np.float64)


def names_or_default(names: Sequence[str] | None, width: int) -> tuple[str, ...]:
    return tuple(names) if names is not None else tuple(f"x{j}" for j in range(width))
