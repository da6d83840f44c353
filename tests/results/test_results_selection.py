"""Model selection: ``best`` (lowest validation NMSE) and ``parsimony`` (PySR's score rule),
as a table of fronts, plus ``score_run(select=...)`` on a run written by the real writer."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from results_helpers import T0

from sr_dist.results import (
    CandidateWriter,
    RunRecord,
    candidate_row,
    score_run,
    select_candidate,
    write_run,
)

# (name, [(complexity, val_nmse)], loss_factor, complexity chosen by best, ... by parsimony)
CASES: list[tuple[str, list[tuple[int, float]], float, int, int]] = [
    ("noisy data: the law at the floor beats longer overfits",
     [(3, 1e-2), (7, 1.00e-4), (15, 9.6e-5), (25, 9.4e-5)], 1.5, 25, 7),
    # Both rules rank NMSEs to sr_dist.candidate.NMSE_RESOLUTION: of exact fits, the simplest.
    ("clean data: rounding-level gains do not count",
     [(3, 1e-2), (9, 1e-14), (15, 1e-15), (30, 1e-16)], 1.5, 9, 9),
    ("one formula", [(5, 0.3)], 1.5, 5, 5),
    ("a steep but too lossy step is not eligible",
     [(3, 1e-1), (5, 1e-3), (20, 1e-4)], 1.5, 20, 20),
    ("... unless loss_factor admits it",
     [(3, 1e-1), (5, 1e-3), (20, 1e-4)], 20.0, 20, 5),
    ("dominated rows are never chosen",
     [(3, 1e-2), (4, 5e-2), (7, 1e-4), (8, 2e-4), (12, 9.9e-5)], 1.5, 12, 7),
]


def _table(points: list[tuple[int, float]], *, status: str = "ok") -> pa.Table:
    return pa.table({
        "candidate_id": [f"r:0:{i}:0" for i in range(len(points))],
        "status": [status] * len(points),
        "complexity": pa.array([c for c, _ in points], pa.int32()),
        "val_nmse": [v for _, v in points],
        "created_at": [T0 + timedelta(seconds=i) for i in range(len(points))],
    })


@pytest.mark.parametrize("name,points,factor,best,parsimony", CASES, ids=[c[0] for c in CASES])
def test_selection_rules(name: str, points: list[tuple[int, float]], factor: float,
                         best: int, parsimony: int) -> None:
    table = _table(points)
    assert select_candidate(table, rule="best")["complexity"] == best
    got = select_candidate(table, rule="parsimony", loss_factor=factor)
    assert got["complexity"] == parsimony


def test_no_ok_candidate_selects_nothing() -> None:
    assert select_candidate(_table([(3, 0.1)], status="nonfinite"), rule="parsimony") is None
    assert select_candidate(_table([]), rule="best") is None


@pytest.mark.parametrize("kwargs", [{"rule": "smallest"}, {"loss_factor": 0.5},
                                    {"loss_factor": math.nan}])
def test_bad_arguments_are_value_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        select_candidate(_table([(3, 0.1)]), **kwargs)  # type: ignore[arg-type]


CONFIG = ("dataset:\n  source: feynman:I.12.2\n  n: 300\n  seed: 3\n  noise: 0.0\n"
          "  split: [0.7, 0.15, 0.15]\n")


def test_score_run_scores_the_selected_candidate(tmp_path: Path) -> None:
    """A longer formula with a lower validation NMSE is `best`; `parsimony` takes the law."""
    run_id = "run-select"
    k = 1 / (4 * math.pi)
    specs = [("c0*q1*q2/(epsilon*r**2)", {"c0": k}, 5, 2e-4),
             ("c0*q1*q2/(epsilon*r**2) + c1*q1", {"c0": k, "c1": 1e-9}, 9, 1.9e-4)]
    rows = [candidate_row({"expression": e, "constants": c, "status": "ok", "complexity": cx,
                           "val_nmse": v}, run_id, 0, i, 0, "evolve", "feynman:I.12.2")
            for i, (e, c, cx, v) in enumerate(specs)]
    with CandidateWriter(tmp_path, run_id, "feynman:I.12.2", "evolve", background=False) as w:
        w.add(rows)
    write_run(tmp_path, RunRecord(run_id=run_id, dataset="feynman:I.12.2", model="evolve",
                                  started_at=T0, config=CONFIG)
              .with_best(rows[1], 2).finished("completed", "max_seconds"))
    assert score_run(tmp_path, run_id).expression == specs[1][0]
    chosen = score_run(tmp_path, run_id, select="parsimony")
    assert chosen.expression == specs[0][0] and chosen.metrics["nmse"] < 1e-20
    with pytest.raises(ValueError, match="select"):
        score_run(tmp_path, run_id, select="smallest")


# (name, [(complexity, val_nmse, dimensionally_consistent)], complexity chosen by best, parsimony)
UNIT_CASES: list[tuple[str, list[tuple[int, float, bool | None]], int, int]] = [
    ("an inconsistent better fit is not the answer while a consistent one exists",
     [(3, 1e-2, True), (7, 1e-8, False), (9, 1e-3, True)], 9, 9),
    ("every candidate inconsistent: the usual rules over all of them",
     [(3, 1e-2, False), (7, 1e-8, False)], 7, 7),
    ("no units (null flags): the usual rules",
     [(3, 1e-2, None), (7, 1e-8, None)], 7, 7),
]


@pytest.mark.parametrize("name,points,best,parsimony", UNIT_CASES, ids=[c[0] for c in UNIT_CASES])
def test_selection_ranks_inconsistent_candidates_last(
        name: str, points: list[tuple[int, float, bool | None]], best: int, parsimony: int) -> None:
    table = _table([(c, v) for c, v, _ in points]).append_column(
        "dimensionally_consistent", pa.array([f for _, _, f in points], pa.bool_()))
    assert select_candidate(table, rule="best")["complexity"] == best
    assert select_candidate(table, rule="parsimony")["complexity"] == parsimony


def test_files_without_the_units_columns_read_as_unchecked(tmp_path: Path) -> None:
    """A run written before schema version 2 (no dimensional columns) still reads, selects and
    queries: the new columns come back null."""
    import pyarrow.parquet as pq

    from sr_dist.results import CANDIDATE_SCHEMA, duckdb_connection, open_results

    row = candidate_row({"expression": "x", "canonical": "x", "status": "ok", "complexity": 1,
                         "val_nmse": 0.5, "train_nmse": 0.5}, "old", 0, 0, 0, "m", "d",
                        created_at=T0)
    old_schema = pa.schema([f for f in CANDIDATE_SCHEMA
                            if f.name not in ("dimensionally_consistent", "units_mismatch")])
    directory = tmp_path / "candidates" / "dataset=d" / "run_id=old"
    directory.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{k: row[k] for k in old_schema.names}], schema=old_schema),
                   directory / "part-0.parquet")
    table = open_results(tmp_path).candidates.to_table()
    assert table["dimensionally_consistent"].to_pylist() == [None]
    assert select_candidate(tmp_path)["expression"] == "x"
    con = duckdb_connection(tmp_path)
    assert con.execute("SELECT expression, dimensionally_consistent FROM candidates").fetchall() \
        == [("x", None)]
