"""The candidate writer: buffered, deduplicating, atomic Parquet files for one run.

A plain, thread-safe Python object (the ``ResultWriter`` Ray actor is a thin shell around it).
Rows are validated as they arrive, buffered, and written as one file per flush; a flush happens
when ``flush_s`` has passed since the last one (checked on ``add`` and by a background thread,
so a quiet run still lands on disk) or when ``max_rows`` are waiting.

Durable acknowledgement: ``add(rows, wait=True)`` returns only once its rows are in a
committed (fsynced, renamed) file, so a caller that got the answer never needs to send them
again, and one that did not can resend them safely.

Exactly-once: each ``candidate_id`` is written at most once per run. The writer remembers the
ids it accepted (:class:`~sr_dist.results.dedup.SeenIds`, bounded memory) and, on start, the
ids already on disk for its run (:func:`~sr_dist.results.scan.scan_run`), so a writer
restarted after a crash (or a resumed run) drops the rows its callers resend.

Bounded file count: flush files are rolled into bigger ones and compacted when the writer
closes (:mod:`sr_dist.results.rolling_files`), atomically for every reader.

Disk faults: a flush that fails because the disk is full, read-only or refuses permission
(or fails ``max_failures`` times in a row) makes the writer *failed*: waiting and later
``add`` calls get :class:`ResultsWriteError`, ``stats().write_error`` says why, and what was
written stays readable.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from sr_dist.results import rolling_files
from sr_dist.results.dedup import DEFAULT_WINDOW_STEPS, SeenIds
from sr_dist.results.layout import (
    candidates_dir,
    data_files,
    next_part_seq,
    part_name,
    run_file,
    staging_dir,
    write_atomic,
)
from sr_dist.results.rolling_files import FileInfo, RollPolicy, SwapUnsupported
from sr_dist.results.scan import RunScan, scan_run
from sr_dist.results.schema import (
    CANDIDATE_SCHEMA,
    RUNS_SCHEMA,
    RowError,
    RunRecord,
    normalize_row,
)

log = logging.getLogger(__name__)

#: errnos after which retrying a flush is pointless: the writer fails at once.
FATAL_ERRNOS: frozenset[int] = frozenset(
    code for code in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM,
                      getattr(errno, "EDQUOT", None)) if code is not None)
#: Consecutive failed flushes (of any kind) after which the writer fails.
MAX_FLUSH_FAILURES = 5

_FIXES = {
    errno.ENOSPC: "the disk is full: free space, or point results.path at a bigger disk",
    errno.EROFS: "the file system is read-only: point results.path at a writable directory",
    errno.EACCES: "permission denied: make results.path writable by the user running sr-dist",
    errno.EPERM: "permission denied: make results.path writable by the user running sr-dist",
}
if hasattr(errno, "EDQUOT"):
    _FIXES[errno.EDQUOT] = "the disk quota is used up: free space or raise the quota"


class ResultsWriteError(OSError):
    """Rows could not be written: buffered rows wait for the next flush, unless the writer has
    failed (``CandidateWriter.stats().write_error``)."""


@dataclasses.dataclass(frozen=True)
class AddResult:
    """What ``CandidateWriter.add`` did with a batch of rows."""

    accepted: int
    duplicates: int
    rejected: tuple[str, ...] = ()
    #: The accepted rows, normalized (what a tally should count: no duplicates, no rejects).
    rows: tuple[Mapping[str, Any], ...] = dataclasses.field(default=(), repr=False,
                                                            compare=False)


@dataclasses.dataclass(frozen=True)
class WriterStats:
    """Counters of a ``CandidateWriter`` (for logs and the run summary)."""

    rows_written: int
    files_written: int
    pending: int
    duplicates: int
    rejected: int
    last_error: str | None
    #: Why the writer stopped writing (it refuses rows from then on), or ``None``.
    write_error: str | None = None
    #: Rolls and compactions done, and the flush files they merged.
    rolls: int = 0
    files_merged: int = 0
    #: Candidate ids the dedup holds exactly (bounded; see ``SeenIds``).
    seen_entries: int = 0


def _errno_of(exc: BaseException) -> int | None:
    """The errno behind ``exc`` or its causes (pyarrow may wrap the ``OSError``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "errno", None)
        if isinstance(code, int) and code:
            return code
        current = current.__cause__ or current.__context__
    text = str(exc)
    for code in FATAL_ERRNOS:
        if os.strerror(code) in text:
            return code
    return None


class CandidateWriter:
    """Writes one run's candidate rows under ``path`` (see ``sr_dist.results.layout``).

    Args:
        path: the results root.
        run_id, dataset: the run's partition values; rows may omit these columns, and rows
            naming another run or dataset are rejected.
        model: the value rows without a ``model`` get.
        flush_s: longest time a row waits in the buffer.
        max_rows: buffer size that triggers a flush on ``add``.
        known_ids: candidate ids to treat as already written; ``None`` reads them from disk.
        background: run daemon threads that flush every ``flush_s`` and roll files without
            waiting for ``add`` (turn off when the caller drives ``flush`` itself, e.g. tests).
        clock: monotonic seconds, injectable for tests.
        roll_files, roll_s, target_file_mb, compact: when flush files are rolled into one and
            whether ``close`` compacts the run (see :class:`~sr_dist.results.rolling_files.RollPolicy`).
        window_steps: steps per agent whose ids the dedup keeps exactly (``SeenIds``).
        max_failures: consecutive failed flushes after which the writer fails.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        run_id: str,
        dataset: str,
        model: str,
        *,
        flush_s: float = 2.0,
        max_rows: int = 50_000,
        known_ids: Iterable[str] | None = None,
        background: bool = True,
        clock: Callable[[], float] = time.monotonic,
        roll_files: int = 32,
        roll_s: float | None = 120.0,
        target_file_mb: float = 256.0,
        compact: bool = True,
        window_steps: int = DEFAULT_WINDOW_STEPS,
        max_failures: int = MAX_FLUSH_FAILURES,
    ) -> None:
        if not flush_s > 0:
            raise ValueError(f"flush_s must be positive, got {flush_s!r}")
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows!r}")
        if max_failures < 1:
            raise ValueError(f"max_failures must be at least 1, got {max_failures!r}")
        if not target_file_mb > 0:
            raise ValueError(f"target_file_mb must be positive, got {target_file_mb!r}")
        self.path = Path(path)
        self.run_id = run_id
        self.dataset = dataset
        self.model = model
        self.flush_s = float(flush_s)
        self.max_rows = int(max_rows)
        self.max_failures = int(max_failures)
        self.policy = RollPolicy(roll_files=roll_files, roll_s=roll_s,
                                 target_bytes=int(target_file_mb * 1024 * 1024), compact=compact)
        self.directory = candidates_dir(self.path, dataset, run_id)  # validates the names
        self._staging = staging_dir(self.path, run_id)
        rolling_files.remove_tree(self._staging)  # a crashed roll's leftovers: either state holds
        rolling_files.remove_empty(self._staging)
        self._clock = clock
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._roll_lock = threading.Lock()
        self._buffer: list[dict[str, Any]] = []
        self._buffered_ids: set[str] = set()
        #: Flush on every add (``stop_batching``: the search has stopped).
        self._every_add = False
        #: Generation of the rows in the buffer; a flush commits it and starts the next.
        self._gen = 1
        self._committed_gen = 0
        self._seen = SeenIds(run_id, window_steps)
        if known_ids is None:
            self.on_disk: RunScan = scan_run(self.path, run_id, self._seen)
        else:
            self.on_disk = RunScan()
            for cid in known_ids:
                self._seen.add(cid)
        self._seq = next_part_seq(self.directory)
        self._last_flush = clock()
        self._rows_written = 0
        self._files_written = 0
        self._duplicates = 0
        self._rejected = 0
        self._failures = 0
        self._last_error: str | None = None
        self._write_error: str | None = None
        self._closed = False
        self._rolls = 0
        self._files_merged = 0
        self._exchange = True  # False once this file system refused an atomic exchange
        self._schema_ok: dict[str, bool] = {}
        fresh = [f for f in rolling_files.list_files(self.directory) if not f.rolled]
        self._fresh = len(fresh)
        self._fresh_since: float | None = clock() if fresh else None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        if background:
            self._threads.append(threading.Thread(
                target=self._flush_loop, name=f"sr-dist-writer-{run_id}", daemon=True))
            if self.policy.roll_files:
                self._threads.append(threading.Thread(
                    target=self._roll_loop, name=f"sr-dist-roller-{run_id}", daemon=True))
            for thread in self._threads:
                thread.start()

    # -- public -----------------------------------------------------------------------------

    def add(self, rows: Iterable[Mapping[str, Any]], *, wait: bool = False,
            timeout: float | None = None) -> AddResult:
        """Validate and buffer ``rows``; flush if due. Never raises for bad rows.

        Bad rows are counted and described in ``AddResult.rejected``; a failed flush keeps the
        rows buffered and shows up in ``stats().last_error`` (``flush``/``close`` raise it).
        ``wait``: return only once the accepted rows (and any duplicate still in the buffer)
        are in a committed file; needs the background thread or another caller's ``flush``.
        ``ResultsWriteError`` once the writer has failed (the rows were not written);
        ``TimeoutError`` when ``timeout`` seconds pass first.
        """
        duplicates = 0
        rejected: list[str] = []
        prepared: list[dict[str, Any]] = []
        for row in rows:
            try:
                prepared.append(self._prepare(row))
            except RowError as exc:
                cid = row.get("candidate_id") if isinstance(row, Mapping) else None
                rejected.append(f"{cid or '?'}: {exc}")
        accepted: list[dict[str, Any]] = []
        with self._cond:
            self._raise_if_failed()
            if self._closed:
                raise RuntimeError("CandidateWriter is closed")
            pending_duplicate = False
            for row in prepared:
                cid = row["candidate_id"]
                if not self._seen.add(cid):
                    duplicates += 1
                    pending_duplicate = pending_duplicate or cid in self._buffered_ids
                    continue
                self._buffer.append(row)
                self._buffered_ids.add(cid)
                accepted.append(row)
            generation = self._gen
            self._duplicates += duplicates
            self._rejected += len(rejected)
            if self._buffer and (
                self._every_add
                or len(self._buffer) >= self.max_rows
                or self._clock() - self._last_flush >= self.flush_s
            ):
                self._try_flush_locked()
            if wait and (accepted or pending_duplicate):
                self._wait_locked(generation, timeout)
        if rejected:
            log.warning("results: rejected %d row(s): %s", len(rejected), rejected[:3])
        return AddResult(accepted=len(accepted), duplicates=duplicates,
                         rejected=tuple(rejected), rows=tuple(accepted))

    def stop_batching(self) -> None:
        """Flush now and on every add from here on: the search has stopped, and its agents'
        last rows (and the agents waiting for their acknowledgement) should not wait up to
        ``flush_s`` for the next flush."""
        with self._cond:
            self._every_add = True
            if self._buffer and not self._closed:
                self._try_flush_locked()

    def flush(self) -> int:
        """Write the buffered rows now; returns how many. ``ResultsWriteError`` on failure."""
        with self._cond:
            return self._flush_locked()

    def roll(self) -> int:
        """Merge the flush files if a roll is due (see ``RollPolicy``); returns the files
        merged. The background thread calls this; tests call it directly."""
        with self._roll_lock:
            with self._cond:
                if not self._roll_due_locked():
                    return 0
                files = rolling_files.list_files(self.directory)
                age = None if self._fresh_since is None else self._clock() - self._fresh_since
            chosen = rolling_files.plan_roll(files, self.policy, age, self._mergeable)
            return self._merge(rolling_files.plan_groups(chosen, self.policy.target_bytes))

    def compact(self) -> int:
        """Merge every file of this writer's run directory into as few as possible, each at
        most ``target_file_mb`` (``close`` does this when ``compact``); returns files merged."""
        with self._roll_lock:
            with self._cond:
                files = [f for f in rolling_files.list_files(self.directory) if self._mergeable(f)]
            return self._merge(rolling_files.plan_groups(files, self.policy.target_bytes))

    def close(self) -> None:
        """Stop the background threads, write what is left and compact the run's files
        (idempotent). ``ResultsWriteError`` if the rows could not be written."""
        self._stop.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
        with self._cond:
            if self._closed:
                return
            try:
                self._raise_if_failed()
                self._flush_locked()
            except ResultsWriteError as exc:
                if self._write_error is None:  # release waiters: nothing will flush now
                    self._write_error = str(exc)
                raise
            finally:
                self._closed = True
                self._cond.notify_all()
        if self.policy.compact:
            try:
                self.compact()
            except (OSError, pa.ArrowException) as exc:  # the files are whole either way
                log.warning("results: compacting %s failed, its files are kept as they are: %s",
                            self.directory, exc)

    def stats(self) -> WriterStats:
        """A snapshot of the writer's counters."""
        with self._lock:
            return WriterStats(
                rows_written=self._rows_written,
                files_written=self._files_written,
                pending=len(self._buffer),
                duplicates=self._duplicates,
                rejected=self._rejected,
                last_error=self._last_error,
                write_error=self._write_error,
                rolls=self._rolls,
                files_merged=self._files_merged,
                seen_entries=self._seen.entries,
            )

    def last_steps(self) -> dict[int, int]:
        """The highest step written or accepted per agent (on disk included)."""
        with self._lock:
            return self._seen.last_steps()

    def __enter__(self) -> CandidateWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _prepare(self, row: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(row, Mapping):
            raise RowError(f"a row must be a mapping, got {type(row).__name__}")
        full = dict(row)
        for key, default in (("run_id", self.run_id), ("dataset", self.dataset)):
            value = full.setdefault(key, default)
            if value != default:
                raise RowError(f"{key} {value!r} does not match this writer's {default!r}")
        if full.get("model") is None:
            full["model"] = self.model
        return normalize_row(full, CANDIDATE_SCHEMA)

    def _raise_if_failed(self) -> None:
        if self._write_error is not None:
            raise ResultsWriteError(f"the results writer has stopped: {self._write_error}")

    def _wait_locked(self, generation: int, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._committed_gen < generation:
            self._raise_if_failed()
            if self._closed:
                raise ResultsWriteError("the results writer closed before the rows were written")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"rows not written within {timeout} s")
            self._cond.wait(remaining)

    def _flush_locked(self) -> int:
        self._raise_if_failed()
        if not self._buffer:
            self._last_flush = self._clock()
            return 0
        rows = self._buffer
        table = pa.Table.from_pylist(rows, schema=CANDIDATE_SCHEMA)
        target = self.directory / part_name(self._seq)
        try:
            write_atomic(table, target)
        except (OSError, pa.ArrowException) as exc:
            self._failures += 1
            self._last_error = f"{type(exc).__name__}: {exc}"
            code = _errno_of(exc)
            if code in FATAL_ERRNOS or self._failures >= self.max_failures:
                fix = _FIXES.get(code or 0, f"{self._failures} flushes failed in a row")
                self._write_error = f"could not write {self.directory}: {exc} ({fix})"
                log.error("results: the writer has stopped, %d buffered row(s) not written: %s",
                          len(rows), self._write_error)
                self._cond.notify_all()
            raise ResultsWriteError(f"could not write {target}: {exc}") from exc
        self._seq += 1
        self._buffer = []
        self._buffered_ids = set()
        self._committed_gen = self._gen
        self._gen += 1
        self._rows_written += len(rows)
        self._files_written += 1
        self._failures = 0
        self._last_error = None
        self._last_flush = self._clock()
        self._fresh += 1
        if self._fresh_since is None:
            self._fresh_since = self._clock()
        self._cond.notify_all()
        return len(rows)

    def _try_flush_locked(self) -> None:
        try:
            self._flush_locked()
        except ResultsWriteError as exc:
            if self._write_error is None:  # else the stop was logged with its reason
                log.error("results: flush failed, %d row(s) kept: %s", len(self._buffer), exc)

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.flush_s / 2):
            with self._cond:
                if self._closed or self._write_error is not None:
                    return
                if self._buffer and self._clock() - self._last_flush >= self.flush_s:
                    self._try_flush_locked()

    def _roll_loop(self) -> None:
        interval = min(self.flush_s, self.policy.roll_s or self.flush_s) / 2
        while not self._stop.wait(interval):
            try:
                self.roll()
            except Exception:  # noqa: BLE001 - a failed roll leaves the old files; retried later
                log.warning("results: rolling %s failed; its files are kept", self.directory,
                            exc_info=True)
                self._stop.wait(max(interval, 5.0))

    def _roll_due_locked(self) -> bool:
        if not self.policy.roll_files or self._write_error is not None or self._fresh < 2:
            return False
        if self._fresh >= self.policy.roll_files:
            return True
        return (self.policy.roll_s is not None and self._fresh_since is not None
                and self._clock() - self._fresh_since >= self.policy.roll_s)

    def _mergeable(self, info: FileInfo) -> bool:
        ok = self._schema_ok.get(info.path.name)
        if ok is None:
            ok = self._schema_ok[info.path.name] = rolling_files.has_candidate_schema(info.path)
        return ok

    def _merge(self, groups: list[list[FileInfo]]) -> int:
        """Write each group as one file and swap them in for their inputs (roll lock held)."""
        if not groups:
            return 0
        stage = rolling_files.new_stage(self._staging)
        try:
            merged = [rolling_files.write_merged(group, stage) for group in groups]
            inputs = [f.path for group in groups for f in group]
            with self._cond:
                self._swap_locked(stage, merged, inputs)
                self._rolls += 1
                self._files_merged += len(inputs)
                for path in inputs:
                    self._schema_ok.pop(path.name, None)
                fresh = sum(1 for f in rolling_files.list_files(self.directory) if not f.rolled)
                self._fresh = fresh
                self._fresh_since = self._clock() if fresh else None
        finally:
            rolling_files.remove_tree(stage)  # after the swap it holds the old state
            rolling_files.remove_empty(self._staging)
        return len(inputs)

    def _swap_locked(self, stage: Path, merged: list[Path], inputs: list[Path]) -> None:
        names = {p.name for p in data_files(self.directory)}
        missing = [p.name for p in inputs if p.name not in names]
        if missing:
            raise FileNotFoundError(f"files to merge vanished from {self.directory}: {missing[:3]}")
        if self._exchange:
            try:
                rolling_files.swap_in(self.directory, stage, {p.name for p in inputs})
                return
            except SwapUnsupported as exc:
                self._exchange = False
                log.warning("results: %s; rolling files there by moving the merged file in and "
                            "then deleting its inputs, so a reader listing the directory in "
                            "between counts those rows twice", exc)
                for entry in os.scandir(stage):  # drop the links made before the refusal
                    if Path(entry.path) not in merged:
                        os.unlink(entry.path)
        rolling_files.move_in(self.directory, merged, inputs)


def write_run(path: str | os.PathLike[str], record: RunRecord) -> Path:
    """Write ``record`` as its run's only ``runs`` row, atomically replacing the previous one."""
    target = run_file(path, record.run_id)
    table = pa.Table.from_pylist([record.to_row()], schema=RUNS_SCHEMA)
    write_atomic(table, target)
    return target
