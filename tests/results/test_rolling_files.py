"""Rolling and compaction: flush files are merged by count and age, a run is compacted when
its writer closes, and every reader (a raw DuckDB glob, sr-dist's views, pyarrow) sees each
committed state whole: never a double count, never a partial one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from results_helpers import rows_for

from sr_dist.results import CandidateWriter, ResultsNotFound, duckdb_connection, open_results
from sr_dist.results.layout import (
    candidates_dir,
    data_files,
    next_part_seq,
    part_name,
    part_seqs,
    staging_dir,
)
from sr_dist.results.rolling_files import FileInfo, RollPolicy, plan_groups, plan_roll

REPO = Path(__file__).resolve().parents[2]
DATASET = "feynman:I.6.2"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _writer(root: Path, run_id: str = "run-1", **kw: Any) -> CandidateWriter:
    kw.setdefault("background", False)
    return CandidateWriter(root, run_id, DATASET, "evolve", **kw)


def _files(root: Path, run_id: str = "run-1") -> list[str]:
    return [p.name for p in data_files(candidates_dir(root, DATASET, run_id))]


def _raw_count(root: Path) -> int:
    glob = str(root / "candidates" / "**" / "*.parquet").replace("'", "''")
    got = duckdb.sql(f"SELECT count(*) FROM read_parquet('{glob}', hive_partitioning=true)")
    return int(got.fetchall()[0][0])


def _flushes(w: CandidateWriter, n: int, per: int = 10, agent: int = 0, step0: int = 0) -> int:
    for i in range(n):
        w.add(rows_for(w.run_id, per, agent_id=agent, step0=step0 + i * per))
        w.flush()
    return step0 + n * per


# --- names and plans ---------------------------------------------------------------------------

def test_rolled_names_carry_their_flush_range_and_the_next_number_follows() -> None:
    assert part_seqs(part_name(7)) == (7, 7)
    assert part_seqs(part_name(3, 41)) == (3, 41)
    assert part_seqs("part-000001-to-000009-abc123.parquet") == (1, 9)
    assert part_seqs("mine.parquet") is None and part_seqs("part-1-to-2.parquet") is None


def _info(first: int, last: int | None = None, size: int = 100) -> FileInfo:
    last = first if last is None else last
    return FileInfo(Path(part_name(first, None if last == first else last)), first, last, size,
                    last != first)


def test_a_roll_is_due_by_count_or_by_age() -> None:
    policy = RollPolicy(roll_files=4, roll_s=60.0, target_bytes=10_000)
    three = [_info(i) for i in range(3)]
    assert plan_roll(three, policy, fresh_age_s=59.0) == []
    assert plan_roll(three, policy, fresh_age_s=60.0) == three  # old enough
    four = [_info(i) for i in range(4)]
    assert plan_roll(four, policy, fresh_age_s=0.0) == four
    assert plan_roll([_info(0)], policy, fresh_age_s=1e9) == []  # one file: nothing to merge
    assert plan_roll(four, RollPolicy(roll_files=0), fresh_age_s=1e9) == []


def test_small_rolled_files_join_a_roll_once_there_are_enough() -> None:
    policy = RollPolicy(roll_files=4, roll_s=None, target_bytes=10_000)
    rolled = [_info(0, 3, size=1000), _info(4, 7, size=1000), _info(8, 11, size=6000)]
    fresh = [_info(i) for i in range(12, 16)]
    # Two small rolled files (6000 bytes is over half the target: full enough, left alone).
    assert plan_roll(rolled + fresh, policy, None) == fresh
    more = [*rolled, _info(16, 19, size=1000)]
    fresh = [_info(i) for i in range(20, 24)]
    chosen = plan_roll(more + fresh, policy, None)
    assert chosen == [rolled[0], rolled[1], more[3], *fresh]


def test_groups_stay_under_the_target_and_big_files_are_left_alone() -> None:
    files = [_info(0, size=40), _info(1, size=40), _info(2, size=40), _info(3, size=500),
             _info(4, size=10), _info(5, size=95), _info(6, size=5)]
    groups = plan_groups(files, target_bytes=100)
    # 0+1 fill a group (2 would overflow it, then stands alone), 3 is over the target, 4 and
    # 5 would overflow together, 5+6 fit exactly; groups of one are not merged.
    assert [[f.first for f in g] for g in groups] == [[0, 1], [5, 6]]
    assert all(sum(f.size for f in g) <= 100 for g in groups)


# --- rolling in a writer -----------------------------------------------------------------------

def test_a_writer_rolls_its_flush_files_by_count(tmp_path: Path) -> None:
    w = _writer(tmp_path, roll_files=4, roll_s=None, compact=False)
    step = _flushes(w, 3)
    assert w.roll() == 0 and len(_files(tmp_path)) == 3  # not due yet
    step = _flushes(w, 1, step0=step)
    assert w.roll() == 4
    names = _files(tmp_path)
    assert len(names) == 1 and part_seqs(names[0]) == (0, 3)
    _flushes(w, 1, step0=step)  # the next flush numbers on after the rolled range
    assert sorted(part_seqs(n) for n in _files(tmp_path)) == [(0, 3), (4, 4)]
    assert next_part_seq(candidates_dir(tmp_path, DATASET, "run-1")) == 5
    ids = open_results(tmp_path).candidates.to_table()["candidate_id"].to_pylist()
    assert len(ids) == len(set(ids)) == 50 == _raw_count(tmp_path)
    assert w.stats().rolls == 1 and w.stats().files_merged == 4
    w.close()


def test_a_writer_rolls_old_flush_files_by_age(tmp_path: Path) -> None:
    clock = FakeClock()
    w = _writer(tmp_path, roll_files=32, roll_s=30.0, clock=clock, compact=False)
    _flushes(w, 2)
    clock.now = 29.0
    assert w.roll() == 0
    clock.now = 30.0
    assert w.roll() == 2 and len(_files(tmp_path)) == 1
    w.close()


def test_close_compacts_a_small_run_into_one_file_with_the_same_rows(tmp_path: Path) -> None:
    w = _writer(tmp_path, roll_files=4, roll_s=None)
    step = _flushes(w, 10)
    assert w.roll() == 10
    _flushes(w, 2, step0=step)
    w.add(rows_for("run-1", 5, agent_id=1))  # left in the buffer: close writes it first
    before = sorted(open_results(tmp_path).candidates.to_table()["candidate_id"].to_pylist())
    assert len(_files(tmp_path)) == 3
    w.close()
    assert len(_files(tmp_path)) == 1
    con = duckdb_connection(tmp_path)
    after = sorted(r[0] for r in con.execute("SELECT candidate_id FROM candidates").fetchall())
    assert after == sorted([*before, *(r["candidate_id"] for r in rows_for("run-1", 5,
                                                                             agent_id=1))])
    assert _raw_count(tmp_path) == 125
    assert not staging_dir(tmp_path, "run-1").exists()  # the old state is deleted


def test_compaction_cuts_files_at_the_target_size(tmp_path: Path) -> None:
    w = _writer(tmp_path, roll_files=0, target_file_mb=0.05)  # about 52 kB per file
    for i in range(24):
        w.add(rows_for("run-1", 40, step0=40 * i, error=os.urandom(400).hex()))
        w.flush()
    sizes = [p.stat().st_size for p in data_files(candidates_dir(tmp_path, DATASET, "run-1"))]
    w.close()
    after = [p.stat().st_size for p in data_files(candidates_dir(tmp_path, DATASET, "run-1"))]
    assert 1 < len(after) < len(sizes)
    assert max(after) <= 0.05 * 1024 * 1024 * 1.05  # merged files at most the target (zstd
    assert _raw_count(tmp_path) == 24 * 40           # may even shrink them a little)


def test_only_this_writers_run_is_compacted(tmp_path: Path) -> None:
    other = _writer(tmp_path, run_id="other", compact=False)
    _flushes(other, 3)
    other.close()
    w = _writer(tmp_path, roll_files=0)
    _flushes(w, 3)
    w.close()
    assert len(_files(tmp_path, "other")) == 3 and len(_files(tmp_path)) == 1


def test_without_an_atomic_exchange_the_writer_still_rolls(tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture):
    w = _writer(tmp_path, roll_files=2, roll_s=None, compact=False)
    w._exchange = False  # what a file system that refuses RENAME_EXCHANGE leaves it with
    _flushes(w, 3)
    assert w.roll() == 3 and len(_files(tmp_path)) == 1
    assert _raw_count(tmp_path) == 30
    w.close()


def test_a_new_writer_removes_a_crashed_roll_s_staging_directory(tmp_path: Path) -> None:
    w = _writer(tmp_path, compact=False)
    _flushes(w, 2)
    w.close()
    # A roll killed after the exchange leaves the old state (hard links) at a staging path.
    leftover = staging_dir(tmp_path, "run-1") / "deadbeef"
    leftover.mkdir(parents=True)
    for path in data_files(candidates_dir(tmp_path, DATASET, "run-1")):
        os.link(path, leftover / path.name)
    other = staging_dir(tmp_path, "run-2") / "cafe"  # another run's: not ours to touch
    other.mkdir(parents=True)
    _writer(tmp_path).close()
    assert not staging_dir(tmp_path, "run-1").exists() and other.exists()
    assert _raw_count(tmp_path) == 20


# --- readers never see a half state ------------------------------------------------------------

def test_readers_only_ever_see_committed_counts_while_the_writer_rolls(tmp_path: Path) -> None:
    w = _writer(tmp_path, roll_files=3, roll_s=None)
    committed = {0}
    lock = threading.Lock()
    stop = threading.Event()
    seen: dict[str, list[int]] = {"raw": [], "views": [], "pyarrow": []}
    missing: list[str] = []
    wrong: list[tuple[str, int]] = []

    def read() -> None:
        glob = str(tmp_path / "candidates" / "**" / "*.parquet")
        while not stop.is_set():
            for kind in seen:
                try:
                    if not (tmp_path / "candidates").exists():
                        count = 0
                    elif kind == "raw":
                        count = duckdb.sql(f"SELECT count(*) FROM read_parquet('{glob}', "
                                           "hive_partitioning=true)").fetchall()[0][0]
                    elif kind == "views":
                        count = duckdb_connection(tmp_path).execute(
                            "SELECT count(*) FROM candidates").fetchone()[0]
                    else:
                        count = open_results(tmp_path).candidates.count_rows()
                except ResultsNotFound:  # before the first flush
                    count = 0
                except (duckdb.IOException, OSError) as exc:
                    # A listing taken before a swap names a file the swap removed: the query
                    # fails (and can be retried); it never returns a wrong count.
                    missing.append(f"{kind}: {exc}")
                    continue
                with lock:
                    if count not in committed:
                        wrong.append((kind, int(count)))
                seen[kind].append(int(count))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    total = step = 0
    for _ in range(40):
        rows = rows_for("run-1", 7, step0=step)
        step += 7
        w.add(rows)
        with lock:  # the count a flush makes visible is committed before it is
            committed.add(total + 7)
        w.flush()
        total += 7
        w.roll()
    w.close()  # compaction: the same count, in one file
    time.sleep(0.3)  # let the readers take a few looks at the final state
    stop.set()
    reader.join(30)
    assert wrong == [], f"counts no flush committed: {wrong[:5]} (committed: {sorted(committed)})"
    assert _raw_count(tmp_path) == total == 280 and len(_files(tmp_path)) == 1
    for kind, counts in seen.items():
        assert counts, kind
        assert counts == sorted(counts), f"{kind} went backwards"
        assert counts[-1] == total, kind  # the compacted state reads the same
    assert w.stats().rolls >= 10
    assert len(missing) < sum(len(c) for c in seen.values())  # failures are the exception


ROLLER_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    from results_helpers import rows_for
    from sr_dist.results import CandidateWriter
    w = CandidateWriter(sys.argv[1], "run-k", "feynman:I.6.2", "evolve", flush_s=0.01,
                        roll_files=2, roll_s=0.02, background=True)
    step = 0
    while True:
        w.add(rows_for("run-k", 10, step0=step), wait=True)
        step += 10
""")


def test_a_writer_killed_while_rolling_leaves_one_whole_state(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", ROLLER_SCRIPT, str(tmp_path),
                             str(Path(__file__).parent)], cwd=REPO)
    try:
        stage = staging_dir(tmp_path, "run-k")
        deadline = time.monotonic() + 60  # guards against a hang only
        # Kill it while a roll is under way (its staging directory exists), after a few.
        rolled = 0
        while time.monotonic() < deadline:
            assert proc.poll() is None, "writer process died"
            if stage.is_dir() and any(stage.iterdir()):
                rolled += 1
                if rolled >= 3:
                    break
            time.sleep(0.001)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    count = _raw_count(tmp_path)
    ids = open_results(tmp_path).candidates.to_table()["candidate_id"].to_pylist()
    assert count == len(ids) == len(set(ids)) > 0  # one state: no doubles, nothing partial
    with _writer(tmp_path, run_id="run-k") as w:  # its successor cleans up and compacts
        result = w.add(rows_for("run-k", count + 10))
    assert (result.accepted, result.duplicates) == (10, count)
    assert _raw_count(tmp_path) == count + 10 and len(_files(tmp_path, "run-k")) == 1
    assert not (tmp_path / ".staging").exists()
