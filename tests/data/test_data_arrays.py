"""dataset_from_arrays: arrays in memory become the same Dataset value, with the CSV path's checks."""

from __future__ import annotations

import numpy as np
import pytest

from sr_dist.data import ARRAYS_SCHEME, DatasetError, DatasetUnitsError, dataset_from_arrays


def _xy(rows: int = 50) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.uniform(1, 2, (rows, 2))
    return X, X[:, 0] * 3 + X[:, 1]


def test_arrays_become_a_dataset_named_by_content() -> None:
    X, y = _xy()
    a = dataset_from_arrays(X, y, ["m", "v"], "F", seed=2, split=(0.6, 0.2, 0.2))
    assert a.feature_names == ("m", "v") and a.target_name == "F" and a.n == 50
    assert a.name == f"{ARRAYS_SCHEME}{a.content_hash[:12]}" and a.source == a.name
    assert np.array_equal(a.X, X) and not a.X.flags.writeable
    assert (len(a.splits.train), len(a.splits.val), len(a.splits.test)) == (30, 10, 10)
    assert "In-memory arrays" in a.description and "'F'" in a.description
    # Same data and split: same name (a resumed run checks it); another split: another name.
    assert dataset_from_arrays(X, y, ["m", "v"], "F", seed=2, split=(0.6, 0.2, 0.2)).name == a.name
    assert dataset_from_arrays(X, y, ["m", "v"], "F", seed=3, split=(0.6, 0.2, 0.2)).name != a.name
    assert dataset_from_arrays(X, y).feature_names == ("x0", "x1")


def test_units_are_checked_against_the_names() -> None:
    X, y = _xy()
    d = dataset_from_arrays(X, y, ["m", "a"], "F", units={"m": "kg", "a": "m/s**2", "F": "kg*m/s**2"})
    assert d.units is not None and d.units.names == ("m", "a")
    with pytest.raises(DatasetUnitsError):
        dataset_from_arrays(X, y, ["m", "a"], "F", units={"m": "kg", "F": "N"})


X0, Y0 = _xy()
BAD = [
    ((X0[:, 0], Y0), {}, "X must be 2-D"),
    ((X0, Y0[:-1]), {}, "X has 50 rows but y has 49"),
    ((X0[:1], Y0[:1]), {}, "got 1 sample (rows); at least 10"),
    ((X0, Y0), {"feature_names": ["a"]}, "1 variable names for 2 columns"),
    ((X0, Y0), {"feature_names": ["a", "a"]}, "duplicate variable names: a"),
    ((X0, Y0), {"feature_names": ["a", "sin"]}, "variable name 'sin' cannot be a formula variable"),
    ((X0, Y0), {"feature_names": ["a", "pi"]}, "pick another name"),
    ((X0, Y0), {"feature_names": ["a", "y"]}, "also a variable name"),
    ((np.where(np.arange(100).reshape(50, 2) == 7, np.nan, X0), Y0), {},
     "feature array 'x1' has 1 missing or non-finite value (first at row 3)"),
    ((X0, np.where(np.arange(50) == 4, np.inf, Y0)), {}, "target array 'y' has 1 missing"),
    ((X0, np.full(50, 2.0)), {}, "target is constant"),
    ((X0, Y0), {"split": (0.5, 0.6, 0.1)}, "split fractions must sum to 1"),
]


@pytest.mark.parametrize(("args", "kwargs", "message"), BAD, ids=[b[2][:30] for b in BAD])
def test_bad_arrays(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(DatasetError) as info:
        dataset_from_arrays(*args, **kwargs)
    assert message in str(info.value)
