"""CandidateWriter's acknowledgement and its disk faults: ``add(wait=True)`` returns once its
rows are in a committed file; a full or read-only disk (a real small tmpfs) fails the writer,
releases every waiting caller with the reason, and leaves what was written readable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from results_helpers import rows_for

from sr_dist.results import CandidateWriter, ResultsWriteError, open_results
from sr_dist.results.layout import candidates_dir

REPO = Path(__file__).resolve().parents[2]


def _writer(root: Path, **kw: Any) -> CandidateWriter:
    kw.setdefault("background", False)
    return CandidateWriter(root, "run-1", "feynman:I.6.2", "evolve", **kw)


class _Adder(threading.Thread):
    """``add(rows, wait=True)`` in a thread; keeps its result or exception."""

    def __init__(self, writer: CandidateWriter, rows: list[dict[str, Any]]) -> None:
        super().__init__(daemon=True)
        self.writer, self.rows = writer, rows
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.writer.add(self.rows, wait=True, timeout=60)
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            self.error = exc


def _until(check: Any) -> None:
    """Spin until ``check()`` (the writer's own counters, not the clock, say when)."""
    for _ in range(100_000):
        if check():
            return
        threading.Event().wait(0.001)
    raise AssertionError("condition never held")


def test_a_waiting_add_returns_only_after_its_flush(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    adder = _Adder(w, rows_for("run-1", 5))
    _until(lambda: w.stats().pending == 5)
    assert adder.is_alive()  # nothing has flushed, so it cannot have been acknowledged
    assert not candidates_dir(tmp_path, "feynman:I.6.2", "run-1").exists()
    assert w.flush() == 5
    adder.join(30)
    assert adder.error is None and adder.result.accepted == 5
    assert open_results(tmp_path).candidates.count_rows() == 5  # durable when acknowledged
    w.close()


def test_one_flush_releases_many_waiting_adds(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    adders = [_Adder(w, rows_for("run-1", 3, agent_id=a)) for a in range(20)]
    _until(lambda: w.stats().pending == 60)
    w.flush()
    for adder in adders:
        adder.join(30)
        assert adder.error is None and adder.result.accepted == 3
    assert w.stats().files_written == 1
    w.close()


def test_a_duplicate_waits_for_its_buffered_original_but_not_for_a_written_one(tmp_path):
    w = _writer(tmp_path)
    rows = rows_for("run-1", 2)
    w.add(rows)  # buffered, not acknowledged to anyone
    resend = _Adder(w, rows[:1])
    _until(lambda: w.stats().duplicates == 1)
    assert resend.is_alive()  # its row is not on disk yet
    w.flush()
    resend.join(30)
    assert resend.error is None and (resend.result.accepted, resend.result.duplicates) == (0, 1)
    # Written already: the answer comes at once (a wait would time out: nothing flushes).
    again = w.add(rows, wait=True, timeout=5)
    assert (again.accepted, again.duplicates) == (0, 2)
    w.close()


def test_repeated_failures_fail_the_writer_and_release_the_waiters(tmp_path: Path) -> None:
    w = _writer(tmp_path, max_failures=3)
    blocker = candidates_dir(tmp_path, "feynman:I.6.2", "run-1")
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a file where the run's directory should be")
    adder = _Adder(w, rows_for("run-1", 3))
    _until(lambda: w.stats().pending == 3)
    for _ in range(2):
        with pytest.raises(ResultsWriteError, match="could not write"):
            w.flush()
        assert adder.is_alive() and w.stats().write_error is None  # rows kept, retried
    with pytest.raises(ResultsWriteError):
        w.flush()
    adder.join(30)
    assert isinstance(adder.error, ResultsWriteError)
    assert "3 flushes failed in a row" in str(adder.error)
    assert "3 flushes failed in a row" in (w.stats().write_error or "")
    with pytest.raises(ResultsWriteError, match="has stopped"):
        w.add(rows_for("run-1", 1, step0=10))
    with pytest.raises(ResultsWriteError):
        w.close()


FAULT_SCRIPT = textwrap.dedent("""
    import json, os, subprocess, sys, threading
    sys.path.insert(0, sys.argv[2])
    from results_helpers import rows_for
    from sr_dist.results import CandidateWriter, ResultsWriteError, duckdb_connection
    root, fault = sys.argv[1], sys.argv[3]
    w = CandidateWriter(root, "run-d", "feynman:I.6.2", "evolve", flush_s=0.05, roll_files=0,
                        compact=False)
    acked = step = 0
    error = None
    waiters = []
    while step < 100_000:
        if fault == "readonly" and acked >= 40:
            subprocess.run(["mount", "-o", "remount,ro", root], check=True)
            fault = "done"
        rows = rows_for("run-d", 20, step0=step, error=os.urandom(600).hex())
        step += 20
        try:
            acked += w.add(rows, wait=True).accepted
        except ResultsWriteError as exc:
            error = str(exc)
            break
    # A caller arriving later is refused at once with the same reason.
    try:
        w.add(rows_for("run-d", 1, step0=step + 1), wait=True)
        later = None
    except ResultsWriteError as exc:
        later = str(exc)
    con = duckdb_connection(root)
    on_disk, distinct = con.execute(
        "SELECT count(*), count(DISTINCT candidate_id) FROM candidates").fetchone()
    print(json.dumps({"acked": acked, "error": error, "later": later, "on_disk": on_disk,
                      "distinct": distinct, "write_error": w.stats().write_error}))
""")


@pytest.mark.skipif(os.name != "posix" or shutil.which("unshare") is None,
                    reason="needs Linux mount namespaces")
@pytest.mark.parametrize("fault,message,fix", [
    ("full", "No space left on device", "the disk is full"),
    ("readonly", "Read-only file system", "the file system is read-only"),
])
def test_a_full_or_read_only_disk_fails_the_writer_and_keeps_what_was_written(
        tmp_path: Path, fault: str, message: str, fix: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    shell = (f"mount -t tmpfs -o size=512k none {mount} || exit 77; "
             f"exec {sys.executable} -c \"$0\" {mount} {Path(__file__).parent} {fault}")
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", shell, FAULT_SCRIPT], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode == 77:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["error"] and message in got["error"] and fix in got["error"]
    assert got["later"] and "has stopped" in got["later"] and message in got["later"]
    assert got["write_error"] and message in got["write_error"]
    # Everything acknowledged is on disk and readable; nothing unacknowledged was.
    assert got["acked"] >= 20 and got["on_disk"] == got["distinct"] == got["acked"]


def test_once_batching_stops_buffered_rows_and_every_later_add_are_written_at_once(
        tmp_path: Path) -> None:
    """``stop_batching`` (the search has stopped) flushes what waits and makes each later add
    its own flush: an agent's last rows are acknowledged without waiting ``flush_s``."""
    w = _writer(tmp_path, flush_s=3600.0)
    rows = rows_for("run-1", 8)
    w.add(rows[:3])
    waiting = _Adder(w, rows[3:5])
    _until(lambda: w.stats().pending == 5)
    w.stop_batching()
    waiting.join(60)
    assert waiting.error is None and waiting.result.accepted == 2
    assert w.stats().pending == 0
    later = w.add(rows[5:], wait=True, timeout=60)  # no flush thread: the add flushes itself
    assert later.accepted == 3 and w.stats().pending == 0
    w.close()
    assert open_results(tmp_path).candidates.count_rows() == 8
