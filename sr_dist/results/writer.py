"""The candidate writer: buffered, deduplicating, atomic Parquet files for one run.

A plain, thread-safe Python object (the ``ResultWriter`` Ray actor is a thin shell around it).
Rows are validated as they arrive, buffered, and written as one file per flush; a flush happens
when ``flush_s`` has passed since the last one (checked on ``add`` and by a background thread,
so a quiet run still lands on disk) or when ``max_rows`` are waiting.

Exactly-once: each ``candidate_id`` is written at most once per run. The writer remembers the
ids it accepted and, on start, the ids already on disk for its run, so a writer restarted after
a crash (or a resumed run) drops the rows its callers resend.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from sr_dist.results.layout import candidates_dir, next_part_seq, part_name, run_file, write_atomic
from sr_dist.results.query import existing_candidate_ids
from sr_dist.results.schema import (
    CANDIDATE_SCHEMA,
    RUNS_SCHEMA,
    RowError,
    RunRecord,
    normalize_row,
)

log = logging.getLogger(__name__)


class ResultsWriteError(OSError):
    """Buffered rows could not be written; they stay buffered for the next flush."""


@dataclasses.dataclass(frozen=True)
class AddResult:
    """What ``CandidateWriter.add`` did with a batch of rows."""

    accepted: int
    duplicates: int
    rejected: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class WriterStats:
    """Counters of a ``CandidateWriter`` (for logs and the run summary)."""

    rows_written: int
    files_written: int
    pending: int
    duplicates: int
    rejected: int
    last_error: str | None


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
        background: run a daemon thread that flushes every ``flush_s`` without waiting for
            ``add`` (turn off when the caller drives ``flush`` itself, e.g. tests).
        clock: monotonic seconds, injectable for tests.
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
    ) -> None:
        if not flush_s > 0:
            raise ValueError(f"flush_s must be positive, got {flush_s!r}")
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows!r}")
        self.path = Path(path)
        self.run_id = run_id
        self.dataset = dataset
        self.model = model
        self.flush_s = float(flush_s)
        self.max_rows = int(max_rows)
        self.directory = candidates_dir(self.path, dataset, run_id)  # validates the names
        self._clock = clock
        self._lock = threading.Lock()
        self._buffer: list[dict[str, Any]] = []
        seen = existing_candidate_ids(self.path, run_id) if known_ids is None else known_ids
        self._seen: set[str] = set(seen)
        self._seq = next_part_seq(self.directory)
        self._last_flush = clock()
        self._rows_written = 0
        self._files_written = 0
        self._duplicates = 0
        self._rejected = 0
        self._last_error: str | None = None
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(
                target=self._flush_loop, name=f"sr-dist-writer-{run_id}", daemon=True
            )
            self._thread.start()

    # -- public -----------------------------------------------------------------------------

    def add(self, rows: Iterable[Mapping[str, Any]]) -> AddResult:
        """Validate and buffer ``rows``; flush if due. Never raises for bad rows or I/O.

        Bad rows are counted and described in ``AddResult.rejected``; a failed flush keeps the
        rows buffered and shows up in ``stats().last_error`` (``flush``/``close`` raise it).
        """
        accepted = duplicates = 0
        rejected: list[str] = []
        prepared: list[dict[str, Any]] = []
        for row in rows:
            try:
                prepared.append(self._prepare(row))
            except RowError as exc:
                cid = row.get("candidate_id") if isinstance(row, Mapping) else None
                rejected.append(f"{cid or '?'}: {exc}")
        with self._lock:
            if self._closed:
                raise RuntimeError("CandidateWriter is closed")
            for row in prepared:
                cid = row["candidate_id"]
                if cid in self._seen:
                    duplicates += 1
                    continue
                self._seen.add(cid)
                self._buffer.append(row)
                accepted += 1
            self._duplicates += duplicates
            self._rejected += len(rejected)
            if self._buffer and (
                len(self._buffer) >= self.max_rows
                or self._clock() - self._last_flush >= self.flush_s
            ):
                self._try_flush_locked()
        if rejected:
            log.warning("results: rejected %d row(s): %s", len(rejected), rejected[:3])
        return AddResult(accepted=accepted, duplicates=duplicates, rejected=tuple(rejected))

    def flush(self) -> int:
        """Write the buffered rows now; returns how many. ``ResultsWriteError`` on failure."""
        with self._lock:
            return self._flush_locked()

    def close(self) -> None:
        """Stop the background thread and write what is left (idempotent)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            if self._closed:
                return
            self._flush_locked()
            self._closed = True

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
            )

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

    def _flush_locked(self) -> int:
        if not self._buffer:
            self._last_flush = self._clock()
            return 0
        rows = self._buffer
        table = pa.Table.from_pylist(rows, schema=CANDIDATE_SCHEMA)
        target = self.directory / part_name(self._seq)
        try:
            write_atomic(table, target)
        except (OSError, pa.ArrowException) as exc:
            self._last_error = f"{type(exc).__name__}: {exc}"
            raise ResultsWriteError(f"could not write {target}: {exc}") from exc
        self._seq += 1
        self._buffer = []
        self._rows_written += len(rows)
        self._files_written += 1
        self._last_error = None
        self._last_flush = self._clock()
        return len(rows)

    def _try_flush_locked(self) -> None:
        try:
            self._flush_locked()
        except ResultsWriteError as exc:
            log.error("results: flush failed, %d row(s) kept: %s", len(self._buffer), exc)

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.flush_s / 2):
            with self._lock:
                if self._closed:
                    return
                if self._buffer and self._clock() - self._last_flush >= self.flush_s:
                    self._try_flush_locked()


def write_run(path: str | os.PathLike[str], record: RunRecord) -> Path:
    """Write ``record`` as its run's only ``runs`` row, atomically replacing the previous one."""
    target = run_file(path, record.run_id)
    table = pa.Table.from_pylist([record.to_row()], schema=RUNS_SCHEMA)
    write_atomic(table, target)
    return target
