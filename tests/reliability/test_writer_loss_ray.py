"""Writer loss on a real local Ray cluster (issue 14, item 4): the ``ResultWriter`` actor is
killed mid-stream, Ray restarts it, it rebuilds its dedup and tally from disk, and the agents'
sinks resend every batch that was not acknowledged. Counted: rows sent == rows written ==
distinct candidate ids, with the resends and the duplicates they caused accounted for."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module

from sr_dist.results import duckdb_connection
from sr_dist.search import RunSummary, run_search
from sr_dist.search.ray_setup import writer_actor_name
from tests.results.results_helpers import rows_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

DATASET = "feynman:I.6.2"


def _counts(results: Path, run_id: str) -> tuple[int, int]:
    """``(rows, distinct candidate ids)`` of ``run_id`` on disk."""
    rows, distinct = duckdb_connection(results).execute(
        "SELECT count(*), count(DISTINCT candidate_id) FROM candidates WHERE run_id = ?",
        [run_id]).fetchone()
    return int(rows), int(distinct)


def _wait_for(what: str, check: Callable[[], Any], timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


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
        str(tmp_path), run_id, DATASET, "evolve", 0.3, roll_files=4, roll_s=1.0)
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
    rows, distinct = _counts(tmp_path, run_id)
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


def _cfg(results: Path, *overrides: str) -> Any:
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=[f"results.path={results}",
                                            f"dataset.source={DATASET}", *overrides])


class _Background:
    """``run_search`` in a thread (a test thread cannot take signals, so none are handled)."""

    def __init__(self, cfg: Any, run_id: str) -> None:
        self.out = io.StringIO()
        self.result: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._target, args=(cfg, run_id))
        self.thread.start()

    def _target(self, cfg: Any, run_id: str) -> None:
        try:
            self.result["summary"] = run_search(cfg, stream=self.out, handle_signals=False,
                                                run_id=run_id)
        except BaseException as exc:  # noqa: BLE001 - reported by summary()
            self.result["error"] = exc

    def summary(self) -> RunSummary:
        self.thread.join(timeout=300)
        assert not self.thread.is_alive(), "the run did not end"
        assert "error" not in self.result, self.result.get("error")
        return self.result["summary"]


def _rows_on_disk(results: Path, run_id: str) -> int:
    try:
        return _counts(results, run_id)[0]
    except Exception:  # noqa: BLE001 - no files yet
        return 0


def test_a_run_whose_writer_is_killed_loses_and_doubles_nothing(ray_cluster: None,
                                                                tmp_path: Path) -> None:
    import ray

    run_id = "writer-loss-run"
    run = _Background(_cfg(tmp_path, "search.agents=2", "search.max_candidates=150",
                           "search.max_seconds=240", "search.target_nmse=null",
                           "dataset.n=1000", "results.flush_s=0.5"), run_id)
    _wait_for("the first rows", lambda: _rows_on_disk(tmp_path, run_id) > 0)
    ray.kill(ray.get_actor(writer_actor_name(run_id)), no_restart=False)
    summary = run.summary()

    assert summary.status == "completed" and summary.stop_reason == "max_candidates", summary
    rows, distinct = _counts(tmp_path, run_id)
    assert rows == distinct == summary.candidates == summary.rows_sent >= 150
    writer = summary.writer  # the restarted instance's counters
    assert writer["restarted"] and writer["resent_batches"] > 0
    assert 0 <= writer["duplicates"] <= writer["resent_rows"]
    assert writer["write_error"] is None and writer["files"] == 1
    assert all(agent.lost_row_batches == 0 for agent in summary.agents)
