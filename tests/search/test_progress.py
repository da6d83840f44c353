"""Tallies, the progress line, the Pareto table, the stop rules and the run's status."""

from __future__ import annotations

import dataclasses
import io
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sr_dist.search.agent_run import AgentOutcome, agent_seed
from sr_dist.search.progress import (
    ProgressReporter,
    ProgressSnapshot,
    RunTally,
    format_pareto,
    format_progress,
)
from sr_dist.search.run import RunSummary, decide_stop, final_status, new_run_id
from sr_dist.search.settings import SearchSettings


def _row(cid: str, agent: int, status: str = "ok", val: float | None = 0.5,
         complexity: int | None = 3, expression: str = "x") -> dict[str, Any]:
    return {"candidate_id": cid, "agent_id": agent, "status": status, "val_nmse": val,
            "complexity": complexity, "expression": expression, "constants": None,
            "test_nmse": val}


def test_tally_counts_and_keeps_the_best() -> None:
    tally = RunTally()
    tally.add([_row("a", 0, val=0.5), _row("b", 1, status="nonfinite", val=None),
               _row("c", 1, val=0.1, complexity=9, expression="big")])
    tally.add([_row("d", 0, val=0.1, complexity=4, expression="small")])  # same error, simpler
    snap = tally.snapshot()
    assert snap.candidates == 4
    assert snap.by_agent == {0: 2, 1: 2}
    assert snap.by_status == {"nonfinite": 1, "ok": 3}
    assert snap.best is not None and snap.best.expression == "small"
    assert snap.write_error is None


def test_tally_counts_what_the_writer_accepted_and_holds_no_ids(tmp_path: Path) -> None:
    # The writer drops resent ids; the tally counts its accepted rows, so its memory is a few
    # counters however many rows pass (no set of ids of its own).
    from sr_dist.results import CandidateWriter
    from tests.results.results_helpers import rows_for

    tally = RunTally()
    with CandidateWriter(tmp_path, "run-1", "feynman:I.6.2", "evolve", background=False) as w:
        rows = rows_for("run-1", 6)
        tally.add(w.add(rows[:4]).rows)
        tally.add(w.add(rows).rows)  # four resent, two new
    assert tally.snapshot().candidates == 6
    assert not any(isinstance(v, (set, frozenset)) for v in vars(tally).values())


def test_a_restored_tally_starts_from_the_counts_on_disk() -> None:
    tally = RunTally()
    tally.restore(count=7, by_agent={0: 4, 1: 3}, by_status={"ok": 7},
                  contenders=[_row("x", 1, val=0.01, expression="best")])
    tally.add([_row("y", 0, val=0.5)])
    snap = tally.snapshot(write_error="disk full")
    assert (snap.candidates, snap.by_agent) == (8, {0: 5, 1: 3})
    assert snap.best is not None and snap.best.expression == "best"
    assert snap.write_error == "disk full"


def test_tally_ignores_failed_and_non_finite_rows() -> None:
    tally = RunTally()
    tally.add([_row("a", 0, status="error", val=0.0), _row("b", 0, val=float("inf"))])
    assert tally.snapshot().best is None


SNAP = ProgressSnapshot(elapsed_s=75.0, candidates=1234, fits=1000, fits_per_s=85.25,
                        best_val_nmse=3.14e-4, best_expression="x*y", agents_running=1,
                        agents_total=2)


def test_progress_line() -> None:
    assert format_progress(SNAP) == (
        "[01:15] 1,234 candidates | 85.2 fits/s | best val NMSE 0.000314 x*y | agents 1/2")


def test_reporter_logs_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    reporter = ProgressReporter(out, tty=False, interval_s=10.0)
    reporter.update(SNAP, now=0.0)
    reporter.update(SNAP, now=5.0)  # too soon
    reporter.update(SNAP, now=10.0)
    reporter.update(SNAP, now=11.0, force=True)
    reporter.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and all(line.startswith("sr-dist: [01:15]") for line in lines)


def test_reporter_redraws_one_line_on_a_terminal() -> None:
    out = io.StringIO()
    reporter = ProgressReporter(out, tty=True, redraw_s=0.5)
    reporter.update(SNAP, now=0.0)
    reporter.update(SNAP, now=1.0)
    reporter.finish()
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n") and text.count("\n") == 1


def test_pareto_table() -> None:
    rows: list[dict[str, Any]] = [
        {"complexity": 3, "val_nmse": 0.5, "test_nmse": 0.51, "expression": "c0*x",
         "constants": '{"c0":2.5}'},
        {"complexity": 7, "val_nmse": 1e-9, "test_nmse": None, "expression": "c0*x*y + c1",
         "constants": '{"c0":1.0,"c1":null}'},
    ]
    table = format_pareto(rows).splitlines()
    assert table[0].split() == ["complexity", "val_nmse", "test_nmse", "formula"]
    assert table[2].split() == ["3", "0.5", "0.51", "c0*x", "[c0=2.5]"]
    assert table[3].split() == ["7", "1e-09", "-", "c0*x*y", "+", "c1", "[c0=1,", "c1=nan]"]
    assert format_pareto([]) == "(no successfully fitted candidates)"


BUDGET = SearchSettings(agents=2, max_seconds=60.0, max_candidates=1000, max_turns=10,
                        target_nmse=1e-10, seed=0, max_tool_calls=None, failure_budget=5,
                        stop_grace_s=5.0, progress_interval_s=10.0, polish_s=0.0)

# (elapsed, candidates, best, agents running, agent stop reasons) -> stop reason
STOPS: list[tuple[float, int, float | None, int, list[str], str | None]] = [
    (1.0, 10, 0.5, 2, [], None),
    (60.0, 10, 0.5, 2, [], "max_seconds"),
    (1.0, 1000, 0.5, 2, [], "max_candidates"),
    (1.0, 10, 1e-10, 2, [], "target_nmse"),
    (99.0, 5000, 1e-12, 0, ["max_turns"], "target_nmse"),  # the target wins over budgets
    (1.0, 10, 0.5, 0, ["max_turns", "max_turns"], "max_turns"),
    (1.0, 10, 0.5, 0, ["submitted", "max_turns"], "agents_done"),
    (1.0, 10, 0.5, 0, ["error", "error"], "agents_failed"),
    (1.0, 10, 0.5, 0, ["lost", "lost"], "agents_failed"),
    (1.0, 10, None, 1, ["error"], None),
]


@pytest.mark.parametrize("elapsed, candidates, best, running, reasons, expected", STOPS)
def test_decide_stop(elapsed: float, candidates: int, best: float | None, running: int,
                     reasons: list[str], expected: str | None) -> None:
    assert decide_stop(BUDGET, elapsed_s=elapsed, candidates=candidates, best_val_nmse=best,
                       agents_running=running, agent_reasons=reasons) == expected


POLISH = dataclasses.replace(BUDGET, polish_s=5.0)

# (elapsed, target reached at, candidates, agents running) -> stop reason, with a 5-s polish
POLISH_STOPS: list[tuple[float, float | None, int, int, str | None]] = [
    (10.0, 8.0, 10, 2, None),            # polishing
    (13.0, 8.0, 10, 2, "target_nmse"),   # polished
    (10.0, 8.0, 10, 0, "target_nmse"),   # every agent finished (submitted) first
    (60.0, 58.0, 10, 2, "target_nmse"),  # the budget ends the polish
    (10.0, 8.0, 1000, 2, "target_nmse"),
    (10.0, None, 10, 2, None),           # reached now (when the driver has not said)
]


@pytest.mark.parametrize("elapsed, reached, candidates, running, expected", POLISH_STOPS)
def test_decide_stop_polishes_after_the_target(elapsed: float, reached: float | None,
                                               candidates: int, running: int,
                                               expected: str | None) -> None:
    assert decide_stop(POLISH, elapsed_s=elapsed, candidates=candidates, best_val_nmse=1e-12,
                       agents_running=running, target_reached_s=reached) == expected
    # Not reached: the polish changes nothing.
    assert decide_stop(POLISH, elapsed_s=elapsed, candidates=candidates, best_val_nmse=0.5,
                       agents_running=running, target_reached_s=None) == decide_stop(
        BUDGET, elapsed_s=elapsed, candidates=candidates, best_val_nmse=0.5,
        agents_running=running)


@pytest.mark.parametrize("reason, signum, error, status", [
    ("max_seconds", None, None, "completed"),
    ("target_nmse", None, None, "completed"),
    ("interrupted", 2, None, "interrupted"),
    ("agents_failed", None, None, "failed"),
    ("error", None, "boom", "failed"),
])
def test_final_status(reason: str, signum: int | None, error: str | None, status: str) -> None:
    assert final_status(reason, signal_number=signum, error=error) == status


def test_run_id_format() -> None:
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert new_run_id(when, "abc123") == "20250102-030405-abc123"
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", new_run_id())
    assert new_run_id() != new_run_id()


def test_agent_seeds_differ_and_repeat() -> None:
    seeds = {agent_seed(0, i) for i in range(16)}
    assert len(seeds) == 16
    assert agent_seed(3, 1) == agent_seed(3, 1) != agent_seed(4, 1)


def _summary(**changes: Any) -> RunSummary:
    base: dict[str, Any] = dict(
        run_id="r", status="completed", stop_reason="max_seconds", best=None, candidates=0,
        wall_s=1.0, results_path=Path("/tmp/x"), dataset="d", model="m",
        agents=(AgentOutcome(0, "max_turns", candidates=3), AgentOutcome(1, "max_turns")),
        lost_agents=(), evaluator={}, writer={},
    )
    base.update(changes)
    return RunSummary(**base)


def test_exit_codes() -> None:
    assert _summary().exit_code == 0
    assert _summary(signal=2, status="interrupted").exit_code == 130
    assert _summary(signal=15, status="interrupted").exit_code == 143
    assert _summary(status="failed").exit_code == 1
    assert _summary(agents=(AgentOutcome(0, "error"), AgentOutcome(1, "lost")),
                    lost_agents=(1,)).exit_code == 1
    assert _summary(lost_agents=(1,)).exit_code == 0  # one agent lost: the run still counts
    assert _summary().query_command == "sr-dist-query /tmp/x --run r"


def test_progress_line_shows_the_evaluator_queue_once_something_queued() -> None:
    import dataclasses

    base = "[01:15] 1,234 candidates | 85.2 fits/s | best val NMSE 0.000314 x*y | agents 1/2"
    assert format_progress(dataclasses.replace(SNAP, queue_depth=5)) == base
    one = dataclasses.replace(SNAP, queue_depth=1234, queue_p99_s=0.0404)
    assert format_progress(one) == base + " | queue 1,234 p99 40 ms"
    pool = dataclasses.replace(one, replicas=3, queue_depth=0, queue_p99_s=0.0)
    assert format_progress(pool) == base + " | queue 0 p99 0 ms on 3 replicas"
    busy = dataclasses.replace(one, busy_share=0.836)
    assert format_progress(busy) == base + " | queue 1,234 p99 40 ms | evaluator busy 84%"
    # Stats lag the clock a little: a share past 1 shows as 100%.
    assert format_progress(dataclasses.replace(SNAP, busy_share=1.02)).endswith(" | evaluator busy 100%")


def test_run_tally_prefers_a_consistent_best() -> None:
    def row(expr: str, nmse: float, consistent: bool) -> dict[str, object]:
        return {"expression": expr, "canonical": expr, "status": "ok", "complexity": 3,
                "val_nmse": nmse, "train_nmse": nmse, "agent_id": 0,
                "dimensionally_consistent": consistent}

    tally = RunTally()
    rows = [row("x+t", 1e-9, False), row("x/t", 1e-3, True), row("x-t", 1e-12, False)]
    tally.add(rows)
    best = tally.snapshot().best
    assert best is not None and best.expression == "x/t"
