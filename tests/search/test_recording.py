"""The recorder: deterministic, collision-free candidate ids that the real writer accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sr_dist.evaluator import FitResult
from sr_dist.results import CandidateWriter, duckdb_connection
from sr_dist.search.recording import CandidateRecorder


def _fit(expr: str, status: str = "ok") -> FitResult:
    if status != "ok":
        return FitResult(expression=expr, canonical=None, status="invalid", error="bad")
    return FitResult(expression=expr, canonical=expr, status="ok", constants={"c": 1.5},
                     complexity=3, train_mse=0.1, train_nmse=0.01, val_nmse=0.02,
                     test_nmse=0.03, r2=0.98, fit_s=0.001)


def test_indices_continue_across_calls_of_one_turn(tmp_path: Path) -> None:
    sent: list[list[dict[str, Any]]] = []
    rec = CandidateRecorder("run-1", 3, "evolve", "feynman:I.6.2", sent.append)
    rec([_fit("c*x"), _fit("x(", "invalid")], agent_id=3, step=1, tool_call_id="t1")
    rec([_fit("c*y")], agent_id=3, step=1, tool_call_id="t2")
    rec([_fit("c*z")], agent_id=3, step=2, tool_call_id=None)
    rec([], agent_id=3, step=2, tool_call_id=None)  # nothing to send
    ids = [row["candidate_id"] for batch in sent for row in batch]
    assert ids == ["run-1:3:1:0", "run-1:3:1:1", "run-1:3:1:2", "run-1:3:2:0"]
    assert rec.recorded == 4

    with CandidateWriter(tmp_path, "run-1", "feynman:I.6.2", "evolve", background=False) as writer:
        for batch in sent:
            result = writer.add(batch)
            assert result.rejected == () and result.duplicates == 0
    con = duckdb_connection(tmp_path)
    rows = con.sql("SELECT step, status, constants, tool_call_id FROM candidates "
                   "ORDER BY candidate_id").fetchall()
    assert rows[0] == (1, "ok", '{"c":1.5}', "t1")
    assert rows[1][1] == "invalid" and rows[3][3] is None


def test_fits_of_another_agent_are_refused() -> None:
    rec = CandidateRecorder("run-1", 0, "evolve", "d", lambda rows: None)
    with pytest.raises(ValueError, match="agent 0 got fits of agent 1"):
        rec([_fit("x")], agent_id=1, step=1, tool_call_id=None)
