"""The embedded Feynman table: every equation parses, samples finitely, and loads reproducibly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sr_dist.data import (
    Dataset,
    DatasetError,
    feynman_equation,
    feynman_equations,
    load_dataset,
)
from sr_dist.formula import NAMED_NUMBERS, evaluate_numpy, is_identifier, parse_formula

EQUATIONS = feynman_equations()


def test_table_has_100_equations_with_unique_names() -> None:
    assert len(EQUATIONS) == 100
    assert len({eq.filename for eq in EQUATIONS}) == 100


@pytest.mark.parametrize("eq", EQUATIONS, ids=lambda eq: eq.filename)
def test_every_equation_parses_and_samples_finite(eq) -> None:
    names = eq.variable_names
    assert names and all(is_identifier(n) and n not in NAMED_NUMBERS for n in names)
    assert all(v.low < v.high for v in eq.variables)
    f = parse_formula(eq.formula, names)
    assert f.constants == ()  # the ground truths have no free constants
    assert set(f.variables) == set(names)
    ds = load_dataset(f"feynman:{eq.filename}", n=500, seed=3)
    assert ds.X.shape == (500, len(names)) and ds.y.shape == (500,)
    assert np.isfinite(ds.y).all()
    for j, var in enumerate(eq.variables):
        assert var.low <= ds.X[:, j].min() and ds.X[:, j].max() <= var.high
    assert ds.ground_truth == eq.formula
    assert ds.ground_truth_formula() is not None
    # the description names the equation and variables but never leaks the formula
    assert eq.filename in ds.description and eq.formula not in ds.description
    assert all(name in ds.description for name in names)


def test_greek_and_keyword_like_names() -> None:
    assert "lambd" in feynman_equation("I.30.5").variable_names
    assert "gamma" in feynman_equation("I.39.11").variable_names
    assert "beta" in feynman_equation("III.17.37").variable_names
    assert "Int_0" in feynman_equation("I.30.3").variable_names
    assert "ln(" in feynman_equation("I.44.4").formula  # parsed through the `ln` alias
    ds = load_dataset("feynman:III.17.37", n=50)
    assert ds.feature_names == ("beta", "alpha", "theta")


def test_values_match_an_independent_numpy_formula() -> None:
    ds = load_dataset("feynman:I.6.2", n=200, seed=5)
    sigma, theta = ds.X[:, 0], ds.X[:, 1]
    expected = np.exp(-((theta / sigma) ** 2) / 2) / (np.sqrt(2 * np.pi) * sigma)
    np.testing.assert_allclose(ds.y, expected, rtol=1e-14)
    assert ds.feature_names == ("sigma", "theta") and ds.target_name == "f"
    assert ds.name == "feynman:I.6.2" and ds.source == "feynman:I.6.2"


def test_default_size_and_split() -> None:
    ds = load_dataset("feynman:I.12.1")
    assert ds.n == 10_000
    assert (len(ds.splits.train), len(ds.splits.val), len(ds.splits.test)) == (7000, 1500, 1500)
    assert ds.X_train.shape == (7000, 2) and ds.y_val.shape == (1500,) and ds.X_test.shape[0] == 1500


def test_split_is_a_partition_and_configurable() -> None:
    ds = load_dataset("feynman:I.8.14", n=1000, split=(0.5, 0.3, 0.2))
    parts = [ds.splits.train, ds.splits.val, ds.splits.test]
    assert [len(p) for p in parts] == [500, 300, 200]
    joined = np.concatenate(parts)
    assert sorted(joined.tolist()) == list(range(1000))
    np.testing.assert_array_equal(ds.y_train, ds.y[ds.splits.train])
    no_test = load_dataset("feynman:I.8.14", n=100, split=(0.8, 0.2, 0.0))
    assert len(no_test.splits.test) == 0 and len(no_test.splits.val) == 20


def test_determinism_and_hash() -> None:
    a = load_dataset("feynman:II.6.15a", n=300, seed=11)
    b = load_dataset("feynman:II.6.15a", n=300, seed=11)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.splits.test, b.splits.test)
    assert a.content_hash == b.content_hash and len(a.content_hash) == 64
    c = load_dataset("feynman:II.6.15a", n=300, seed=12)
    assert c.content_hash != a.content_hash
    assert not np.array_equal(c.splits.test, a.splits.test)
    d = load_dataset("feynman:II.6.15a", n=300, seed=11, split=(0.6, 0.2, 0.2))
    assert d.content_hash != a.content_hash  # the split is part of the content


def test_hash_is_stable_across_processes() -> None:
    code = (
        "from sr_dist.data import load_dataset;"
        "print(load_dataset('feynman:I.34.8', n=123, seed=7, noise=0.05).content_hash)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root)
    here = load_dataset("feynman:I.34.8", n=123, seed=7, noise=0.05).content_hash
    assert out.stdout.strip() == here


def test_noise_is_scaled_by_the_target_spread() -> None:
    clean = load_dataset("feynman:I.12.1", n=5000, seed=1)
    noisy = load_dataset("feynman:I.12.1", n=5000, seed=1, noise=0.1)
    np.testing.assert_array_equal(clean.X, noisy.X)
    ratio = np.std(noisy.y - clean.y) / np.std(clean.y)
    assert 0.09 < ratio < 0.11
    assert "noise" in noisy.description and "0.1" in noisy.description
    assert noisy.content_hash != clean.content_hash


def test_arrays_are_read_only() -> None:
    ds = load_dataset("feynman:I.12.1", n=20)
    with pytest.raises(ValueError):
        ds.X[0, 0] = 1.0
    with pytest.raises(ValueError):
        ds.y[0] = 1.0
    assert isinstance(ds, Dataset) and "I.12.1" in repr(ds)


def test_evaluate_numpy_reproduces_y() -> None:
    ds = load_dataset("feynman:III.9.52", n=100)
    f = ds.ground_truth_formula()
    assert f is not None
    np.testing.assert_array_equal(evaluate_numpy(f, ds.X, ds.feature_names), ds.y)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source": "feynman:I.6.3"}, "did you mean I.6.2"),
        ({"source": "feynman:"}, "unknown dataset source"),
        ({"source": "feynman:I.6.2", "target": "g"}, "has the target 'f'"),
        ({"source": "feynman:I.6.2", "n": 9}, "fewer than 10 rows"),
        ({"source": "feynman:I.6.2", "n": 2.5}, "n must be an integer"),
        ({"source": "feynman:I.6.2", "seed": -1}, "seed must be a non-negative integer"),
        ({"source": "feynman:I.6.2", "noise": -0.1}, "noise must be a finite number"),
        ({"source": "feynman:I.6.2", "noise": float("nan")}, "noise must be a finite number"),
        ({"source": "feynman:I.6.2", "split": (0.5, 0.5, 0.5)}, "must sum to 1"),
        ({"source": "feynman:I.6.2", "split": (0.0, 0.5, 0.5)}, "non-empty train part"),
        ({"source": "feynman:I.6.2", "split": (0.5, 0.5)}, "three non-negative fractions"),
        ({"source": "hf:foo/bar"}, "feynman:, csv:, parquet:"),
        ({"source": "data.txt"}, "feynman:, csv:, parquet:"),
        ({"source": ""}, "non-empty string"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(DatasetError) as info:
        load_dataset(**kwargs)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)
