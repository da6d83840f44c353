"""Fitting behaviour of ``Evaluator.fit_many`` on small real datasets (one Evaluator per
dataset, module-scoped, so the XLA compiles are paid once)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from sr_dist.data import Dataset
from sr_dist.evaluator import Evaluator, FitResult
from sr_dist.evaluator.evaluator import batch_capacity
from sr_dist.formula import parse_formula

TRUE = {"c0": 2.5, "c1": 1.3}


@pytest.fixture(scope="module")
def ev(target_dataset: Dataset) -> Evaluator:
    return Evaluator(target_dataset)


def rel_err(got: float, want: float) -> float:
    return abs(got - want) / abs(want)


def test_recovers_known_structure_on_noise_free_data(ev: Evaluator) -> None:
    res = ev.fit_many(["c0*x0**2 + sin(c1*x1)/x2"])[0]
    assert res.status == "ok", res.error
    assert rel_err(res.constants["c0"], 2.5) < 1e-4
    assert rel_err(res.constants["c1"], 1.3) < 1e-4
    assert res.train_nmse is not None and res.train_nmse < 1e-8
    assert res.r2 is not None and res.r2 > 1 - 1e-8
    assert res.test_nmse is not None and res.test_nmse < 1e-8


def test_constants_come_back_under_the_callers_names(ev: Evaluator) -> None:
    a, b = ev.fit_many(["k*x0**2 + sin(w*x1)/x2", "sin(alpha*x1)/x2 + beta*x0*x0"])
    assert a.ok and b.ok
    assert set(a.constants) == {"k", "w"} and set(b.constants) == {"alpha", "beta"}
    assert rel_err(a.constants["k"], 2.5) < 1e-4 and rel_err(a.constants["w"], 1.3) < 1e-4
    assert rel_err(b.constants["beta"], 2.5) < 1e-4 and rel_err(b.constants["alpha"], 1.3) < 1e-4
    assert a.expression == "k*x0**2 + sin(w*x1)/x2"


def test_linear_in_constants_reaches_least_squares_optimum(
        make_dataset: Callable[..., Dataset]) -> None:
    ds = make_dataset(lambda X: np.exp(0.3 * X[:, 0]) * X[:, 1] + np.cos(X[:, 2]), noise=0.05)
    ev = Evaluator(ds)
    formulas = ["a*x0 + b*x1 + c*x2 + d", "a*x0**2 + b*sin(x1) + c*x0*x2 + d/x2"]
    results = ev.fit_many(formulas)
    X, y = ds.X_train, ds.y_train
    designs = [
        np.column_stack([X[:, 0], X[:, 1], X[:, 2], np.ones(len(y))]),
        np.column_stack([X[:, 0] ** 2, np.sin(X[:, 1]), X[:, 0] * X[:, 2], 1 / X[:, 2]]),
    ]
    for res, A in zip(results, designs):
        assert res.ok, res.error
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        best = float(np.mean((A @ coef - y) ** 2))
        assert res.train_mse is not None
        assert res.train_mse <= best * (1 + 1e-4)
        np.testing.assert_allclose(list(res.constants.values()), coef, rtol=2e-3, atol=2e-3)


BAD = ["log(x0-x0)", "c0/(x1-x1)", "exp(exp(exp(x0)))"]
GOOD = ["c0*x0**2 + sin(c1*x1)/x2", "a*x0 + b", "x0*x1 + c*x2"]


def test_invalid_candidates_do_not_poison_the_batch(target_dataset: Dataset) -> None:
    ev = Evaluator(target_dataset)
    alone = [ev.fit_many([g])[0] for g in GOOD]
    ev.clear_cache()
    mixed = ev.fit_many([BAD[0], GOOD[0], BAD[1], GOOD[1], BAD[2], GOOD[2]])
    assert [r.status for r in mixed[0::2]] == ["nonfinite"] * 3
    for r in mixed[0::2]:
        assert r.error and "not finite" in r.error
        assert r.train_nmse == math.inf and r.r2 == -math.inf
    for lone, batch in zip(alone, mixed[1::2]):
        assert lone.status == batch.status == "ok"
        assert lone.constants == batch.constants  # bit-identical, not just close
        assert lone.train_mse == batch.train_mse and lone.val_nmse == batch.val_nmse


def test_rows_only_partly_invalid_are_nonfinite_with_counts(ev: Evaluator) -> None:
    res = ev.fit_many(["sqrt(x0 - 2) + c"])[0]  # x0 in [1, 3]: about half the rows are NaN
    assert res.status == "nonfinite"
    assert "train rows" in (res.error or "")


def test_unparseable_and_unknown_variables_are_invalid(ev: Evaluator) -> None:
    results = ev.fit_many(["x0 +", "foo(x0)", "__import__('os')", 42, "c*x0"])  # type: ignore[list-item]
    assert [r.status for r in results] == ["invalid", "invalid", "invalid", "invalid", "ok"]
    assert all(r.error for r in results[:4])
    assert "offset" in (results[0].error or "")


def test_formula_objects_are_accepted_and_checked(ev: Evaluator) -> None:
    good = parse_formula("c*x0**2", ["x0", "x1", "x2"])
    foreign = parse_formula("c*q", ["q"])
    a, b = ev.fit_many([good, foreign])
    assert a.ok and a.expression == "c*x0**2"
    assert b.status == "invalid" and "q" in (b.error or "")


def test_too_many_constants_is_an_error_not_an_exception(ev: Evaluator) -> None:
    big = " + ".join(f"k{i}*x{i % 3}" for i in range(17))
    res, ok = ev.fit_many([big, "c*x1"])
    assert res.status == "error" and "17 free constants" in (res.error or "")
    assert ok.ok


def test_cache_serves_equivalent_spellings(ev: Evaluator) -> None:
    before = ev.stats()
    first = ev.fit_many(["p*x1 + q*x2*x0"])[0]
    again = ev.fit_many(["x0*x2*r + s*x1", "p*x1 + q*x2*x0"])
    after = ev.stats()
    assert after["cache_hits"] - before["cache_hits"] == 2
    assert after["fits"] - before["fits"] == 1
    assert all(r.cached for r in again) and not first.cached
    assert again[0].constants == {"s": first.constants["p"], "r": first.constants["q"]}
    assert again[0].canonical == first.canonical


def test_constant_free_formulas_are_evaluated_without_fitting(ev: Evaluator,
                                                             target_dataset: Dataset) -> None:
    res = ev.fit_many(["2.5*x0**2 + sin(1.3*x1)/x2"])[0]
    assert res.ok and res.constants == {} and res.iterations == 0
    assert res.train_nmse is not None and res.train_nmse < 1e-10


def test_metrics_match_a_numpy_recomputation(ev: Evaluator, target_dataset: Dataset) -> None:
    from sr_dist.formula import evaluate_numpy

    res = ev.fit_many(["a*x0 + b*x1 + c"])[0]
    ds = target_dataset
    names = ds.feature_names
    for X, y, got in ((ds.X_train, ds.y_train, res.train_mse / np.var(ds.y_train)),
                      (ds.X_val, ds.y_val, res.val_nmse), (ds.X_test, ds.y_test, res.test_nmse)):
        pred = evaluate_numpy(res.expression, X, names, res.constants)
        want = float(np.mean((pred - y) ** 2) / np.var(y))
        assert got == pytest.approx(want, rel=1e-4)
    assert res.r2 == pytest.approx(1 - res.val_nmse)


def test_stats_report_the_counters(ev: Evaluator) -> None:
    ev.fit_many(["a*x2 + b*x1**2"])
    s = ev.stats()
    for key in ("compiles", "compile_s", "fits", "cache_hits", "fits_per_s", "batches",
                "mean_batch_size", "buckets"):
        assert key in s
    assert s["fits"] >= 1 and s["fits_per_s"] > 0 and s["batches"] >= 1
    assert s["layout"] == "map"


def test_bad_options_are_rejected(target_dataset: Dataset) -> None:
    with pytest.raises(ValueError, match="restarts"):
        Evaluator(target_dataset, restarts=0)
    with pytest.raises(ValueError, match="dtype"):
        Evaluator(target_dataset, dtype="float16")
    with pytest.raises(ValueError, match="const_buckets must be positive"):
        Evaluator(target_dataset, const_buckets=(0, 2))
    with pytest.raises(TypeError):
        Evaluator(target_dataset, no_such_option=1)


def test_results_are_plain_frozen_values(ev: Evaluator) -> None:
    import pickle

    res = ev.fit_many(["a*x0"])[0]
    assert isinstance(res, FitResult)
    assert pickle.loads(pickle.dumps(res)) == res
    assert res.to_dict()["status"] == "ok"
    with pytest.raises(AttributeError):
        res.status = "error"  # type: ignore[misc]


def test_a_call_split_into_several_batches_matches_lone_fits(target_dataset: Dataset) -> None:
    """66 formulas of one bucket need several calls of the capacity (64, on the CPU 16)."""
    formulas = [f"a*x0**{p} + b*x{j}" for p in range(1, 23) for j in (0, 1, 2)]
    ev = Evaluator(target_dataset)
    together = ev.fit_many(formulas)
    capacity = batch_capacity(ev.options.batch_size, ev.stats()["layout"])
    assert ev.stats()["batches"] == -(-66 // capacity) and ev.stats()["fits"] == 66
    ev.clear_cache()
    for idx in (0, 40, 65):  # first batch, second batch, last
        alone = ev.fit_many([formulas[idx]])[0]
        assert alone.constants == together[idx].constants
        assert alone.train_mse == together[idx].train_mse


def test_parsed_texts_are_kept_to_a_bound_and_serve_the_same_results(
        target_dataset: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    import sr_dist.evaluator.evaluator as module

    monkeypatch.setattr(module, "PARSE_CACHE_SIZE", 2)
    fresh = Evaluator(target_dataset)
    texts = ["a*x0 + b", "a*x1 + b", "a*x2 + b"]
    first = fresh.fit_many(texts)
    assert list(fresh._parsed) == texts[1:]  # the oldest parse made room
    again = fresh.fit_many([texts[2], texts[0], "x0 +", "x0 +"])
    assert [r.expression for r in again[:2]] == [texts[2], texts[0]]
    assert again[0].constants == first[2].constants and again[1].constants == first[0].constants
    assert [r.status for r in again[2:]] == ["invalid", "invalid"]  # bad text: never kept
    assert list(fresh._parsed) == [texts[2], texts[0]]
