"""Shared fixtures: small real datasets (CSV files read by ``load_dataset``) and one Evaluator
per module so XLA compiles are paid once (executables are shared process-wide by shape)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from sr_dist.data import Dataset, load_dataset

N_ROWS = 500  # every dataset here has the same shape, so compiled buckets are reused


def write_dataset(path: Path, X: np.ndarray, y: np.ndarray, names: tuple[str, ...]) -> Dataset:
    """Write a CSV and load it through the real loader (70/15/15 seeded split)."""
    header = ",".join(names + ("y",))
    body = np.column_stack([X, y])
    np.savetxt(path, body, delimiter=",", header=header, comments="", fmt="%.17g")
    return load_dataset(f"csv:{path}", seed=0)


def inputs(seed: int = 0, n: int = N_ROWS) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(1.0, 3.0, size=(n, 3))


@pytest.fixture(scope="session")
def make_dataset(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Dataset]:
    root = tmp_path_factory.mktemp("evaluator-data")
    counter = [0]

    def make(fn: Callable[[np.ndarray], np.ndarray], seed: int = 0, n: int = N_ROWS,
             noise: float = 0.0) -> Dataset:
        X = inputs(seed, n)
        y = fn(X)
        if noise:
            y = y + noise * np.std(y) * np.random.default_rng(seed + 1).normal(size=n)
        counter[0] += 1
        return write_dataset(root / f"d{counter[0]}.csv", X, y, ("x0", "x1", "x2"))

    return make


@pytest.fixture(scope="session")
def target_dataset(make_dataset: Callable[..., Dataset]) -> Dataset:
    """Noise-free y = 2.5*x0**2 + sin(1.3*x1)/x2."""
    return make_dataset(lambda X: 2.5 * X[:, 0] ** 2 + np.sin(1.3 * X[:, 1]) / X[:, 2])
