"""open_results, pareto_front and the DuckDB views over real Parquet files."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from results_helpers import T0, rows_for

from sr_dist.results import (
    CANDIDATE_SCHEMA,
    RUNS_SCHEMA,
    CandidateWriter,
    ResultsNotFound,
    RunRecord,
    best_candidate,
    duckdb_connection,
    open_results,
    pareto_front,
    write_run,
)
from sr_dist.results.layout import run_file


def _write(root, run_id, rows, dataset="feynman:I.6.2"):
    with CandidateWriter(root, run_id, dataset, "evolve", background=False) as w:
        assert not w.add([{**r, "dataset": dataset} for r in rows]).rejected


def _cand(run_id, step, complexity, val, status="ok", **extra):
    fit = {"complexity": complexity, "val_nmse": val, "status": status, **extra}
    return rows_for(run_id, 1, step0=step, **fit)[0]


# --- empty and missing -------------------------------------------------------------------------

def test_missing_or_empty_roots_say_no_results(tmp_path):
    for path in (tmp_path / "nope", tmp_path):
        with pytest.raises(ResultsNotFound, match=f"no results under {path}"):
            open_results(path)
        with pytest.raises(ResultsNotFound):
            duckdb_connection(path)
        with pytest.raises(ResultsNotFound):
            pareto_front(path)
    # Only a temporary file: still nothing readable.
    (tmp_path / "candidates" / "dataset=d" / "run_id=r").mkdir(parents=True)
    (tmp_path / "candidates" / "dataset=d" / "run_id=r" / ".x.parquet.tmp").write_bytes(b"x")
    with pytest.raises(ResultsNotFound):
        open_results(tmp_path)


def test_runs_only_gives_an_empty_typed_candidates_table(tmp_path):
    write_run(tmp_path, RunRecord(run_id="r", dataset="d", model="m", started_at=T0))
    results = open_results(tmp_path)
    assert results.candidates.to_table().schema == CANDIDATE_SCHEMA
    assert results.candidates.count_rows() == 0 and results.runs.count_rows() == 1
    con = duckdb_connection(tmp_path)
    assert con.execute("SELECT count(*) FROM candidates").fetchall() == [(0,)]
    assert con.execute("SELECT run_id, status FROM runs").fetchall() == [("r", "running")]
    assert pareto_front(tmp_path).num_rows == 0


def test_candidates_only_gives_an_empty_typed_runs_table(tmp_path):
    _write(tmp_path, "r", rows_for("r", 2))
    results = open_results(tmp_path)
    assert results.runs.to_table().schema == RUNS_SCHEMA and results.runs.count_rows() == 0
    con = duckdb_connection(tmp_path)
    assert con.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]


# --- Pareto front ------------------------------------------------------------------------------

# Behaviour table: candidates as (complexity, val_nmse, status) → expected front (step numbers).
PARETO_CASES = [
    ("strictly better as it grows", [(1, 0.5, "ok"), (2, 0.3, "ok"), (3, 0.1, "ok")], [0, 1, 2]),
    ("more complex but worse is dominated", [(1, 0.5, "ok"), (3, 0.6, "ok")], [0]),
    ("equal error at higher complexity is dominated", [(1, 0.5, "ok"), (2, 0.5, "ok")], [0]),
    ("best of one complexity wins", [(2, 0.4, "ok"), (2, 0.2, "ok"), (2, 0.3, "ok")], [1]),
    ("exact tie keeps the earliest", [(2, 0.2, "ok"), (2, 0.2, "ok")], [0]),
    ("failed candidates never count",
     [(1, 0.9, "ok"), (2, 0.0, "nonfinite"), (3, 0.5, "ok"), (4, None, "ok")], [0, 2]),
    ("null complexity is skipped", [(None, 0.1, "ok"), (5, 0.2, "ok")], [1]),
    ("unsorted input", [(5, 0.01, "ok"), (1, 0.9, "ok"), (3, 0.05, "ok"), (2, 0.5, "ok")],
     [1, 3, 2, 0]),
    ("nothing ok", [(1, 0.1, "error")], []),
]


@pytest.mark.parametrize("cands,expected", [c[1:] for c in PARETO_CASES],
                         ids=[c[0] for c in PARETO_CASES])
def test_pareto_front_cases(tmp_path, cands, expected):
    rows = [_cand("r", i, c, v, s) for i, (c, v, s) in enumerate(cands)]
    _write(tmp_path, "r", rows)
    for source in (tmp_path, open_results(tmp_path), open_results(tmp_path).candidates,
                   pa.Table.from_pylist(rows, schema=CANDIDATE_SCHEMA)):
        front = pareto_front(source, run_id="r")
        assert front["step"].to_pylist() == expected
        assert front.schema.names == CANDIDATE_SCHEMA.names
        complexities = front["complexity"].to_pylist()
        assert complexities == sorted(complexities)


def test_pareto_front_per_run_and_metric(tmp_path):
    _write(tmp_path, "a", [_cand("a", 0, 1, 0.5, test_nmse=0.1), _cand("a", 1, 2, 0.1,
                                                                         test_nmse=0.2)])
    _write(tmp_path, "b", [_cand("b", 0, 1, 0.01)], dataset="other")
    assert pareto_front(tmp_path, run_id="a")["step"].to_pylist() == [0, 1]
    assert pareto_front(tmp_path, run_id="a", metric="test_nmse")["step"].to_pylist() == [0]
    assert pareto_front(tmp_path)["run_id"].to_pylist() == ["b"]  # across runs
    assert pareto_front(tmp_path, run_id="zzz").num_rows == 0
    assert best_candidate(open_results(tmp_path).candidates.to_table())["run_id"] == "b"
    with pytest.raises(ValueError, match="metric must be one of"):
        pareto_front(tmp_path, metric="complexity")
    with pytest.raises(TypeError, match="not list"):
        pareto_front([1, 2])


# --- DuckDB views ------------------------------------------------------------------------------

def test_views_have_the_schemas_and_see_later_files(tmp_path):
    _write(tmp_path, "r1", rows_for("r1", 3))
    write_run(tmp_path, RunRecord(run_id="r1", dataset="feynman:I.6.2", model="evolve",
                                  started_at=T0))
    con = duckdb_connection(tmp_path)
    cand = con.sql("SELECT * FROM candidates").to_arrow_table()
    assert cand.schema.names == CANDIDATE_SCHEMA.names
    assert con.sql("SELECT * FROM runs").to_arrow_table().schema.names == RUNS_SCHEMA.names
    assert con.execute("SELECT count(*) FROM candidates").fetchall() == [(3,)]
    _write(tmp_path, "r1", rows_for("r1", 2, step0=3))  # flushed after the connection opened
    assert con.execute("SELECT count(*) FROM candidates").fetchall() == [(5,)]
    got = con.execute(
        "SELECT json_extract(constants, '$.c0')::DOUBLE FROM candidates WHERE step = 4"
    ).fetchall()
    assert got == [(2.0,)]  # the second row of that batch: c0 = 1 + 1


def test_runs_view_keeps_the_latest_row_per_run(tmp_path):
    record = RunRecord(run_id="r1", dataset="d", model="m", started_at=T0)
    write_run(tmp_path, record)
    # A stray older copy next to the real file (e.g. merged from another machine).
    stale = pa.Table.from_pylist(
        [record.to_row(now=T0 - timedelta(hours=1)) | {"status": "failed"}], schema=RUNS_SCHEMA
    )
    pq.write_table(stale, run_file(tmp_path, "r1").parent / "old-copy.parquet")
    write_run(tmp_path, record.finished("completed", "target_nmse"))
    con = duckdb_connection(tmp_path)
    assert con.execute("SELECT status, stop_reason FROM runs").fetchall() == [
        ("completed", "target_nmse")
    ]


def test_roots_with_glob_characters_fall_back_to_arrow_scans(tmp_path):
    root = tmp_path / "odd[1]*"
    _write(root, "r", rows_for("r", 2))
    write_run(root, RunRecord(run_id="r", dataset="d", model="m", started_at=T0))
    con = duckdb_connection(root)
    assert con.execute("SELECT count(*) FROM candidates").fetchall() == [(2,)]
    assert con.execute("SELECT run_id FROM runs").fetchall() == [("r",)]


def test_open_results_is_a_pyarrow_dataset_with_hive_filters(tmp_path):
    _write(tmp_path, "r1", rows_for("r1", 2), dataset="feynman:I.6.2")
    _write(tmp_path, "r2", rows_for("r2", 3), dataset="csv:/x/y.csv")
    cands = open_results(tmp_path).candidates
    assert isinstance(cands, ds.Dataset)
    assert cands.count_rows(filter=ds.field("dataset") == "csv:/x/y.csv") == 3
    assert cands.count_rows(filter=ds.field("run_id") == "r1") == 2
