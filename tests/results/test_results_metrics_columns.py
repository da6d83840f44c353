"""Schema version 3: the loss and extra-metric columns are written from a fit, and files written
before them stay readable (the absent columns read as null)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sr_dist.evaluator import FitResult
from sr_dist.results import CANDIDATE_SCHEMA, candidate_row, duckdb_connection, open_results
from sr_dist.results.schema import METRIC_COLUMNS, normalize_row


def _row(run_id: str, fit: FitResult) -> dict:
    return normalize_row(candidate_row(fit, run_id, 0, 1, 0, "evolve", "feynman:I.6.2"),
                         CANDIDATE_SCHEMA)


def test_a_fit_fills_the_new_columns() -> None:
    fit = FitResult(expression="c*x", canonical="c*x", status="ok", train_nmse=0.1,
                    val_nmse=0.2, train_loss=0.5, val_loss=0.7,
                    metrics={"mae": 0.3, "spearman_r": 0.9, "aic": -12.0, "bic": None})
    row = _row("new", fit)
    assert (row["train_loss"], row["val_loss"], row["mae"]) == (0.5, 0.7, 0.3)
    assert row["spearman_r"] == 0.9 and row["aic"] == -12.0
    assert row["bic"] is None and row["pearson_r"] is None


def test_version_2_files_read_with_null_metric_columns(tmp_path: Path) -> None:
    old_schema = pa.schema([f for f in CANDIDATE_SCHEMA if f.name not in METRIC_COLUMNS])
    old = _row("old", FitResult(expression="c*x", canonical="c*x", status="ok", val_nmse=0.2))
    part = tmp_path / "candidates" / "dataset=feynman:I.6.2" / "run_id=old"
    part.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{k: old[k] for k in old_schema.names}],
                                        schema=old_schema), part / "part-0.parquet")
    table = open_results(tmp_path).candidates.to_table()
    assert table.num_rows == 1 and table["val_nmse"].to_pylist() == [0.2]
    for name in METRIC_COLUMNS:
        assert table[name].to_pylist() == [None]
    con = duckdb_connection(tmp_path)
    assert con.sql("SELECT mae, val_loss FROM candidates").fetchall() == [(None, None)]


def test_the_runs_best_is_chosen_by_the_runs_rank_by(tmp_path: Path) -> None:
    # search.rank_by=spearman_r: the archive ranks by it, so the run's best (its runs row, the
    # report, score_run's "best") must too, not by val_nmse.
    from sr_dist.results import CandidateWriter, summarize_run

    fits = [FitResult(expression=e, canonical=e, status="ok", complexity=c, train_nmse=v,
                      val_nmse=v, r2=1 - v, metrics={"spearman_r": s}, rank_by="spearman_r")
            for e, c, v, s in (("c*x0", 3, 0.10, 0.80), ("c*x0*x1", 5, 0.20, 0.99))]
    with CandidateWriter(tmp_path, "run-r", "feynman:I.6.2", "evolve", background=False) as writer:
        writer.add([candidate_row(f, "run-r", 0, i, 0, "evolve", "feynman:I.6.2")
                    for i, f in enumerate(fits)])
    count, best = summarize_run(tmp_path, "run-r", metric="spearman_r")
    assert count == 2 and best is not None and best["expression"] == "c*x0*x1"
    assert summarize_run(tmp_path, "run-r")[1]["expression"] == "c*x0"  # the default: val_nmse
    # A metric no row has (val_loss without a validation split) falls back to val_nmse.
    assert summarize_run(tmp_path, "run-r", metric="val_loss")[1]["expression"] == "c*x0"
