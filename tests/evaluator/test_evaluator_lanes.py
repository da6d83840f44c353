"""The CPU fit kernel runs a whole batch as lanes of one LM loop (kernels.py, ``lm_lanes``):
a formula's fit must not depend on its batch-mates, the batch's padding or its capacity, and a
local search on a subset of the rows (``local_subsample``) never ends worse than its start."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.evaluator.evaluator import CPU_CAPACITY, batch_capacity


def _family(seed: int, count: int) -> list[str]:
    """Formulas of one bucket (at most four constants), each with its own literals, so a lane
    that reused its batch-mate's literal registers would fit the wrong function."""
    rng = np.random.default_rng(seed)
    shapes = ("a*x0**2 + b*sin({u}*x1)/x2", "a*exp(-{u}*x2) + b*x0 + c",
              "a*x0/(x1 + {u}) + b*x2", "a*tanh({u}*x0 - m) + b*x1", "a*log({u}*x0) + b*x1*x2")
    return [shapes[i % len(shapes)].format(u=round(float(rng.uniform(0.5, 2.0)), 2))
            for i in range(count)]


@pytest.fixture(scope="module")
def data(make_dataset: Callable[..., Dataset]) -> Dataset:
    return make_dataset(lambda X: 2.5 * X[:, 0] ** 2 + np.sin(1.3 * X[:, 1]) / X[:, 2],
                        noise=0.01)


def test_a_fit_does_not_depend_on_its_batch_mates(data: Dataset) -> None:
    evaluator = Evaluator(data)
    formulas = _family(0, 2 * CPU_CAPACITY + 3)  # three calls, the last one mostly padding
    together = evaluator.fit_many(formulas)
    starts = [dict(r.constants) if r.ok else None for r in together]
    for i, text in enumerate(formulas):
        evaluator.clear_cache()
        (alone,) = evaluator.fit_many([text])  # a batch of one, the rest padding
        assert alone.status == together[i].status, text
        if alone.ok:
            assert alone.train_mse == pytest.approx(together[i].train_mse, rel=1e-5), text
            for name, value in alone.constants.items():
                assert together[i].constants[name] == pytest.approx(value, rel=1e-4, abs=1e-6)
    # The local searches too (one lane each, restarts 1): alone or together, the same.
    evaluator.clear_cache()
    local_together = evaluator.fit_many(formulas, starts=starts)
    for i, text in enumerate(formulas):
        if starts[i] is None:
            continue
        evaluator.clear_cache()
        (alone,) = evaluator.fit_many([text], starts=[starts[i]])
        assert alone.local and local_together[i].local
        assert alone.train_mse == pytest.approx(local_together[i].train_mse, rel=1e-5), text


def test_a_local_search_on_a_row_subset_never_ends_worse_than_its_start(data: Dataset) -> None:
    """The search runs on ``local_subsample`` rows; the start is kept where it is better on
    all training rows, so the invariant of the local search holds on a subset too."""
    evaluator = Evaluator(data, local_subsample=64)
    assert evaluator.stats()["rows"]["local"] == 64 < evaluator.stats()["rows"]["fit"]
    formulas = _family(1, 10)
    full = evaluator.fit_many(formulas)
    evaluator.clear_cache()
    starts = [dict(r.constants) if r.ok else None for r in full]
    rng = np.random.default_rng(2)
    # From the fit itself (a subset search can only move away from it) and from 10% off.
    for jitter in (0.0, 0.1):
        moved = [None if s is None else {k: v * (1 + jitter * rng.standard_normal())
                                         for k, v in s.items()} for s in starts]
        evaluator.clear_cache()
        local = evaluator.fit_many(formulas, starts=moved)
        y = np.asarray(data.y_train, dtype=np.float64)
        at_start = evaluator.predict(formulas, moved, np.asarray(data.X_train))
        for i, (after, start) in enumerate(zip(local, moved, strict=True)):
            if start is None:
                continue
            assert after.local and after.ok
            start_mse = float(np.mean((y - np.asarray(at_start[i], np.float64)) ** 2))
            assert after.train_mse <= start_mse * (1 + 1e-4) + 1e-12, formulas[i]


def test_subsample_off_and_validation(data: Dataset) -> None:
    assert Evaluator(data, local_subsample=0).stats()["rows"]["local"] == \
        Evaluator(data).stats()["rows"]["fit"]
    with pytest.raises(ValueError, match="local_subsample"):
        Evaluator(data, local_subsample=10)


def test_cpu_batches_are_cut_to_the_cpu_capacity() -> None:
    assert batch_capacity(64, "map") == CPU_CAPACITY
    assert batch_capacity(4, "map") == 4
    assert batch_capacity(64, "vmap") == 64  # a GPU computes its whole capacity anyway
