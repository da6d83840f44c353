"""Local searches from given starts (``Evaluator.fit_many(formulas, starts=...)``): the
invariants over generated formulas, the cache's rules, and the refusals."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator
from sr_dist.evaluator.starts import UNNAMED_START, StartError, check_starts, start_vector

#: Generated structures of the family ``a*g(x) + b*h(x) (+ c)`` and nonlinear ones, each with
#: its constants in the caller's names (not the canonical order).
FAMILY = (
    "a*x0**2 + b*sin(k*x1)/x2",
    "k*x1 + a*x0**2",
    "a*exp(-k*x2) + b*x0",
    "sin(k*x1 + p)*a + b",
    "a*x0/(x1 + k) + b*x2",
    "a*log(k*x0) + b",
    "a*x0**2 + b*x1 + c*x2 + d",
    "a*tanh(k*x0 - m) + b*x1",
)


@pytest.fixture(scope="module")
def data(make_dataset: Callable[..., Dataset]) -> Dataset:
    return make_dataset(lambda X: 2.5 * X[:, 0] ** 2 + np.sin(1.3 * X[:, 1]) / X[:, 2],
                        noise=0.01)


@pytest.fixture(scope="module")
def evaluator(data: Dataset) -> Evaluator:
    return Evaluator(data)


def test_a_local_search_never_ends_worse_than_its_start(evaluator: Evaluator) -> None:
    """LM accepts only steps that lower the loss, so a local search from the full fit's
    constants ends at most as far from the data as the full fit (float32 rounding aside)."""
    evaluator.clear_cache()
    full = evaluator.fit_many(list(FAMILY))
    assert all(r.status == "ok" and not r.local for r in full)
    evaluator.clear_cache()
    local = evaluator.fit_many(list(FAMILY), starts=[dict(r.constants) for r in full])
    for before, after in zip(full, local, strict=True):
        assert after.status == "ok" and after.local and not after.cached
        assert set(after.constants) == set(before.constants)  # the caller's names
        assert after.train_mse <= before.train_mse * (1 + 1e-4) + 1e-12
        assert after.iterations <= evaluator.options.local_iters + evaluator.options.polish_iters + 1


def test_a_local_search_from_perturbed_constants_gets_back_to_the_fit(evaluator: Evaluator) -> None:
    """Inherited constants are near, not at, the child's optimum: from 10% off, the local
    search recovers the full fit's accuracy on this family."""
    evaluator.clear_cache()
    full = evaluator.fit_many(list(FAMILY))
    rng = np.random.default_rng(3)
    starts = [{k: v * (1 + 0.1 * rng.uniform(-1, 1)) for k, v in r.constants.items()} for r in full]
    evaluator.clear_cache()
    local = evaluator.fit_many(list(FAMILY), starts=starts)
    close = [after.train_mse <= before.train_mse * 1.01 + 1e-12
             for before, after in zip(full, local, strict=True)]
    assert sum(close) >= len(FAMILY) - 1


def test_unnamed_constants_start_at_one_and_names_map_to_canonical_positions() -> None:
    # canonical_names[j] is the caller's name of canonical constant j.
    vec = start_vector({"b": 2.0, "a": -3.0}, ["a", "b", "k"], ["k", "a", "b"])
    assert vec.tolist() == [UNNAMED_START, -3.0, 2.0]
    with pytest.raises(StartError, match="does not have"):
        start_vector({"z": 1.0}, ["a"], ["a"])
    for bad in (float("nan"), float("inf"), "1", True, None):
        with pytest.raises(StartError, match="finite number"):
            start_vector({"a": bad}, ["a"], ["a"])


def test_the_cache_serves_local_fits_to_local_requests_and_refits_them_for_full_ones(
        evaluator: Evaluator) -> None:
    evaluator.clear_cache()
    text = "a*x0**2 + b*sin(k*x1)/x2"
    local = evaluator.fit_many([text], starts=[{"a": 2.4, "b": 1.0, "k": 1.2}])[0]
    assert local.local and not local.cached
    again = evaluator.fit_many(["p*x0**2 + q*sin(r*x1)/x2"], starts=[{"p": 1.0}])[0]
    assert again.cached and again.local  # same structure: served, whatever the start
    full = evaluator.fit_many([text])[0]
    assert not full.local and not full.cached  # a full request refits a local-only entry
    assert full.train_mse <= local.train_mse * (1 + 1e-4) + 1e-12
    later = evaluator.fit_many([text], starts=[{"a": 9.0}])[0]
    assert later.cached and not later.local  # the full fit serves local requests


def test_one_batch_asking_both_ways_gets_the_full_fit(evaluator: Evaluator) -> None:
    evaluator.clear_cache()
    before = evaluator.stats()
    out = evaluator.fit_many(["a*x0 + b", "c + d*x0", "k*x1"], starts=[{"a": 1.0}, None, {"k": 2.0}])
    assert [r.local for r in out] == [False, False, True]
    after = evaluator.stats()
    assert after["fits"] - before["fits"] == 2
    assert after["local_fits"] - before["local_fits"] == 1


def test_bad_starts(evaluator: Evaluator) -> None:
    out = evaluator.fit_many(["a*x0", "a*x0 + b", "x0**2"],
                             starts=[{"q": 1.0}, {"a": float("nan")}, {}])
    assert [r.status for r in out] == ["invalid", "invalid", "ok"]
    assert "q" in (out[0].error or "") and "its constants: a" in (out[0].error or "")
    assert "finite" in (out[1].error or "")
    with pytest.raises(ValueError, match="one per formula"):
        evaluator.fit_many(["a*x0"], starts=[])
    with pytest.raises(ValueError, match="mapping"):
        evaluator.fit_many(["a*x0"], starts=[[1.0]])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="list"):
        check_starts({"a": 1.0}, 1)  # type: ignore[arg-type]
