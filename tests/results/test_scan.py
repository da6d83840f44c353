"""scan_run: what a restarted writer reads back equals what a tally fed every row knew."""

from __future__ import annotations

from pathlib import Path

from results_helpers import rows_for

from sr_dist.results import CandidateWriter, SeenIds
from sr_dist.results.scan import MAX_CONTENDERS, scan_run
from sr_dist.search.progress import RunTally


def _write(root: Path, batches: list[list[dict]]) -> None:
    with CandidateWriter(root, "run-1", "feynman:I.6.2", "evolve", background=False,
                         roll_files=0, compact=False) as w:
        for rows in batches:
            w.add(rows)
            w.flush()


def _restored(root: Path, seen: SeenIds | None = None) -> RunTally:
    scan = scan_run(root, "run-1", seen)
    tally = RunTally()
    tally.restore(count=scan.rows, by_agent=scan.by_agent, by_status=scan.by_status,
                  contenders=scan.contenders)
    return tally


def test_a_scan_restores_the_counts_and_the_best_a_live_tally_had(tmp_path: Path) -> None:
    batches = [
        rows_for("run-1", 30, val_nmse=0.5),
        rows_for("run-1", 20, agent_id=1, val_nmse=0.01, complexity=9),
        rows_for("run-1", 5, agent_id=2, status="nonfinite", val_nmse=None, train_nmse=None),
        # the same (clamped) NMSE, simpler: this one ranks first
        rows_for("run-1", 3, agent_id=3, val_nmse=1e-13, complexity=4),
        rows_for("run-1", 3, agent_id=3, step0=3, val_nmse=0.0, complexity=7),
    ]
    _write(tmp_path, batches)
    live = RunTally()
    for rows in batches:
        live.add(rows)
    seen = SeenIds("run-1")
    restored = _restored(tmp_path, seen)
    a, b = live.snapshot(), restored.snapshot()
    assert (a.candidates, a.by_agent, a.by_status) == (b.candidates, b.by_agent, b.by_status)
    assert b.best is not None and a.best is not None
    assert (b.best.expression, b.best.complexity) == (a.best.expression, a.best.complexity) \
        == ("c0*x0", 4)
    assert all(row["candidate_id"] in seen for rows in batches for row in rows)


def test_many_equal_fits_keep_a_bounded_list_of_contenders(tmp_path: Path) -> None:
    # A constant target fits every formula equally well: the scan must not copy the run.
    batches = [rows_for("run-1", 3000, val_nmse=0.0, complexity=3),
               rows_for("run-1", 500, agent_id=1, val_nmse=0.0, complexity=3)]
    _write(tmp_path, batches)
    scan = scan_run(tmp_path, "run-1")
    assert scan.rows == 3500 and len(scan.contenders) <= MAX_CONTENDERS
    live = RunTally()
    for rows in batches:
        live.add(rows)
    best = _restored(tmp_path).snapshot().best
    assert best is not None and live.snapshot().best is not None
    assert best.expression == live.snapshot().best.expression


def test_a_scan_keeps_the_best_consistent_row_behind_better_inconsistent_ones(
        tmp_path: Path) -> None:
    batches = [
        rows_for("run-1", 4, val_nmse=1e-3, dimensionally_consistent=True),
        rows_for("run-1", 4, agent_id=1, val_nmse=1e-10, dimensionally_consistent=False,
                 units_mismatch="x0 + x1 adds m to s"),
    ]
    _write(tmp_path, batches)
    live = RunTally()
    for rows in batches:
        live.add(rows)
    a, b = live.snapshot().best, _restored(tmp_path).snapshot().best
    assert a is not None and b is not None
    assert (b.expression, b.dimensionally_consistent) == (a.expression, True)
