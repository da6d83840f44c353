"""CandidateWriter: atomic files both readers accept, exactly-once ids, flush policy, failures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from urllib.parse import quote

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from results_helpers import rows_for

from sr_dist.results import (
    CANDIDATE_SCHEMA,
    RUNS_SCHEMA,
    CandidateWriter,
    ResultsWriteError,
    RunRecord,
    agent_progress,
    existing_candidate_ids,
    open_results,
    partition_value,
    read_run,
    summarize_run,
    write_run,
)
from sr_dist.results.layout import MAX_PARTITION_VALUE_BYTES, candidates_dir, data_files, write_atomic

REPO = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _writer(root: Path, run_id: str = "run-1", dataset: str = "feynman:I.6.2",
            **kw) -> CandidateWriter:
    kw.setdefault("background", False)
    return CandidateWriter(root, run_id, dataset, "evolve", **kw)


def _duck_raw(root: Path) -> pa.Table:
    glob = str(root / "candidates" / "**" / "*.parquet")
    return duckdb.sql(
        f"SELECT * FROM read_parquet('{glob}', hive_partitioning=true)"
    ).to_arrow_table()


def _hive_dataset(root: Path) -> ds.Dataset:
    part = ds.partitioning(
        pa.schema([("dataset", pa.string()), ("run_id", pa.string())]), flavor="hive"
    )
    return ds.dataset(root / "candidates", format="parquet", partitioning=part)


# --- reading back ------------------------------------------------------------------------------

DATASETS = ["feynman:I.6.2", "csv:/data/my file+v2.csv", "parquet:s3-ish/a=b%20c", "2024-01-01",
            "123"]


def test_both_readers_yield_exactly_the_schema_and_the_original_values(tmp_path):
    root = tmp_path / "res"
    for i, dataset in enumerate(DATASETS):
        with _writer(root, run_id=f"run:{i}", dataset=dataset) as w:
            w.add(rows_for(f"run:{i}", 3, dataset=dataset))
    # A leftover temporary from a crashed writer must be invisible to both readers.
    leftover = candidates_dir(root, DATASETS[0], "run:0") / ".deadbeef.parquet.tmp"
    leftover.write_bytes(b"PAR1 not really parquet")

    arrow = open_results(root).candidates.to_table()
    assert arrow.schema == CANDIDATE_SCHEMA
    inferred = _hive_dataset(root).to_table()  # plain pyarrow, schema read from the files
    assert inferred.schema.names == CANDIDATE_SCHEMA.names
    assert [f.type for f in inferred.schema] == CANDIDATE_SCHEMA.types

    duck = _duck_raw(root)
    assert duck.schema.names == CANDIDATE_SCHEMA.names
    for field in CANDIDATE_SCHEMA:
        got = duck.schema.field(field.name).type
        if pa.types.is_timestamp(field.type):  # DuckDB names the zone Etc/UTC
            assert pa.types.is_timestamp(got) and got.unit == "us" and got.tz in ("UTC", "Etc/UTC")
        else:
            assert got == field.type, field.name

    for table in (arrow, inferred, duck):
        pairs = set(zip(table["run_id"].to_pylist(), table["dataset"].to_pylist()))
        assert pairs == {(f"run:{i}", d) for i, d in enumerate(DATASETS)}
        assert table.num_rows == 3 * len(DATASETS)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(min_size=1, max_size=40).filter(
    # Names that fit a directory once quoted (up to 12 bytes a character; the first may take
    # 2 more): longer ones are refused with a clear error, tested with the bad names below.
    lambda s: s != "__HIVE_DEFAULT_PARTITION__" and len(quote(s, safe="").encode()) + 2 <= MAX_PARTITION_VALUE_BYTES))
def test_any_dataset_name_round_trips_through_the_partition_directory(tmp_path_factory, name):
    root = tmp_path_factory.mktemp("rt")
    with _writer(root, run_id=name, dataset=name) as w:
        assert w.add(rows_for(name, 1, dataset=name)).accepted == 1
    assert open_results(root).candidates.to_table()["dataset"].to_pylist() == [name]
    duck = _duck_raw(root)
    assert duck["dataset"].to_pylist() == [name] and duck["run_id"].to_pylist() == [name]


# Values DuckDB's hive type detection would turn into numbers or dates if left as they are.
AUTOCAST_BAIT = ["0", "123", "-5", "+5", "1e3", "1.5", "2024-01-01", "2024-01-01T00:00:00Z",
                 "12:00:00", "inf", "infinity", "-infinity", "Infinity", "nan", "epoch", "true",
                 "NULL", "x", "today", "e5", "T10:00", " 5", "€5", "%41", "a1", "1a"]


@pytest.mark.parametrize("name", AUTOCAST_BAIT)
def test_duckdb_reads_numeric_or_date_looking_names_as_strings(tmp_path, name):
    # Alone in a root: DuckDB only guesses a type when every partition value agrees.
    with _writer(tmp_path, run_id=name, dataset=name) as w:
        w.add(rows_for(name, 1, dataset=name))
    duck = _duck_raw(tmp_path)
    assert duck.schema.field("run_id").type == pa.string()
    assert duck.schema.field("dataset").type == pa.string()
    assert duck["run_id"].to_pylist() == [name] and duck["dataset"].to_pylist() == [name]
    assert open_results(tmp_path).candidates.to_table()["run_id"].to_pylist() == [name]


@pytest.mark.parametrize("bad,match", [
    ("", "non-empty"),
    ("__HIVE_DEFAULT_PARTITION__", "reserved"),
    ("csv:/" + "x" * 300, "too long"),
])
def test_unusable_partition_values_are_rejected_up_front(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        partition_value(bad)
    with pytest.raises(ValueError, match=match):
        _writer(tmp_path, dataset=bad)


# --- exactly once ------------------------------------------------------------------------------

def test_duplicates_are_dropped_within_and_across_batches(tmp_path):
    rows = rows_for("run-1", 5)
    with _writer(tmp_path) as w:
        first = w.add(rows + rows[:2])
        second = w.add(rows[1:])
        w.flush()
        third = w.add(rows)
    assert (first.accepted, first.duplicates) == (5, 2)
    assert (second.accepted, second.duplicates) == (0, 4)
    assert third.accepted == 0
    ids = open_results(tmp_path).candidates.to_table()["candidate_id"].to_pylist()
    assert sorted(ids) == sorted(r["candidate_id"] for r in rows)


def test_a_restarted_writer_seeds_ids_from_disk_and_continues_part_numbers(tmp_path):
    old = rows_for("run-1", 4)
    with _writer(tmp_path, compact=False) as w:
        w.add(old)
    assert existing_candidate_ids(tmp_path, "run-1") == {r["candidate_id"] for r in old}
    assert agent_progress(tmp_path, "run-1") == {0: 3}

    new = rows_for("run-1", 3, step0=4) + rows_for("run-1", 2, agent_id=1)
    # e.g. after an actor restart: the caller resends everything (no compaction at close, so
    # the two sessions' files stay apart and their numbers show)
    with _writer(tmp_path, compact=False) as w:
        result = w.add(old + new)
    assert (result.accepted, result.duplicates) == (5, 4)
    table = open_results(tmp_path).candidates.to_table()
    assert table.num_rows == 9 and len(set(table["candidate_id"].to_pylist())) == 9
    names = sorted(p.name for p in data_files(candidates_dir(tmp_path, "feynman:I.6.2", "run-1")))
    assert [n[:11] for n in names] == ["part-000000", "part-000001"]
    assert agent_progress(tmp_path, "run-1") == {0: 6, 1: 1}
    # known_ids overrides the disk scan (the actor shell may keep its own record).
    with _writer(tmp_path, known_ids=[]) as w:
        assert w.add(old[:1]).accepted == 1


def test_concurrent_adders_write_every_candidate_exactly_once(tmp_path):
    per_thread = [rows_for("run-1", 200, agent_id=a) for a in range(4)]
    w = _writer(tmp_path, max_rows=64)
    barrier = threading.Barrier(4)

    def work(rows):
        barrier.wait()
        for i in range(0, len(rows), 10):
            w.add(rows[i:i + 10] + rows[max(0, i - 5):i])  # overlap: resends a few

    threads = [threading.Thread(target=work, args=(rows,)) for rows in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    ids = open_results(tmp_path).candidates.to_table()["candidate_id"].to_pylist()
    assert len(ids) == 800 and len(set(ids)) == 800
    stats = w.stats()
    assert stats.rows_written == 800 and stats.pending == 0 and stats.files_written >= 12


# --- flush policy ------------------------------------------------------------------------------

def test_flush_when_buffer_is_full(tmp_path):
    w = _writer(tmp_path, max_rows=3, clock=FakeClock())
    w.add(rows_for("run-1", 2))
    assert w.stats().files_written == 0 and w.stats().pending == 2
    w.add(rows_for("run-1", 3, step0=2))
    assert w.stats().files_written == 1 and w.stats().pending == 0
    w.close()


def test_flush_when_flush_s_has_passed(tmp_path):
    clock = FakeClock()
    w = _writer(tmp_path, flush_s=2.0, clock=clock)
    w.add(rows_for("run-1", 1))
    clock.now = 1.9
    w.add(rows_for("run-1", 1, step0=1))
    assert w.stats().pending == 2
    clock.now = 2.0
    w.add(rows_for("run-1", 1, step0=2))
    assert w.stats().pending == 0 and w.stats().rows_written == 3
    w.close()


def test_background_thread_flushes_a_quiet_writer(tmp_path):
    w = CandidateWriter(tmp_path, "run-1", "feynman:I.6.2", "evolve", flush_s=0.05)
    w.add(rows_for("run-1", 2))
    deadline = time.monotonic() + 30  # generous: only guards against a hang
    while w.stats().rows_written < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert w.stats().rows_written == 2
    assert open_results(tmp_path).candidates.count_rows() == 2
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.add(rows_for("run-1", 1, step0=9))
    w.close()  # idempotent


# --- bad input and failures --------------------------------------------------------------------

def test_bad_rows_are_reported_not_raised(tmp_path):
    good = rows_for("run-1", 2)
    bad_type = {**rows_for("run-1", 1, step0=5)[0], "val_nmse": "low"}
    other_run = rows_for("run-2", 1)[0]
    with _writer(tmp_path) as w:
        result = w.add([good[0], bad_type, other_run, "not a row", good[1]])
    assert result.accepted == 2 and len(result.rejected) == 3
    joined = "\n".join(result.rejected)
    assert "'val_nmse': expected a number" in joined
    assert "does not match this writer's 'run-1'" in joined
    assert "must be a mapping" in joined
    assert w.stats().rejected == 3


def test_rows_may_omit_the_writers_own_columns(tmp_path):
    row = rows_for("run-1", 1)[0]
    for key in ("run_id", "dataset", "model"):
        del row[key]
    with _writer(tmp_path) as w:
        assert w.add([row]).accepted == 1
    got = open_results(tmp_path).candidates.to_table().to_pylist()[0]
    assert (got["run_id"], got["dataset"], got["model"]) == ("run-1", "feynman:I.6.2", "evolve")


def test_a_failed_flush_keeps_rows_and_succeeds_later(tmp_path):
    w = _writer(tmp_path)
    blocker = candidates_dir(tmp_path, "feynman:I.6.2", "run-1")
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a file where the run's directory should be")
    w.add(rows_for("run-1", 3))
    with pytest.raises(ResultsWriteError, match="could not write"):
        w.flush()
    assert w.stats().pending == 3 and w.stats().last_error
    assert not list(blocker.parent.glob(".*.tmp"))
    blocker.unlink()
    assert w.flush() == 3
    w.close()
    assert w.stats().last_error is None
    assert open_results(tmp_path).candidates.count_rows() == 3


def test_write_atomic_leaves_nothing_behind_on_failure(tmp_path):
    bad = pa.table({"x": [1]})
    target = tmp_path / "d" / "f.parquet"

    class Boom(Exception):
        pass

    class Exploding:
        def __getattr__(self, name):
            raise Boom

    with pytest.raises(Boom):
        write_atomic(Exploding(), target)  # type: ignore[arg-type]
    assert list((tmp_path / "d").iterdir()) == []
    write_atomic(bad, target)
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["f.parquet"]


# --- runs table and interruption ---------------------------------------------------------------

def test_run_row_is_replaced_so_readers_see_one_row(tmp_path):
    from results_helpers import T0
    record = RunRecord(run_id="run-1", dataset="feynman:I.6.2", model="evolve", started_at=T0,
                       agents=2, config="search:\n  agents: 2\n")
    write_run(tmp_path, record)
    write_run(tmp_path, record.with_best(None, 5).finished("completed", "max_seconds"))
    runs = open_results(tmp_path).runs.to_table()
    assert runs.schema == RUNS_SCHEMA and runs.num_rows == 1
    assert runs["status"].to_pylist() == ["completed"]
    assert read_run(tmp_path, "run-1").stop_reason == "max_seconds"
    assert read_run(tmp_path, "nope") is None


WRITER_SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[2])
    from results_helpers import rows_for
    from sr_dist.results import CandidateWriter
    w = CandidateWriter(sys.argv[1], "run-k", "feynman:I.6.2", "evolve", flush_s=0.01)
    step = 0
    while True:
        w.add(rows_for("run-k", 20, step0=step))
        step += 20
        time.sleep(0.005)
""")


def test_killed_writer_leaves_readable_files_and_a_resumable_run(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER_SCRIPT, str(tmp_path), str(Path(__file__).parent)],
        cwd=REPO,
    )
    try:
        directory = candidates_dir(tmp_path, "feynman:I.6.2", "run-k")
        deadline = time.monotonic() + 60  # guards against a hang only
        while len(data_files(directory)) < 3 and time.monotonic() < deadline:
            assert proc.poll() is None, "writer process died"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    written, best = summarize_run(tmp_path, "run-k")
    assert written >= 3 and best is not None
    assert _duck_raw(tmp_path).num_rows == written  # every visible file is whole
    record = RunRecord(run_id="run-k", dataset="feynman:I.6.2", model="evolve",
                       started_at=best["created_at"])
    write_run(tmp_path, record.with_best(best, written).finished("interrupted", "interrupted"))

    # Resume: the agent continues after its last step and resends its last turns.
    last = agent_progress(tmp_path, "run-k")[0]
    with _writer(tmp_path, run_id="run-k") as w:
        result = w.add(rows_for("run-k", last + 1 + 10))
    assert (result.accepted, result.duplicates) == (10, last + 1)
    ids = open_results(tmp_path).candidates.to_table()["candidate_id"].to_pylist()
    assert len(ids) == len(set(ids)) == written + 10
    assert read_run(tmp_path, "run-k").status == "interrupted"
