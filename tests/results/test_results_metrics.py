"""LLM-SRBench-style metrics: the pure definitions (a case table) and ``score_run`` on a run
written by the real writer, with its dataset rebuilt from the runs row's config."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from sr_dist.data import load_dataset
from sr_dist.formula import evaluate_numpy
from sr_dist.results import (
    CandidateWriter,
    RunRecord,
    ScoreError,
    candidate_row,
    regression_metrics,
    score_run,
    write_run,
)

# (name, y_true, y_pred, expected subset of the metrics)
CASES: list[tuple[str, list[float], list[float], dict[str, float]]] = [
    ("perfect", [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0],
     {"nmse": 0.0, "r2": 1.0, "acc_0.1": 1.0, "acc_0.1_worst5": 1.0, "point_acc_0.1": 1.0}),
    ("mean predictor", [1.0, 2.0, 3.0, 4.0], [2.5, 2.5, 2.5, 2.5],
     {"nmse": 1.0, "r2": 0.0, "acc_0.1": 0.0, "point_acc_0.1": 0.0}),
    ("all within 5%", [10.0, 20.0, 40.0], [10.5, 19.0, 42.0],
     {"acc_0.1": 1.0, "max_rel_error": 0.05}),
    ("one point at 20% fails Acc", [10.0, 20.0, 40.0, 80.0], [10.0, 20.0, 40.0, 96.0],
     {"acc_0.1": 0.0, "point_acc_0.1": 0.75, "max_rel_error": 0.2}),
    ("non-finite prediction", [1.0, 2.0], [1.0, math.nan],
     {"nmse": math.inf, "r2": -math.inf, "acc_0.1": 0.0, "point_acc_0.1": 0.5}),
]


@pytest.mark.parametrize("name,y,p,expected", CASES, ids=[c[0] for c in CASES])
def test_regression_metrics_cases(name: str, y: list[float], p: list[float],
                                  expected: dict[str, float]) -> None:
    got = regression_metrics(y, p)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_worst5_ignores_the_worst_five_percent() -> None:
    y = np.arange(1.0, 101.0)
    p = y.copy()
    p[:3] *= 2.0  # 3% of the points are 100% off
    got = regression_metrics(y, p)
    assert got["acc_0.1"] == 0.0
    assert got["acc_0.1_worst5"] == 1.0
    p[:10] *= 2.0  # now 10% are off: the 95th percentile is too
    assert regression_metrics(y, p)["acc_0.1_worst5"] == 0.0


def test_worst5_passes_at_exactly_95_percent_within_tolerance() -> None:
    """The reference rule counts points; an interpolated 95th percentile would say 0.15 here."""
    y = np.arange(1.0, 101.0)
    p = y.copy()
    p[:5] *= 4.0  # 5 of 100 points 300% off, 95 exact
    got = regression_metrics(y, p)
    assert got["point_acc_0.1"] == pytest.approx(0.95)
    assert got["acc_0.1_worst5"] == 1.0
    p[5] *= 4.0
    assert regression_metrics(y, p)["acc_0.1_worst5"] == 0.0


def test_worst5_counts_a_non_finite_prediction_as_a_miss() -> None:
    y = np.arange(1.0, 101.0)
    p = y.copy()
    p[0] = math.nan
    got = regression_metrics(y, p)
    assert got["nmse"] == math.inf and got["acc_0.1"] == 0.0
    assert got["acc_0.1_worst5"] == 1.0
    p[:6] = math.inf
    assert regression_metrics(y, p)["acc_0.1_worst5"] == 0.0


@pytest.mark.parametrize("seed", range(20))
def test_worst5_agrees_with_the_reference_accuracy_l1_rule(seed: int) -> None:
    """Kamienny et al.'s code: ``np.isclose(pred, true, atol=0, rtol=tau).mean() >= 0.95``."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=400) * 10 + rng.choice([-20.0, 20.0], size=400)
    scale = rng.choice([0.01, 0.05, 0.08, 0.12])
    p = y * (1 + scale * rng.standard_normal(size=400))
    for tau in (0.1, 0.05, 0.01):
        reference = float(np.isclose(p, y, atol=0.0, rtol=tau).mean() >= 0.95)
        got = regression_metrics(y, p, taus=(tau,))
        assert got[f"acc_{tau:g}_worst5"] == reference, (seed, tau)


def test_nmse_and_r2_match_their_definitions() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=200)
    p = y + 0.3 * rng.normal(size=200)
    got = regression_metrics(y, p, taus=(0.1, 0.01))
    mse = np.mean((p - y) ** 2)
    assert got["nmse"] == pytest.approx(mse / np.var(y))
    assert got["r2"] == pytest.approx(1 - np.sum((p - y) ** 2) / np.sum((y - y.mean()) ** 2))
    assert "acc_0.01" in got and "acc_0.01_worst5" in got


@pytest.mark.parametrize("y,p,taus", [([1.0, 2.0], [1.0], (0.1,)), ([], [], (0.1,)),
                                      ([1.0], [1.0], (-0.1,)), ([math.inf], [1.0], (0.1,))])
def test_regression_metrics_rejects_bad_input(y: list[float], p: list[float],
                                              taus: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        regression_metrics(y, p, taus=taus)


CONFIG = """dataset:
  source: feynman:I.12.2
  n: 300
  seed: 3
  noise: 0.0
  split: [0.7, 0.15, 0.15]
search:
  agents: 1
"""


def _write_run(path: Path, constants: dict[str, float]) -> str:
    run_id = "run-metrics-1"
    started = datetime(2025, 1, 1, tzinfo=UTC)
    with CandidateWriter(path, run_id, "feynman:I.12.2", "evolve", background=False) as w:
        rows = [
            candidate_row({"expression": "c0*q1*q2/(epsilon*r**2)", "constants": constants,
                           "status": "ok", "val_nmse": 1e-14, "test_nmse": 1e-14},
                          run_id, 0, 0, 0, "evolve", "feynman:I.12.2"),
            candidate_row({"expression": "c0*q1", "constants": {"c0": 2.0}, "status": "ok",
                           "val_nmse": 0.5, "test_nmse": 0.5},
                          run_id, 0, 1, 0, "evolve", "feynman:I.12.2"),
        ]
        w.add(rows)
    best = rows[0]
    record = RunRecord(run_id=run_id, dataset="feynman:I.12.2", model="evolve",
                       started_at=started, config=CONFIG).with_best(best, 2)
    write_run(path, record.finished("completed", "target_nmse"))
    return run_id


def test_score_run_scores_the_best_candidate_on_the_rebuilt_test_split(tmp_path: Path) -> None:
    exact = {"c0": 1.0 / (4.0 * math.pi)}
    run_id = _write_run(tmp_path, exact)
    score = score_run(tmp_path, run_id)
    assert score.expression == "c0*q1*q2/(epsilon*r**2)"
    assert score.split == "test"
    ds = load_dataset("feynman:I.12.2", n=300, seed=3)
    assert score.metrics["n"] == len(ds.y_test)
    assert score.metrics["nmse"] < 1e-20
    assert score.metrics["acc_0.1"] == 1.0 and score.metrics["r2"] == pytest.approx(1.0)
    # The other candidate, scored explicitly, is worse and matches a direct computation.
    other = score_run(tmp_path, run_id, candidate_id=_other_id(tmp_path, run_id))
    pred = evaluate_numpy("c0*q1", ds.X_test, ds.feature_names, {"c0": 2.0})
    assert other.metrics["nmse"] == pytest.approx(regression_metrics(ds.y_test, pred)["nmse"])
    assert other.as_dict()["run_id"] == run_id


def _other_id(path: Path, run_id: str) -> str:
    from sr_dist.results import open_results

    table = open_results(path).candidates.to_table(columns=["candidate_id", "expression"])
    return next(r["candidate_id"] for r in table.to_pylist() if r["expression"] == "c0*q1")


def test_score_run_reports_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ScoreError, match="no run"):
        score_run(tmp_path, "missing")
    run_id = _write_run(tmp_path, {"c0": 1.0})
    with pytest.raises(ScoreError, match="split"):
        score_run(tmp_path, run_id, split="holdout")
    with pytest.raises(ScoreError, match="not in the candidates table"):
        score_run(tmp_path, run_id, candidate_id="nope")
