"""Issue 17 end to end on a real local Ray cluster: evaluator.loss, search.metrics and
search.rank_by reach the Parquet columns of a run (one short evolve run), and so does each
candidate's origin."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from sr_dist.results import duckdb_connection
from sr_dist.search import run_search
from tests.reliability.runs import compose_cfg as _cfg

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]


def test_loss_and_metrics_reach_the_candidate_columns(ray_cluster: None, tmp_path: Path) -> None:
    summary = run_search(
        # One constant bucket keeps the compiles of this loss (and the metrics' predictions)
        # to a few.
        _cfg(tmp_path, "dataset.n=600", "search.agents=1",
             "search.max_candidates=30", "+evaluator.const_buckets=[4]", "search.max_seconds=120", "search.target_nmse=null",
             "evaluator.loss=huber", "evaluator.huber_delta=0.05",
             "search.metrics=[r2,mae,spearman_r]", "search.rank_by=spearman_r",
             "dataset.split=ood", "dataset.split_variable=theta"),
        stream=io.StringIO(), handle_signals=False,
    )
    assert summary.status == "completed", summary
    con = duckdb_connection(tmp_path)
    rows = con.sql(
        "SELECT train_loss, val_loss, train_mse, mae, spearman_r, aic, r2, val_nmse "
        "FROM candidates WHERE status = 'ok'").fetchall()
    assert len(rows) >= 5
    for train_loss, val_loss, _mse, mae, spearman, aic, r2, val_nmse in rows:
        assert train_loss is not None and val_loss is not None
        assert mae is not None and mae >= 0
        assert aic is None  # not asked for
        assert r2 == pytest.approx(1.0 - val_nmse)
        assert spearman is None or -1.0 <= spearman <= 1.0
    # Huber's loss is not the MSE: with a small delta it is far below it on a poor fit.
    assert any(t < 0.5 * m for t, _, m, *_ in rows if m and m > 1e-3)
    config = con.sql("SELECT config FROM runs").fetchall()[0][0]
    assert "loss: huber" in config and "rank_by: spearman_r" in config
    assert "split: ood" in config
    # The run's best (its runs row) is the best by search.rank_by, as the archive ranks.
    best_id = con.sql("SELECT best_candidate_id FROM runs").fetchall()[0][0]
    best_spearman, top = con.sql(
        f"SELECT (SELECT spearman_r FROM candidates WHERE candidate_id = '{best_id}'), "
        "max(spearman_r) FROM candidates WHERE status = 'ok'").fetchall()[0]
    assert best_spearman == pytest.approx(top)
    # Every row says where evolve's formula came from (issue 31's origin column): the first
    # batch is the seed library's, each seed under its source's name.
    origins = dict(con.sql("SELECT coalesce(origin, 'null'), count(*) FROM candidates GROUP BY 1").fetchall())
    assert "null" not in origins and any(o.startswith("library/") for o in origins), origins
