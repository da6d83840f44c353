"""Writer loss on a real local Ray cluster (issue 14, item 4): the ``ResultWriter`` actor is
killed mid-stream, Ray restarts it, it rebuilds its dedup and tally from disk, and the agents'
sinks resend every batch that was not acknowledged. Counted: rows sent == rows written ==
distinct candidate ids, with the resends and the duplicates they caused accounted for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sr_dist.search.ray_setup import writer_actor_name
from tests.reliability.runs import BackgroundRun, compose_cfg, counts, rows_on_disk, wait_for
from tests.results.results_helpers import rows_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]



def _writer_options(run_id: str) -> dict[str, Any]:
    """What the driver gives the writer (sr_dist.search.driver.Driver.start_actors)."""
    return {"name": writer_actor_name(run_id), "num_cpus": 0, "max_concurrency": 1000,
            "max_restarts": -1, "max_task_retries": 0}


def test_a_killed_writer_is_restarted_and_the_sink_resends_what_was_not_acknowledged(
        ray_cluster: None, tmp_path: Path) -> None:
    import ray

    from sr_dist.search.actors import ResultWriter
    from sr_dist.search.sink import WriterSink

    run_id = "writer-loss-sink"
    writer: Any = ResultWriter.options(**_writer_options(run_id)).remote(  # type: ignore[attr-defined]
        str(tmp_path), run_id, "feynman:I.6.2", "evolve", 0.3, roll_files=4, roll_s=1.0)
    sink = WriterSink(writer, max_in_flight=32)
    batches = [rows_for(run_id, 5, step0=5 * i) for i in range(240)]
    for rows in batches[:80]:
        sink(rows)
    assert sink.in_flight > 0  # acks wait for a flush (0.3 s): these are not acknowledged
    ray.kill(writer, no_restart=False)  # Ray restarts it behind the same handle
    for rows in batches[80:]:
        sink(rows)
    sink.drain()

    assert sink.errors == 0 and sink.lost_rows == 0 and sink.in_flight == 0
    assert sink.resent > 0
    rows, distinct, _ = counts(tmp_path, run_id)
    assert rows == distinct == 240 * 5
    progress = ray.get(writer.progress.remote(), timeout=60)
    assert progress.candidates == rows and progress.write_error is None  # rebuilt from disk
    stats = ray.get(writer.close.remote(), timeout=60)
    # A resend that reached the writer while it was still restarting fails and is sent again:
    # the new writer counts the ones it received, the sink every one it made.
    assert stats["restarted"] and 1 <= stats["resent_batches"] <= sink.resent
    # A resent row the dead writer had already committed is a duplicate, nothing more.
    assert 0 <= stats["duplicates"] <= stats["resent_rows"]
    assert stats["files"] == 1  # compacted on close
    ray.kill(writer, no_restart=True)


def test_a_run_whose_writer_is_killed_loses_and_doubles_nothing(ray_cluster: None,
                                                                tmp_path: Path) -> None:
    import ray

    run_id = "writer-loss-run"
    run = BackgroundRun(compose_cfg(tmp_path, "search.agents=2", "search.max_candidates=150",
                           "search.max_seconds=240", "search.target_nmse=null",
                           "dataset.n=1000", "results.flush_s=0.5",
                           "search.stop_grace_s=120"), run_id)  # rows_sent: see the evaluator test
    wait_for("the first rows", lambda: rows_on_disk(tmp_path, run_id) > 0)
    ray.kill(ray.get_actor(writer_actor_name(run_id)), no_restart=False)
    summary = run.summary()

    assert summary.status == "completed" and summary.stop_reason == "max_candidates", summary
    rows, distinct, _ = counts(tmp_path, run_id)
    assert rows == distinct == summary.candidates == summary.rows_sent >= 150
    writer = summary.writer  # the restarted instance's counters
    # Whether a batch was in flight at the kill is the machine's timing (none was, once, with
    # two test workers on two cores); test_a_killed_writer_is_restarted_... forces a resend.
    assert writer["restarted"] and writer["resent_batches"] >= 0
    assert 0 <= writer["duplicates"] <= writer["resent_rows"]
    assert writer["write_error"] is None and writer["files"] == 1
    assert all(agent.lost_row_batches == 0 for agent in summary.agents)


def test_the_writer_keeps_the_run_front_that_agents_read(ray_cluster: None, tmp_path: Path) -> None:
    """Migration's source: the writer's front of every agent's rows, as ``best_formulas``
    reads it through an agent actor (``AgentActor._run_front`` makes the same call)."""
    import ray

    from sr_dist.candidate import Candidate, candidate_front
    from sr_dist.search.actors import ResultWriter

    run_id = "writer-front"
    writer: Any = ResultWriter.options(**_writer_options(run_id)).remote(  # type: ignore[attr-defined]
        str(tmp_path), run_id, "feynman:I.6.2", "evolve", 0.05)
    rows = []
    for agent in (0, 1):
        for i in range(12):
            rows += rows_for(run_id, 1, agent_id=agent, step0=i, expression=f"c0*x{i} + {agent}",
                             canonical=f"k{agent}-{i}", complexity=2 + i,
                             val_nmse=10.0 ** -(i + agent * (i % 3)))
    assert ray.get([writer.add.remote(rows[i:i + 5]) for i in range(0, len(rows), 5)],
                   timeout=60) == [5] * (len(rows) // 5) + ([len(rows) % 5] if len(rows) % 5 else [])
    front = ray.get(writer.front.remote(), timeout=60)
    expected = candidate_front([Candidate.from_fit(r) for r in rows])
    assert [c.key for c in front] == [c.key for c in expected]
    assert {c.agent_id for c in front} == {0, 1}  # both agents' candidates are on it
    ray.get(writer.close.remote(), timeout=60)
    ray.kill(writer, no_restart=True)
