"""The float64 refit of near-exact fits (refine.py): a law the float32 fit leaves a few parts in
a million off comes back with its constants exact to float64 and its metrics in float64; fits
that are not near-exact, weighted fits and other losses are untouched."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from sr_dist.data import Dataset, dataset_from_arrays
from sr_dist.evaluator import Evaluator
from sr_dist.evaluator.refine import needs_refit, refit_float64, split_sse
from sr_dist.formula import parse_formula

NAMES = ("x0", "x1", "x2")
# An over-parametrised ratio under a root (I.34.14's shape): float32 LM stops with its constants
# a few parts in 1e5 off while the NMSE is already ~1e-12.
RATIO = "x0*sqrt((c0*x1 + c1*x2)/(c2*x1 + x2))"


def _truth(X: np.ndarray) -> np.ndarray:
    return X[:, 0] * np.sqrt((X[:, 1] + X[:, 2]) / (X[:, 2] - X[:, 1]))


@pytest.fixture(scope="module")
def ratio_data(make_dataset: Callable[..., Dataset]) -> Dataset:
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.uniform(1, 3, 500), rng.uniform(1, 2, 500), rng.uniform(3, 10, 500)])
    return dataset_from_arrays(X, _truth(X), feature_names=list(NAMES))


def test_a_near_exact_fit_gets_float64_constants_and_metrics(ratio_data: Dataset) -> None:
    plain = Evaluator(ratio_data, refine_float64=False).fit(RATIO)
    refined_ev = Evaluator(ratio_data)
    refined = refined_ev.fit(RATIO)
    assert plain.status == refined.status == "ok"
    assert needs_refit(plain.train_nmse)  # the float32 fit is near-exact, not exact
    assert refined.train_nmse is not None and refined.train_nmse < 1e-24
    assert refined.val_nmse is not None and refined.val_nmse < 1e-24
    got = [refined.constants[c] for c in ("c0", "c1", "c2")]
    assert got == pytest.approx([1.0, 1.0, -1.0], rel=1e-10, abs=1e-10)
    assert refined_ev.stats()["refined"] == 1


def test_a_poor_fit_is_left_as_the_batch_fitted_it(target_dataset: Dataset) -> None:
    a = Evaluator(target_dataset).fit("c0*x0 + c1")
    b = Evaluator(target_dataset, refine_float64=False).fit("c0*x0 + c1")
    assert a.constants == b.constants and a.train_nmse == b.train_nmse


def test_weighted_and_other_losses_are_not_refitted(ratio_data: Dataset) -> None:
    weighted = dataset_from_arrays(np.asarray(ratio_data.X_train), np.asarray(ratio_data.y_train),
                                   feature_names=list(NAMES),
                                   sample_weight=np.linspace(0.5, 2.0, len(ratio_data.y_train)))
    ev = Evaluator(weighted)
    ev.fit(RATIO)
    assert ev.stats()["refined"] == 0
    mae = Evaluator(ratio_data, loss="mae")
    mae.fit(RATIO)
    assert mae.stats()["refined"] == 0


def test_refit_refuses_what_it_cannot_improve() -> None:
    tree = parse_formula("c0*x0", NAMES).canonical_tree
    X = np.random.default_rng(0).uniform(1, 2, size=(50, 3))
    assert refit_float64(tree, NAMES, [2.0], X, 2.0 * X[:, 0]) is None  # already exact
    assert refit_float64(tree, NAMES, [np.nan], X, 2.0 * X[:, 0]) is None
    assert refit_float64(tree, NAMES, [], X, 2.0 * X[:, 0]) is None
    better = refit_float64(tree, NAMES, [1.9], X, 2.0 * X[:, 0])
    assert better is not None and better[0] == pytest.approx(2.0, rel=1e-12)
    sse, bad = split_sse(tree, NAMES, [2.0], [(X, 2.0 * X[:, 0]), (X[:0], X[:0, 0])])
    assert sse.tolist() == [0.0, 0.0] and bad.tolist() == [0, 0]


def test_an_exact_law_without_constants_reads_in_float64(ratio_data: Dataset) -> None:
    """Nothing to refit, but the float32 NMSE (rounding, ~1e-14) would look like an
    approximant's to a stop rule; the float64 one is the law's."""
    law = "x0*sqrt((x1 + x2)/(x2 - x1))"
    plain = Evaluator(ratio_data, refine_float64=False).fit(law)
    ev = Evaluator(ratio_data)
    refined = ev.fit(law)
    assert plain.status == refined.status == "ok" and needs_refit(plain.train_nmse)
    assert refined.train_nmse is not None and refined.train_nmse < 1e-24
    assert refined.val_nmse is not None and refined.val_nmse < 1e-24
    assert ev.stats()["refined"] == 1
