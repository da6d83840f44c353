"""The ``Dataset`` value: features, target, a seeded split and a stable content hash."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

from ..formula import Formula, parse_formula
from ..formula.units import DatasetUnits

#: Default train / validation / test fractions.
DEFAULT_SPLIT: tuple[float, float, float] = (0.7, 0.15, 0.15)
#: Fewest rows a dataset may have.
MIN_ROWS = 10
#: How rows are split (``dataset.split_kind``): a seeded random partition (the default); ``ood``:
#: sorted by one variable, the lowest values train, the next validation, the highest test, so
#: validation and test measure extrapolation; ``chronological``: rows in their order, the first
#: train, then validation, the last test (ordered data such as time series).
SPLIT_KINDS: tuple[str, ...] = ("random", "ood", "chronological")


class DatasetError(ValueError):
    """Data that cannot be used, with a message that says what to fix."""


class DatasetUnitsError(DatasetError):
    """Units that do not fit the dataset (a name missing or unknown, a unit unreadable)."""


@dataclass(frozen=True, eq=False)
class Splits:
    """Row indices of the train, validation and test parts (disjoint, together all rows)."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    fractions: tuple[float, float, float]
    seed: int
    #: One of :data:`SPLIT_KINDS`; ``variable`` is the ``ood`` split's variable.
    kind: str = "random"
    variable: str | None = None


@dataclass(frozen=True, eq=False)
class Dataset:
    """A regression problem: ``y`` from the columns of ``X`` (arrays are read-only)."""

    name: str
    source: str
    feature_names: tuple[str, ...]
    target_name: str
    X: np.ndarray
    y: np.ndarray
    splits: Splits
    ground_truth: str | None
    description: str
    content_hash: str
    seed: int
    noise: float
    #: The unit of each variable and of the target, when known (``load_dataset(units=...)``);
    #: with units, candidates are checked for dimensional consistency.
    units: DatasetUnits | None = None
    #: Per-row sample weights (``None``: every row weighs 1); they enter the fitting loss and
    #: the (weighted) NMSE. Read-only, finite, non-negative.
    weight: np.ndarray | None = None

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def X_train(self) -> np.ndarray:
        return self.X[self.splits.train]

    @property
    def y_train(self) -> np.ndarray:
        return self.y[self.splits.train]

    @property
    def X_val(self) -> np.ndarray:
        return self.X[self.splits.val]

    @property
    def y_val(self) -> np.ndarray:
        return self.y[self.splits.val]

    @property
    def X_test(self) -> np.ndarray:
        return self.X[self.splits.test]

    @property
    def y_test(self) -> np.ndarray:
        return self.y[self.splits.test]

    @property
    def w_train(self) -> np.ndarray | None:
        return None if self.weight is None else self.weight[self.splits.train]

    @property
    def w_val(self) -> np.ndarray | None:
        return None if self.weight is None else self.weight[self.splits.val]

    @property
    def w_test(self) -> np.ndarray | None:
        return None if self.weight is None else self.weight[self.splits.test]

    def ground_truth_formula(self) -> Formula | None:
        """The ground truth parsed with the feature names as variables, when known."""
        if self.ground_truth is None:
            return None
        return parse_formula(self.ground_truth, self.feature_names)

    def with_units(self, units: DatasetUnits | None) -> Dataset:
        """This dataset with ``units`` (``None``: unknown); the data and its hash stay as they
        are (units do not change a fit, only how candidates are judged)."""
        if units is not None and (units.names != self.feature_names):
            raise DatasetUnitsError(
                f"the units cover {', '.join(units.names)} but the dataset's variables are "
                f"{', '.join(self.feature_names)}"
            )
        return dataclasses.replace(self, units=units)

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, n={self.n}, features={self.feature_names!r}, "
            f"target={self.target_name!r}, hash={self.content_hash[:12]!r})"
        )


def check_split(split: tuple[float, float, float]) -> tuple[float, float, float]:
    """Validate (train, val, test) fractions: three non-negative numbers summing to 1."""
    try:
        parts = tuple(float(p) for p in split)
    except (TypeError, ValueError):
        raise DatasetError(f"split must be three fractions (train, val, test), got {split!r}") from None
    if len(parts) != 3 or not all(math.isfinite(p) and p >= 0 for p in parts):
        raise DatasetError(
            f"split must be three non-negative fractions (train, val, test), got {split!r}"
        )
    if parts[0] <= 0 or abs(sum(parts) - 1.0) > 1e-9:
        raise DatasetError(
            f"split fractions must sum to 1 with a non-empty train part, got {split!r}"
        )
    return parts[0], parts[1], parts[2]


def make_splits(n: int, fractions: tuple[float, float, float], seed: int, kind: str = "random",
                order: np.ndarray | None = None, variable: str | None = None) -> Splits:
    """A partition of ``range(n)``; val/test get at least one row if asked for.

    ``random``: seeded; the permutation uses its own generator (seeded by ``(seed, 1)``) so it
    does not depend on how the rows were sampled. ``ood``: rows by ascending ``order`` (the
    split variable's values; ties in row order), the lowest train, the highest test.
    ``chronological``: rows in their order.
    """
    _, f_val, f_test = fractions
    n_val = max(1, int(n * f_val)) if f_val > 0 else 0
    n_test = max(1, int(n * f_test)) if f_test > 0 else 0
    if n - n_val - n_test < 1:
        raise DatasetError(f"{n} rows are too few for the split {fractions!r}")
    if kind not in SPLIT_KINDS:
        raise DatasetError(f"split kind must be one of {', '.join(SPLIT_KINDS)}, got {kind!r}")
    if kind == "random":
        perm = np.random.default_rng([seed, 1]).permutation(n)
    elif kind == "ood":
        if order is None or len(order) != n:
            raise DatasetError("an ood split needs the split variable's values "
                               "(split_variable=NAME)")
        perm = np.argsort(np.asarray(order, dtype=np.float64), kind="stable")
    else:
        perm = np.arange(n)
    parts = (
        np.sort(perm[: n - n_val - n_test]),
        np.sort(perm[n - n_val - n_test: n - n_test]),
        np.sort(perm[n - n_test:]),
    )
    for part in parts:
        part.flags.writeable = False
    return Splits(parts[0], parts[1], parts[2], fractions, seed, kind,
                  variable if kind == "ood" else None)


def content_hash(
    feature_names: tuple[str, ...], target_name: str, X: np.ndarray, y: np.ndarray,
    splits: Splits, weight: np.ndarray | None = None,
) -> str:
    """sha256 over names, shapes, the float64 bytes of X and y, the split indices and, when
    there are any, the sample weights (so unweighted datasets keep their old hashes)."""
    digest = hashlib.sha256()
    header = {
        "format": "sr-dist-dataset-v1",
        "features": list(feature_names),
        "target": target_name,
        "shape": list(X.shape),
    }
    digest.update(json.dumps(header, sort_keys=True).encode())
    digest.update(np.ascontiguousarray(X, dtype="<f8").tobytes())
    digest.update(np.ascontiguousarray(y, dtype="<f8").tobytes())
    for part in (splits.train, splits.val, splits.test):
        digest.update(b"|")
        digest.update(np.ascontiguousarray(part, dtype="<i8").tobytes())
    if weight is not None:
        digest.update(b"|weight|")
        digest.update(np.ascontiguousarray(weight, dtype="<f8").tobytes())
    return digest.hexdigest()


def freeze(array: np.ndarray) -> np.ndarray:
    """A read-only float64 C-contiguous copy."""
    out = np.array(array, dtype=np.float64, order="C", copy=True)
    out.flags.writeable = False
    return out
