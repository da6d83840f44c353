"""The pure parts of resuming a run: the config merge, the warm start handed to an episode,
the seeds, the recorder's step offset, and what is read back from a results directory."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from sr_dist.results import CandidateWriter, RunRecord, utc_now, write_run
from sr_dist.search import SettingsError
from sr_dist.search.recording import CandidateRecorder
from sr_dist.search.resume import (
    best_distinct,
    load_resume,
    merge_resumed_config,
    prior_history,
    resume_note,
    session_seed,
)
from sr_dist.sr.evolve.population import read_history

DEFAULTS = {
    "dataset": {"source": "feynman:I.6.2", "n": None},
    "model": {"provider": "evolve", "batch_size": 32},
    "search": {"agents": 1, "max_seconds": 60},
    "ray": {"address": None},
    "results": {"path": "results"},
    "run": {"resume": None},
    "servers": [],
}
STORED = {
    "dataset": {"source": "feynman:II.6.15a", "n": 500},
    "model": {"provider": "openai", "model": "gpt", "base_url": "http://h/v1"},
    "search": {"agents": 4, "max_seconds": 60},
    "ray": {"address": "auto"},
    "results": {"path": "old"},
    "run": {"resume": None},
    "servers": [{"name": "s", "command": "x"}],
}

# (what the command line gave, the parts of the merged config checked)
MERGES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("defaults only: the stored run as it was",
     {**DEFAULTS, "run": {"resume": "R"}},
     {"dataset": STORED["dataset"], "model": STORED["model"], "search": STORED["search"],
      "servers": STORED["servers"], "run": {"resume": "R"}, "ray": {"address": None},
      "results": {"path": "results"}}),
    ("a changed budget wins, leaf by leaf",
     {**DEFAULTS, "search": {"agents": 1, "max_seconds": 600}},
     {"search": {"agents": 4, "max_seconds": 600}}),
    ("a changed model replaces the stored model whole",
     {**DEFAULTS, "model": {"provider": "evolve", "batch_size": 8}},
     {"model": {"provider": "evolve", "batch_size": 8}}),
    ("a key only the current config has is kept",
     {**DEFAULTS, "search": {"agents": 1, "max_seconds": 60, "failure_budget": 3}},
     {"search": {"agents": 4, "max_seconds": 60, "failure_budget": 3}}),
]


@pytest.mark.parametrize("name, current, expected", MERGES, ids=[m[0] for m in MERGES])
def test_merge_resumed_config(name: str, current: dict[str, Any], expected: dict[str, Any]) -> None:
    merged = merge_resumed_config(STORED, current, DEFAULTS)
    for key, value in expected.items():
        assert merged[key] == value, key
    assert "hydra" not in merged


def _row(expression: str, val: float | None, status: str = "ok", agent: int = 0,
         step: int = 1, canonical: str | None = None) -> dict[str, Any]:
    return {"agent_id": agent, "step": step, "expression": expression,
            "canonical": canonical or expression, "complexity": len(expression),
            "constants": '{"c":2.0}', "status": status, "train_nmse": val, "val_nmse": val,
            "test_nmse": val, "r2": None if val is None else 1 - val}


def test_best_distinct_keeps_ok_rows_best_first_one_per_structure() -> None:
    rows = [_row("c*x", 0.5), _row("c*sin(x)", 0.1), _row("x*c", 0.05, canonical="c*x"),
            _row("c/x", None, status="nonfinite"), _row("c+x", math.inf)]
    assert [r["expression"] for r in best_distinct(rows, 10)] == ["x*c", "c*sin(x)"]
    assert len(best_distinct(rows, 1)) == 1


def test_prior_history_warms_evolves_population() -> None:
    rows = [_row("c*sin(x)", 0.1), _row("c*x", 0.5)]
    history = read_history(prior_history(rows), ["x"])
    assert {i.expression for i in history.individuals} == {"c*sin(x)", "c*x"}
    assert {"c*sin(x)", "c*x"} <= set(history.seen)  # not proposed again
    assert prior_history([]) == []
    note = resume_note(rows)
    assert "c*sin(x)" in note and "0.1" in note and resume_note([]) == ""


def test_session_seeds() -> None:
    assert session_seed(1234, 0) == 1234
    assert session_seed(1234, 7) != 1234 and session_seed(1234, 7) == session_seed(1234, 7)
    assert session_seed(1234, 7) != session_seed(1234, 8)


def test_the_recorder_continues_after_the_step_offset() -> None:
    sent: list[list[dict[str, Any]]] = []
    recorder = CandidateRecorder("run", 3, "m", "d", sent.append, step_offset=41)
    recorder([{"expression": "x", "status": "ok"}] * 2, agent_id=3, step=1, tool_call_id=None)
    assert [r["candidate_id"] for r in sent[0]] == ["run:3:42:0", "run:3:42:1"]
    assert [r["step"] for r in sent[0]] == [42, 42] and recorder.recorded == 2
    with pytest.raises(ValueError, match="step_offset"):
        CandidateRecorder("run", 0, "m", "d", sent.append, step_offset=-1)


def test_load_resume_reads_progress_prior_and_warm_set(tmp_path: Path) -> None:
    run_id = "20250101-000000-abcdef"
    write_run(tmp_path, RunRecord(run_id=run_id, dataset="d", model="m", started_at=utc_now()))
    with CandidateWriter(tmp_path, run_id, "d", "m", background=False) as writer:
        rows = [_row("c*x", 0.5, agent=0, step=3), _row("c*sin(x)", 0.1, agent=1, step=9),
                _row("c+x", 0.9, agent=1, step=2)]
        for i, row in enumerate(rows):
            writer.add([{**row, "candidate_id": f"{run_id}:{row['agent_id']}:{row['step']}:{i}",
                         "created_at": utc_now()}])
    state = load_resume(tmp_path, run_id, "d")
    assert state.candidates_before == 3
    assert state.step_offset(0) == 3 and state.step_offset(1) == 9 and state.step_offset(5) == 0
    assert [r["expression"] for r in state.prior_of(1)] == ["c*sin(x)", "c+x"]
    assert state.prior_of(7) == ()
    assert state.warm == ("c*sin(x)", "c*x", "c+x")
    with pytest.raises(SettingsError, match="searched dataset 'd'"):
        load_resume(tmp_path, run_id, "other")
    with pytest.raises(SettingsError, match="names no run"):
        load_resume(tmp_path, "nope", "d")


def test_lost_agents_are_read_back_in_one_scan(tmp_path: Path) -> None:
    from sr_dist.search.resume import agent_restarts
    from tests.results.results_helpers import rows_for

    with CandidateWriter(tmp_path, "lost", "feynman:I.6.2", "evolve", background=False,
                         known_ids=()) as writer:
        for agent, steps in ((0, 4), (1, 7), (2, 2)):
            writer.add(rows_for("lost", steps, agent_id=agent, val_nmse=0.5))
    states = agent_restarts(tmp_path, "lost", [2, 1, 5])
    assert sorted(states) == [1, 2, 5]
    assert (states[1].last_step, states[1].rows) == (6, 7)
    assert (states[2].last_step, states[2].rows) == (1, 2)
    assert (states[5].last_step, states[5].rows, states[5].prior) == (-1, 0, ())  # none yet
    assert all(r.get("agent_id", 1) == 1 for r in states[1].prior) and states[1].prior
