"""``load_dataset``: Feynman equations sampled on the fly, or CSV / Parquet tables read with pyarrow;
``dataset_from_arrays``: arrays already in memory (the Python estimator's ``fit(X, y)``).

Every path ends in the same checks and the same :class:`Dataset` value, so downstream code never
sees NaN targets, string columns or feature names the formula language cannot spell.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..formula import NAMED_NUMBERS, evaluate_numpy, is_identifier, parse_formula
from ..formula.units import DatasetUnits, UnitError
from .dataset import (
    DEFAULT_SPLIT,
    MIN_ROWS,
    SPLIT_KINDS,
    Dataset,
    DatasetError,
    DatasetUnitsError,
    check_split,
    content_hash,
    freeze,
    make_splits,
)
from .feynman import FeynmanEquation, feynman_equation, feynman_equation_units

#: Rows sampled for a Feynman equation when ``n`` is not given.
DEFAULT_FEYNMAN_N = 10_000
#: Source schemes ``load_dataset`` understands.
SCHEMES = ("feynman:", "csv:", "parquet:")
#: The ``units`` value that takes a ``feynman:`` dataset's units from the embedded table.
FEYNMAN_UNITS = "feynman"

#: The name prefix of a dataset built from in-memory arrays (``arrays:<content hash prefix>``).
ARRAYS_SCHEME = "arrays:"

#: What ``load_dataset(units=...)`` takes: the word ``feynman``, name -> unit (text such as
#: ``kg*m/s**2``, a mapping of base-unit exponents, or an exponent list), or a ready value.
UnitsSpec = str | Mapping[str, Any] | DatasetUnits | None


def load_dataset(
    source: str,
    n: int | None = None,
    seed: int = 0,
    noise: float = 0.0,
    target: str | None = None,
    split: Sequence[float] = DEFAULT_SPLIT,
    units: UnitsSpec = None,
    split_kind: str = "random",
    split_variable: str | None = None,
    weight: str | None = None,
) -> Dataset:
    """Load a dataset; raises :class:`DatasetError` with a fixable message on bad input.

    - ``feynman:<Filename>``: ``n`` rows (default 10,000) sampled uniformly in each variable's
      range with ``np.random.default_rng(seed)``; ``y`` is the ground truth evaluated in float64.
    - ``csv:<path>`` / ``parquet:<path>`` (or a plain path ending ``.csv`` / ``.parquet``): a
      numeric table; ``target`` names the output column (default: the last column). ``n``, if
      given, caps the rows: a seeded random subset of that many rows is kept, in file order.
    - ``noise``: ``y += noise * std(y) * N(0, 1)``, drawn from the seeded generator.
    - ``split``: (train, val, test) fractions of a seeded random partition of the rows.
    - ``units``: the unit of each variable and of the target (``None``: unknown), a mapping
      from every name to its unit, or ``"feynman"`` for a ``feynman:`` source (the embedded
      units table); bad units are a :class:`DatasetUnitsError`.
    - ``split_kind``: ``random`` (default), ``ood`` (by ``split_variable``'s values: the lowest
      train, the highest test) or ``chronological`` (row order); see ``SPLIT_KINDS``.
    - ``weight``: a csv/parquet column of per-row sample weights (not a feature).
    """
    how = _SplitHow(_check_kind(split_kind, split_variable), split_variable)
    if weight is not None and source.partition(":")[0] == "feynman":
        raise DatasetError("a weight column needs a csv: or parquet: source; a feynman: "
                           "dataset has none (drop dataset.weight)")
    dataset = _load(source, n, seed, noise, target, split, how, weight)
    return dataset if units is None else dataset.with_units(resolve_units(units, dataset))


def dataset_from_arrays(
    X: Any,
    y: Any,
    feature_names: Sequence[str] | None = None,
    target_name: str = "y",
    *,
    seed: int = 0,
    split: Sequence[float] = DEFAULT_SPLIT,
    units: UnitsSpec = None,
    name: str | None = None,
    split_kind: str = "random",
    split_variable: str | None = None,
    sample_weight: Any = None,
) -> Dataset:
    """A :class:`Dataset` from arrays in memory, with the CSV path's checks (names the formula
    language can spell, enough rows, finite numbers, a target that varies).

    ``X``: n x d numbers; ``y``: n numbers; ``feature_names``: d names (default ``x0 .. x{d-1}``).
    The name is ``arrays:<first 12 hex digits of the content hash>`` unless given, so the same
    data and split always get the same name (resuming a run checks it). ``sample_weight``: n
    finite, non-negative numbers (``None``: all 1); ``split_kind``/``split_variable`` as in
    :func:`load_dataset`.
    """
    how = _SplitHow(_check_kind(split_kind, split_variable), split_variable)
    fractions = check_split(tuple(split))  # type: ignore[arg-type]
    seed = _check_seed(seed)
    try:
        matrix = np.asarray(X, dtype=np.float64)
        target = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"X and y must be numbers: {exc}") from None
    if matrix.ndim != 2:
        raise DatasetError(f"X must be 2-D (rows x variables), got shape {matrix.shape}; reshape "
                           "a single variable with X.reshape(-1, 1)")
    if target.ndim != 1:
        raise DatasetError(f"y must be 1-D (one number per row), got shape {target.shape}")
    rows, width = matrix.shape
    if target.shape[0] != rows:
        raise DatasetError(f"X has {rows} rows but y has {target.shape[0]}; give one target per row")
    if width == 0:
        raise DatasetError("X has no columns; at least one variable is needed")
    if rows < MIN_ROWS:
        raise DatasetError(f"got {rows} sample{'' if rows == 1 else 's'} (rows); at least "
                           f"{MIN_ROWS} are needed")
    features = tuple(f"x{j}" for j in range(width)) if feature_names is None else tuple(feature_names)
    if len(features) != width:
        raise DatasetError(f"{len(features)} variable names for {width} columns of X; give one "
                           "name per column")
    check_feature_names(features, fix="pick another name")
    if not isinstance(target_name, str) or not target_name:
        raise DatasetError(f"target_name must be a non-empty string, got {target_name!r}")
    if target_name in features:
        raise DatasetError(f"the target name {target_name!r} is also a variable name; rename one")
    _check_values(matrix, target, features, target_name, kind="array")
    weights = None if sample_weight is None else check_weights(sample_weight, rows)
    description = (
        f"In-memory arrays: predict the target '{target_name}' from {width} "
        f"variable{'s' if width != 1 else ''}: {_describe_ranges(features, matrix)}. There are "
        f"{rows} rows; {_split_phrase(fractions, seed, how)}."
    )
    dataset = _assemble(
        name=name or ARRAYS_SCHEME, source=ARRAYS_SCHEME, features=features, target=target_name,
        X=matrix, y=target, fractions=fractions, seed=seed, noise=0.0, ground_truth=None,
        description=description, how=how, weight=weights,
    )
    if name is None:
        dataset = dataclasses.replace(dataset, name=f"{ARRAYS_SCHEME}{dataset.content_hash[:12]}",
                                      source=f"{ARRAYS_SCHEME}{dataset.content_hash[:12]}")
    return dataset if units is None else dataset.with_units(resolve_units(units, dataset))


def resolve_units(units: UnitsSpec, dataset: Dataset) -> DatasetUnits | None:
    """``units`` (as ``load_dataset`` takes them) checked against ``dataset``'s names."""
    if units is None or isinstance(units, DatasetUnits):
        return units
    if isinstance(units, str):
        if units.strip().lower() != FEYNMAN_UNITS:
            raise DatasetUnitsError(f"units must be {FEYNMAN_UNITS!r} or a mapping from each "
                                    f"variable and the target to its unit, got {units!r}")
        if not dataset.name.startswith("feynman:"):
            raise DatasetUnitsError(f"units={FEYNMAN_UNITS!r} needs a feynman: dataset, not "
                                    f"{dataset.name!r}; give a mapping from each of "
                                    f"{', '.join((*dataset.feature_names, dataset.target_name))} "
                                    "to its unit")
        return feynman_equation_units(feynman_equation(dataset.name.partition(":")[2]))
    try:
        return DatasetUnits.from_mapping(units, dataset.feature_names, dataset.target_name)
    except UnitError as exc:
        raise DatasetUnitsError(str(exc)) from None


class _SplitHow(NamedTuple):
    """How rows are split: the kind and, for ``ood``, the variable."""

    kind: str = "random"
    variable: str | None = None


def _check_kind(kind: str, variable: str | None) -> str:
    if kind not in SPLIT_KINDS:
        raise DatasetError(f"split_kind must be one of {', '.join(SPLIT_KINDS)}, got {kind!r}")
    if kind == "ood" and not (isinstance(variable, str) and variable):
        raise DatasetError("split_kind 'ood' needs split_variable, the variable whose highest "
                           "values become the test rows (e.g. split_variable='x0')")
    if kind != "ood" and variable is not None:
        raise DatasetError(f"split_variable is only used by split_kind 'ood', not {kind!r}; "
                           "drop it or set split_kind='ood'")
    return kind


def check_weights(values: Any, rows: int) -> np.ndarray:
    """Sample weights: ``rows`` finite, non-negative numbers, not all zero."""
    try:
        w = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise DatasetError("sample weights must be numbers") from None
    if w.ndim != 1 or w.shape[0] != rows:
        raise DatasetError(f"sample weights must be one number per row ({rows}), got shape "
                           f"{w.shape}")
    count, first = _non_finite(w)
    if count:
        raise DatasetError(f"{count} sample weights are missing or not finite (first at row "
                           f"{first}); give every row a finite weight")
    if np.any(w < 0):
        raise DatasetError(f"sample weights must not be negative (row {int(np.argmax(w < 0))} "
                           f"is {float(w[np.argmax(w < 0)]):g})")
    if not np.any(w > 0):
        raise DatasetError("sample weights are all zero; at least one row must count")
    return w


def _load(
    source: str, n: int | None, seed: int, noise: float, target: str | None,
    split: Sequence[float], how: _SplitHow = _SplitHow(), weight: str | None = None,  # noqa: B008
) -> Dataset:
    if not isinstance(source, str) or not source.strip():
        raise DatasetError(f"a dataset source must be a non-empty string, got {source!r}")
    fractions = check_split(tuple(split))  # type: ignore[arg-type]
    seed = _check_seed(seed)
    noise = _check_noise(noise)
    if n is not None:
        n = _check_n(n)
    scheme, _, rest = source.partition(":")
    if scheme == "feynman" and rest:
        return _load_feynman(source, rest.strip(), n, seed, noise, target, fractions, how)
    if scheme in ("csv", "parquet") and rest:
        return _load_table(source, scheme, rest, n, seed, noise, target, fractions, how, weight)
    lowered = source.lower()
    if lowered.endswith(".csv"):
        return _load_table(source, "csv", source, n, seed, noise, target, fractions, how, weight)
    if lowered.endswith(".parquet"):
        return _load_table(source, "parquet", source, n, seed, noise, target, fractions, how,
                           weight)
    raise DatasetError(
        f"unknown dataset source {source!r}; use one of {', '.join(SCHEMES)} "
        "(e.g. 'feynman:I.6.2', 'csv:data.csv', 'parquet:data.parquet') "
        "or a path ending in .csv or .parquet"
    )


# --------------------------------------------------------------------------------------------
# argument checks


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DatasetError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _check_noise(noise: float) -> float:
    try:
        value = float(noise)
    except (TypeError, ValueError):
        raise DatasetError(f"noise must be a number, got {noise!r}") from None
    if not math.isfinite(value) or value < 0:
        raise DatasetError(f"noise must be a finite number >= 0, got {noise!r}")
    return value


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise DatasetError(f"n must be an integer, got {n!r}")
    if n < MIN_ROWS:
        raise DatasetError(f"n={n} gives fewer than {MIN_ROWS} rows; at least {MIN_ROWS} needed")
    return int(n)


# --------------------------------------------------------------------------------------------
# shared assembly


def _noise_phrase(noise: float) -> str:
    if noise == 0:
        return "no noise was added"
    return f"Gaussian noise with standard deviation {noise:g} x std(y) was added to the target"


def _split_phrase(fractions: tuple[float, float, float], seed: int,
                  how: _SplitHow = _SplitHow()) -> str:  # noqa: B008 - a frozen value
    pct = "/".join(f"{100 * f:g}" for f in fractions)
    if how.kind == "ood":
        return (f"rows are split {pct} into train/validation/test by the value of "
                f"{how.variable} (lowest train, highest test: an extrapolation test)")
    if how.kind == "chronological":
        return f"rows are split {pct} into train/validation/test in row order (first train)"
    return f"rows are split {pct} into train/validation/test (seed {seed})"


def _assemble(
    *, name: str, source: str, features: tuple[str, ...], target: str, X: np.ndarray,
    y: np.ndarray, fractions: tuple[float, float, float], seed: int, noise: float,
    ground_truth: str | None, description: str, how: _SplitHow = _SplitHow(),  # noqa: B008
    weight: np.ndarray | None = None,
) -> Dataset:
    X = freeze(X)
    y = freeze(y)
    order = None
    if how.kind == "ood":
        if how.variable not in features:
            raise DatasetError(f"split_variable {how.variable!r} is not a variable; the "
                               f"variables are {', '.join(features)}")
        order = X[:, features.index(how.variable)]
    splits = make_splits(X.shape[0], fractions, seed, how.kind, order, how.variable)
    frozen_w = None if weight is None else freeze(weight)
    return Dataset(
        name=name,
        source=source,
        feature_names=features,
        target_name=target,
        X=X,
        y=y,
        splits=splits,
        ground_truth=ground_truth,
        description=description,
        content_hash=content_hash(features, target, X, y, splits, frozen_w),
        seed=seed,
        noise=noise,
        weight=frozen_w,
    )


def _add_noise(y: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    if noise == 0:
        return y
    return y + noise * float(np.std(y)) * rng.standard_normal(y.shape[0])


# --------------------------------------------------------------------------------------------
# Feynman


def _load_feynman(
    source: str, key: str, n: int | None, seed: int, noise: float, target: str | None,
    fractions: tuple[float, float, float], how: _SplitHow = _SplitHow(),  # noqa: B008
) -> Dataset:
    try:
        eq = feynman_equation(key)
    except KeyError as exc:
        raise DatasetError(exc.args[0]) from None
    if target is not None and target != eq.output:
        raise DatasetError(
            f"Feynman equation {eq.filename} has the target {eq.output!r}; "
            f"target={target!r} does not apply"
        )
    rows = DEFAULT_FEYNMAN_N if n is None else n
    X, y = sample_feynman(eq, rows, np.random.default_rng(seed), noise)
    ranges = ", ".join(f"{v.name} in [{v.low:g}, {v.high:g}]" for v in eq.variables)
    description = (
        f"Feynman benchmark equation {eq.filename} (AI Feynman table, number {eq.number}): "
        f"predict the physical quantity '{eq.output}' from {len(eq.variables)} "
        f"variable{'s' if len(eq.variables) != 1 else ''}, each sampled uniformly at random "
        f"in its range: {ranges}. There are {rows} rows; {_noise_phrase(noise)}; "
        f"{_split_phrase(fractions, seed, how)}."
    )
    return _assemble(
        name=f"feynman:{eq.filename}", source=source, features=eq.variable_names,
        target=eq.output, X=X, y=y, fractions=fractions, seed=seed, noise=noise,
        ground_truth=eq.formula, description=description, how=how,
    )


def sample_feynman(
    eq: FeynmanEquation, n: int, rng: np.random.Generator, noise: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Sample ``n`` rows of an equation: X uniform in the ranges, y from the ground truth."""
    names = eq.variable_names
    X = np.empty((n, len(names)), dtype=np.float64)
    for j, var in enumerate(eq.variables):
        X[:, j] = rng.uniform(var.low, var.high, size=n)
    formula = parse_formula(eq.formula, names)
    y = evaluate_numpy(formula, X, names)
    bad = ~np.isfinite(y)
    if bad.any():
        raise DatasetError(
            f"Feynman equation {eq.filename} gave {int(bad.sum())} non-finite values "
            f"on its sampled ranges (first at row {int(np.argmax(bad))})"
        )
    return X, _add_noise(y, noise, rng)


# --------------------------------------------------------------------------------------------
# CSV / Parquet


def _read_arrow(scheme: str, path_text: str):  # -> pyarrow.Table
    import pyarrow as pa

    path = Path(path_text).expanduser()
    if not path.exists():
        raise DatasetError(f"no such file: {path}")
    if scheme == "csv":
        import pyarrow.csv as pacsv

        if path.is_dir():
            raise DatasetError(f"{path} is a directory, not a CSV file")
        if path.stat().st_size == 0:
            raise DatasetError(f"{path} is empty")
        try:
            return pacsv.read_csv(path)
        except (pa.ArrowInvalid, OSError) as exc:
            message = str(exc)
            if "Empty CSV file" in message:
                raise DatasetError(f"{path} is empty") from None
            raise DatasetError(f"cannot read CSV file {path}: {message}") from None
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DatasetError(f"cannot read Parquet file {path}: {exc}") from None


def _first_non_numeric(column) -> str:  # column: pyarrow.ChunkedArray
    for row, value in enumerate(column.to_pylist()):
        if value is None:
            continue
        try:
            float(value)
        except (TypeError, ValueError):
            return f"; e.g. {value!r} in row {row}"
    return ""


def _numeric_column(table, name: str) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    column = table.column(name)
    kind = column.type
    if pa.types.is_null(kind):
        raise DatasetError(f"column {name!r} has no values")
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
        hint = _first_non_numeric(column) if pa.types.is_string(kind) or \
            pa.types.is_large_string(kind) else ""
        raise DatasetError(f"column {name!r} is not numeric (type {kind}){hint}")
    return np.asarray(pc.cast(column, pa.float64()).to_numpy(), dtype=np.float64)


def _non_finite(values: np.ndarray) -> tuple[int, int]:
    bad = ~np.isfinite(values)
    return int(bad.sum()), int(np.argmax(bad)) if bad.any() else -1


def check_feature_names(features: Sequence[str], *, what: str = "variable name",
                        fix: str = "rename it") -> None:
    """Refuse names the formula language cannot spell as variables (the CSV path's columns and
    the names given with in-memory arrays alike), and duplicates."""
    duplicates = sorted({c for c in features if list(features).count(c) > 1})
    if duplicates:
        raise DatasetError(f"duplicate {what}s: {', '.join(map(str, duplicates))}")
    for name in features:
        if not isinstance(name, str) or not is_identifier(name) or name in NAMED_NUMBERS:
            raise DatasetError(
                f"{what} {name!r} cannot be a formula variable: use ASCII letters, "
                "digits and '_' (not starting with a digit, not a function name, not 'pi' or "
                f"'e'); {fix}"
            )


def _check_values(X: np.ndarray, y: np.ndarray, features: Sequence[str], target: str, *,
                  kind: str) -> None:
    """No missing or non-finite value in the target or a feature, and a target that varies."""
    count, first = _non_finite(y)
    if count:
        raise DatasetError(
            f"target {kind} {target!r} has {count} missing or non-finite value"
            f"{'s' if count != 1 else ''} (first at row {first}): drop or fill the NaN/inf rows"
        )
    for j, name in enumerate(features):
        count, first = _non_finite(X[:, j])
        if count:
            raise DatasetError(
                    f"feature {kind} {name!r} has {count} missing or non-finite value"
                f"{'s' if count != 1 else ''} (first at row {first}): drop or fill the NaN/inf rows"
            )
    if np.all(y == y[0]):
        raise DatasetError(f"target is constant ({target!r} is always {y[0]:g})")


def _describe_ranges(features: Sequence[str], X: np.ndarray) -> str:
    listed = features if len(features) <= 30 else features[:30]
    ranges = ", ".join(
        f"{name} (observed range [{X[:, j].min():g}, {X[:, j].max():g}])"
        for j, name in enumerate(listed)
    )
    if len(features) > len(listed):
        ranges += f", and {len(features) - len(listed)} more"
    return ranges


def _load_table(
    source: str, scheme: str, path_text: str, n: int | None, seed: int, noise: float,
    target: str | None, fractions: tuple[float, float, float],
    how: _SplitHow = _SplitHow(), weight: str | None = None,  # noqa: B008
) -> Dataset:
    table = _read_arrow(scheme, path_text)
    columns = list(table.column_names)
    if not columns:
        raise DatasetError(f"{path_text} has no columns")
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise DatasetError(f"{path_text} has duplicate column names: {', '.join(duplicates)}")
    target_name = columns[-1] if target is None else target
    if target_name not in columns:
        raise DatasetError(
            f"target column {target_name!r} not found; columns are: {', '.join(columns)}"
        )
    if weight is not None and weight not in columns:
        raise DatasetError(f"weight column {weight!r} not found; columns are: "
                           f"{', '.join(columns)}")
    if weight is not None and weight == target_name:
        raise DatasetError(f"the weight column {weight!r} is also the target; name another")
    features = tuple(c for c in columns if c not in (target_name, weight))
    if not features:
        raise DatasetError(f"{path_text} has only the target column {target_name!r}; "
                           "at least one feature column is needed")
    check_feature_names(features, what="column name", fix="rename the column")
    rows = table.num_rows
    if rows < MIN_ROWS:
        raise DatasetError(f"{path_text} has {rows} row{'' if rows == 1 else 's'}; at least {MIN_ROWS} are needed")
    y = _numeric_column(table, target_name)
    X = np.empty((rows, len(features)), dtype=np.float64)
    for j, name in enumerate(features):
        X[:, j] = _numeric_column(table, name)
    _check_values(X, y, features, target_name, kind="column")
    w = None if weight is None else check_weights(_numeric_column(table, weight), rows)
    subsampled = ""
    if n is not None and n < rows:
        keep = np.sort(np.random.default_rng([seed, 2]).choice(rows, size=n, replace=False))
        X, y = X[keep], y[keep]
        w = None if w is None else w[keep]
        subsampled = f" (a seeded random subset of the file's {rows} rows)"
        if np.all(y == y[0]):
            raise DatasetError(f"target is constant in the {n} sampled rows")
    y = _add_noise(y, noise, np.random.default_rng(seed))
    ranges = _describe_ranges(features, X)
    description = (
        f"Tabular dataset from {Path(path_text).name} ({scheme}): predict the target "
        f"'{target_name}' from {len(features)} variable{'s' if len(features) != 1 else ''}: "
        f"{ranges}. There are {X.shape[0]} rows{subsampled}; {_noise_phrase(noise)}; "
        f"{_split_phrase(fractions, seed, how)}"
        f"{'' if weight is None else f'; rows are weighted by the column {weight!r}'}."
    )
    return _assemble(
        name=f"{scheme}:{path_text}", source=source, features=features, target=target_name,
        X=X, y=y, fractions=fractions, seed=seed, noise=noise, ground_truth=None,
        description=description, how=how, weight=w,
    )
