"""``search.rank_by``: candidates rank by the chosen metric (higher-is-better ones descending),
in the episode archive and in the results' Pareto front and selection."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from sr_dist.candidate import Candidate, fitness, rank_key, rank_loss
from sr_dist.evaluator import FitResult
from sr_dist.results import pareto_front, select_candidate
from sr_dist.sr import CandidateArchive


def _fit(expr: str, val_nmse: float, complexity: int, rank_by: str = "val_nmse",
         **metrics: float) -> FitResult:
    return FitResult(expression=expr, canonical=expr, status="ok", complexity=complexity,
                     train_nmse=val_nmse, val_nmse=val_nmse, r2=1.0 - val_nmse,
                     metrics=dict(metrics), rank_by=rank_by)


def test_the_default_ranks_by_val_nmse_as_before() -> None:
    a = Candidate.from_fit(_fit("a", 0.1, 3, mae=5.0))
    b = Candidate.from_fit(_fit("b", 0.2, 3, mae=1.0))
    assert a.rank_by == "val_nmse" and fitness(a) == 0.1
    assert rank_key(a) < rank_key(b)


def test_rank_by_a_metric_reorders_the_archive() -> None:
    archive = CandidateArchive()
    archive.add([_fit("a", 0.1, 3, "mae", mae=5.0), _fit("b", 0.2, 3, "mae", mae=1.0)])
    best = archive.best()
    assert best is not None and best.expression == "b"
    assert fitness(best) == 1.0


@pytest.mark.parametrize("name", ["pearson_r", "spearman_r"])
def test_higher_is_better_metrics_rank_descending(name: str) -> None:
    archive = CandidateArchive()
    archive.add([_fit("low", 0.1, 3, name, **{name: 0.5}),
                 _fit("high", 0.3, 3, name, **{name: 0.99})])
    best = archive.best()
    assert best is not None and best.expression == "high"
    assert fitness(best) == pytest.approx(0.01)


def test_r2_ranks_like_val_nmse_and_aic_may_be_negative() -> None:
    r2 = [Candidate.from_fit(_fit(e, v, 3, "r2")) for e, v in (("x", 0.3), ("y", 0.1))]
    assert min(r2, key=rank_key).expression == "y"
    aic = [Candidate.from_fit(_fit(e, 0.1, 3, "aic", aic=v)) for e, v in (("p", -50.0),
                                                                          ("q", -80.0))]
    best = min(aic, key=rank_key)
    assert best.expression == "q" and rank_key(best)[1] == -80.0
    assert rank_loss("mae", {}) == math.inf  # a fit without the metric never wins


def _rows() -> pa.Table:
    return pa.table({
        "candidate_id": ["r:0:0:0", "r:0:1:0", "r:0:2:0"],
        "status": ["ok"] * 3, "complexity": pa.array([3, 5, 7], pa.int32()),
        "val_nmse": [0.3, 0.2, 0.1], "spearman_r": [0.95, 0.9, 0.99],
        "aic": [-10.0, -30.0, -20.0],
    })


def test_the_results_front_and_selection_take_the_new_metrics() -> None:
    table = _rows()
    front = pareto_front(table, metric="spearman_r")["candidate_id"].to_pylist()
    assert front == ["r:0:0:0", "r:0:2:0"]
    chosen = select_candidate(table, metric="spearman_r")
    assert chosen is not None and chosen["candidate_id"] == "r:0:2:0"
    chosen = select_candidate(table, metric="aic")
    assert chosen is not None and chosen["candidate_id"] == "r:0:1:0"
    with pytest.raises(ValueError, match="parsimony.*aic may be negative"):
        select_candidate(table, rule="parsimony", metric="aic")


def test_target_nmse_still_reads_the_nmse_of_the_best_by_rank() -> None:
    from sr_dist.candidate import nmse_fitness

    archive = CandidateArchive()
    archive.add([_fit("a", 0.1, 3, "mae", mae=5.0), _fit("b", 0.2, 3, "mae", mae=1.0)])
    best = archive.best()
    assert best is not None and best.expression == "b"
    assert nmse_fitness(best) == 0.2 and fitness(best) == 1.0


@pytest.mark.parametrize("rank_by", ["val_loss", "r2"])
def test_without_a_validation_split_rank_by_falls_back_to_the_train_split(rank_by: str) -> None:
    # split=[0.8, 0, 0.2]: no validation rows, so val_nmse, val_loss and r2 are null. Ranking
    # by val_nmse falls back to train_nmse; val_loss and r2 must fall back the same way, or
    # every candidate is inf and the archive ranks by complexity alone.
    fits = [FitResult(expression=e, canonical=e, status="ok", complexity=c, train_nmse=nmse,
                      val_nmse=None, r2=None, train_loss=loss, val_loss=None, rank_by=rank_by)
            for e, c, nmse, loss in (("simple", 3, 0.5, 2.0), ("good", 7, 0.01, 0.1))]
    archive = CandidateArchive()
    archive.add(fits)
    best = archive.best()
    assert best is not None and best.expression == "good"
    assert fitness(best) == pytest.approx(0.1 if rank_by == "val_loss" else 0.01)


def test_parsimony_on_a_metric_in_the_targets_units_does_not_depend_on_those_units() -> None:
    # mae and the losses are in the target's units (squared, for mse); the constant model's
    # NMSE of 1 is no baseline for them, so a change of units must not change the pick.
    picks = set()
    for scale in (1e-3, 1.0, 1e3):
        table = pa.table({"candidate_id": ["r:0:0:0", "r:0:1:0"], "status": ["ok"] * 2,
                          "complexity": pa.array([3, 5], pa.int32()), "val_nmse": [0.2, 0.1],
                          "mae": [1.0 * scale, 0.8 * scale]})
        chosen = select_candidate(table, rule="parsimony", metric="mae")
        assert chosen is not None
        picks.add(chosen["candidate_id"])
    assert len(picks) == 1, picks
