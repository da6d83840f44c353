"""What the Ray fault tests share: a config, a run in a background thread, waiting, counting.

Not a test module: ``test_fault_injection_ray.py`` and ``test_writer_loss_ray.py`` import it.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_module

from sr_dist.results import duckdb_connection
from sr_dist.search import RunSummary, run_search

PROBLEM = "dataset.source=feynman:I.30.3"


def compose_cfg(results: Path, *overrides: str) -> Any:
    """sr-dist's config for a run under ``results`` on the tests' problem."""
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=[f"results.path={results}", PROBLEM, *overrides])


class BackgroundRun:
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


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 180.0) -> Any:
    """``check()``'s first truthy value, polled; ``AssertionError`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def counts(results: Path, run_id: str) -> tuple[int, int, dict[int, int]]:
    """``(rows, distinct candidate ids, rows per agent)`` of ``run_id`` on disk."""
    con = duckdb_connection(results)
    rows, distinct = con.execute(
        "SELECT count(*), count(DISTINCT candidate_id) FROM candidates WHERE run_id = ?",
        [run_id]).fetchall()[0]
    per_agent = dict(con.execute("SELECT agent_id, count(*) FROM candidates WHERE run_id = ? "
                                 "GROUP BY agent_id", [run_id]).fetchall())
    return int(rows), int(distinct), {int(k): int(v) for k, v in per_agent.items()}


def rows_on_disk(results: Path, run_id: str, agent_id: int | None = None) -> int:
    """Rows of ``run_id`` (of one agent) on disk so far; 0 before the first file."""
    if not (results / "candidates").is_dir():
        return 0
    try:
        _, _, per_agent = counts(results, run_id)
    except Exception:  # noqa: BLE001 - no files yet
        return 0
    return per_agent.get(agent_id, 0) if agent_id is not None else sum(per_agent.values())
