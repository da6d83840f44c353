"""A small real regression problem for the agent and formula-tool tests.

One CSV dataset (300 rows, variables ``x0``/``x1``, target ``y = 2.5*x0*x1``) read by the real
loader, and one real :class:`~sr_dist.evaluator.Evaluator` per session: XLA compiles are paid
once. Tests keep to formulas with at most two constants so only a couple of shape buckets are
ever compiled.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sr_dist.data import Dataset, load_dataset
from sr_dist.evaluator import Evaluator

N_ROWS = 300
TRUTH = "2.5*x0*x1"


def write_problem(path: Path, n: int = N_ROWS, seed: int = 0) -> Dataset:
    """Write the CSV and load it through ``load_dataset`` (seeded 70/15/15 split)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(1.0, 3.0, size=(n, 2))
    y = 2.5 * X[:, 0] * X[:, 1]
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="x0,x1,y", comments="", fmt="%.17g")
    return load_dataset(f"csv:{path}", seed=0)


class FailingEvaluator:
    """An evaluator whose backend is gone (as when the Ray actor died): every fit raises."""

    def __init__(self, message: str = "evaluator actor died") -> None:
        self.message = message
        self.calls = 0

    def fit_many(self, formulas: list[str]) -> list[Any]:
        self.calls += 1
        raise ConnectionError(self.message)


class AsyncEvaluator:
    """A real evaluator behind an ``async fit_many`` (the shape of an actor-handle adapter)."""

    def __init__(self, inner: Evaluator) -> None:
        self.inner = inner

    async def fit_many(self, formulas: list[str]) -> list[Any]:
        return self.inner.fit_many(formulas)


@pytest.fixture(scope="session")
def agent_dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return write_problem(tmp_path_factory.mktemp("agent-data") / "problem.csv")


@pytest.fixture(scope="session")
def agent_evaluator(agent_dataset: Dataset) -> Iterator[Evaluator]:
    yield Evaluator(agent_dataset)
