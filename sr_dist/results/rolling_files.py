"""Rolling a run's small files into bigger ones, and swapping them in atomically.

Every flush of the writer commits one small file (that commit is what acknowledges the rows).
A long run would leave thousands, so the writer *rolls*: once ``roll_files`` flush files have
piled up, or the oldest is ``roll_s`` old, it merges them into one file, and when the run
ends it *compacts* the run's files into as few as it can, each at most ``target_file_mb``.

Replacing N files by one cannot be done with renames of files without a moment in which a
reader sees both (a double count) or neither. So the writer swaps the whole run directory:
it builds the next state in a staging directory outside ``candidates/`` on the same file
system (hard links of the files it keeps plus the merged files) and exchanges the two
directories in one ``renameat2(RENAME_EXCHANGE)`` call; the old state, now at the staging
path, is then deleted. A reader's directory listing is of one state or the other. A crash
leaves either state in place and a staging directory that the next writer of the run removes.
Where ``renameat2`` is unavailable (not Linux, or a file system such as NFS that refuses the
flag) the writer falls back to moving the merged file in and then deleting the inputs, which
for a moment shows both, and says so in a warning.

Pure planning (:func:`plan_roll`, :func:`plan_groups`) is separate from the file operations
(:func:`write_merged`, :func:`swap_in`, :func:`move_in`), which the writer runs under its lock.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sr_dist.results.layout import data_files, fsync_dir, is_rolled, part_name, part_seqs
from sr_dist.results.schema import CANDIDATE_SCHEMA

__all__ = [
    "FileInfo",
    "RollPolicy",
    "SwapUnsupported",
    "exchange_dirs",
    "list_files",
    "move_in",
    "plan_groups",
    "plan_roll",
    "remove_empty",
    "swap_in",
    "write_merged",
]

log = logging.getLogger(__name__)

#: Rows per row group of a merged file (one input file per row group would leave many tiny
#: groups, which readers pay for); a merge holds about two of them in memory at a time.
ROW_GROUP_ROWS = 32 * 1024
#: ``renameat2`` flag: swap the two names atomically.
RENAME_EXCHANGE = 2
_AT_FDCWD = -100
#: errnos that say "this file system (or kernel) cannot exchange names": fall back.
_NO_EXCHANGE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.ENOTSUP,
                          errno.EOPNOTSUPP, errno.EPERM})


class SwapUnsupported(OSError):
    """The directories cannot be exchanged atomically here (the caller falls back)."""


@dataclasses.dataclass(frozen=True)
class RollPolicy:
    """When to roll and how big merged files get (the ``results`` keys of the same names)."""

    #: Flush files that trigger a roll; 0 never rolls.
    roll_files: int = 32
    #: Age of the oldest flush file that triggers a roll (``None``: no time trigger).
    roll_s: float | None = 120.0
    #: Largest merged file, bytes (inputs are grouped by their size on disk).
    target_bytes: int = 256 * 1024 * 1024
    #: Compact the run's files when the writer closes.
    compact: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.roll_files, bool) or not isinstance(self.roll_files, int) \
                or self.roll_files < 0 or self.roll_files == 1:
            raise ValueError(f"roll_files must be 0 (never) or at least 2, got {self.roll_files!r}")
        if self.roll_s is not None and not self.roll_s > 0:
            raise ValueError(f"roll_s must be positive or None, got {self.roll_s!r}")
        if not self.target_bytes > 0:
            raise ValueError(f"target_bytes must be positive, got {self.target_bytes!r}")


@dataclasses.dataclass(frozen=True)
class FileInfo:
    """One candidate file of a run directory."""

    path: Path
    first: int
    last: int
    size: int
    #: A merged file (``part-<first>-to-<last>-...``) rather than one flush's.
    rolled: bool


def list_files(directory: Path) -> list[FileInfo]:
    """The files sr-dist named in ``directory``, in flush order (others are left alone)."""
    out = []
    for path in data_files(directory):
        seqs = part_seqs(path.name)
        if seqs is None:
            continue
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        out.append(FileInfo(path, seqs[0], seqs[1], size, is_rolled(path.name)))
    return sorted(out, key=lambda f: (f.first, f.last, f.path.name))


def plan_roll(files: Sequence[FileInfo], policy: RollPolicy, fresh_age_s: float | None,
              mergeable: Callable[[FileInfo], bool] = lambda f: True) -> list[FileInfo]:
    """The files a roll should merge now (empty: not due, or nothing worth merging).

    Due when ``roll_files`` flush files are waiting or the oldest is ``roll_s`` old. The roll
    takes every flush file, and also the merged files under half the target once there are
    ``roll_files`` of those, so merged files grow toward the target and the count stays
    bounded (under ``2 x roll_files`` plus the full-size files).
    """
    if policy.roll_files == 0:
        return []
    usable = [f for f in files if mergeable(f)]
    fresh = [f for f in usable if not f.rolled]
    due = len(fresh) >= policy.roll_files or (
        policy.roll_s is not None and fresh_age_s is not None and fresh_age_s >= policy.roll_s)
    if not due:
        return []
    small = [f for f in usable if f.rolled and f.size < policy.target_bytes // 2]
    chosen = fresh + (small if len(small) + 1 >= policy.roll_files else [])
    chosen.sort(key=lambda f: (f.first, f.last, f.path.name))
    return chosen if len(chosen) >= 2 else []


def plan_groups(files: Sequence[FileInfo], target_bytes: int) -> list[list[FileInfo]]:
    """``files`` (in order) cut into runs of at most ``target_bytes`` each, to merge one per
    output file; a file at or over the target, and a group of one, is left as it is."""
    groups: list[list[FileInfo]] = []
    current: list[FileInfo] = []
    size = 0
    for f in files:
        if f.size >= target_bytes:
            groups.append(current)
            current, size = [], 0
            continue
        if current and size + f.size > target_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(f)
        size += f.size
    groups.append(current)
    return [g for g in groups if len(g) >= 2]


def has_candidate_schema(path: Path) -> bool:
    """Whether ``path`` holds exactly this version's columns (older or newer files are kept
    as they are rather than merged into a file of a different schema)."""
    try:
        return bool(pq.read_schema(path).equals(CANDIDATE_SCHEMA, check_metadata=False))
    except (OSError, pa.ArrowException):
        return False


def write_merged(group: Sequence[FileInfo], out_dir: Path) -> Path:
    """One file in ``out_dir`` holding ``group``'s rows in order, fsynced; returns its path.

    Streamed a row group at a time: memory stays at about one row group however large the
    inputs (a whole-file read of a large rolled file would grow the writer's memory with the
    run).
    """
    target = out_dir / part_name(group[0].first, max(f.last for f in group))
    pending: list[pa.RecordBatch] = []
    rows = 0
    with open(target, "wb") as fh:
        with pq.ParquetWriter(fh, CANDIDATE_SCHEMA, compression="zstd") as writer:
            for f in group:
                source = pq.ParquetFile(f.path)  # no partition discovery
                for batch in source.iter_batches(batch_size=ROW_GROUP_ROWS):
                    pending.append(batch)
                    rows += batch.num_rows
                    if rows >= ROW_GROUP_ROWS:
                        writer.write_table(pa.Table.from_batches(pending, CANDIDATE_SCHEMA),
                                           row_group_size=ROW_GROUP_ROWS)
                        pending, rows = [], 0
                source.close()
            if pending:
                writer.write_table(pa.Table.from_batches(pending, CANDIDATE_SCHEMA),
                                   row_group_size=ROW_GROUP_ROWS)
        fh.flush()
        os.fsync(fh.fileno())
    return target


_libc: ctypes.CDLL | None = None


def exchange_dirs(a: Path, b: Path) -> None:
    """Swap the names ``a`` and ``b`` in one atomic step (Linux ``renameat2``).

    ``SwapUnsupported`` when this system or file system cannot; other ``OSError`` as raised.
    """
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = _libc.renameat2
    except (OSError, AttributeError) as exc:
        raise SwapUnsupported(errno.ENOSYS, f"renameat2 is not available here ({exc})") from None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        if code in _NO_EXCHANGE:
            raise SwapUnsupported(code, f"cannot exchange {a} and {b}: {os.strerror(code)}")
        raise OSError(code, os.strerror(code), str(b))


def swap_in(directory: Path, stage: Path, replaced: set[str]) -> None:
    """Make ``directory`` hold ``stage``'s merged files plus its own files not in ``replaced``,
    in one step; afterwards ``stage`` holds the old state (the caller deletes it).

    Runs under the writer's lock (no flush may add a file meanwhile). ``SwapUnsupported``
    when a hard link or the exchange is not possible here (nothing has changed then).
    """
    for entry in os.scandir(directory):
        if entry.name in replaced:
            continue
        if not entry.is_file(follow_symlinks=False):
            raise SwapUnsupported(errno.EISDIR, f"{directory} holds {entry.name!r}, which is "
                                  "not a plain file; it cannot be carried into the new state")
        if entry.name.endswith(".tmp"):  # a killed writer's temporary: never read, drop it
            continue
        try:
            os.link(entry.path, stage / entry.name)
        except OSError as exc:
            if exc.errno in _NO_EXCHANGE or exc.errno == errno.EMLINK:
                raise SwapUnsupported(exc.errno or 0, f"cannot hard-link into {stage}: {exc}") \
                    from None
            raise
    fsync_dir(stage)
    exchange_dirs(stage, directory)
    fsync_dir(directory.parent)


def move_in(directory: Path, merged: Sequence[Path], replaced: Sequence[Path]) -> None:
    """The fallback without an atomic exchange: move the merged files in, then delete the
    inputs (a reader listing in between counts their rows twice)."""
    for path in merged:
        os.replace(path, directory / path.name)
    fsync_dir(directory)
    for path in replaced:
        path.unlink(missing_ok=True)
    fsync_dir(directory)


def new_stage(staging_root: Path) -> Path:
    """A fresh, empty staging directory under ``staging_root``."""
    stage = staging_root / uuid.uuid4().hex
    stage.mkdir(parents=True)
    return stage


def remove_tree(path: Path) -> None:
    """Delete a staging directory (its files are hard links or merged copies)."""
    shutil.rmtree(path, ignore_errors=True)


def remove_empty(staging: Path) -> None:
    """Remove a run's staging directory and the ``.staging`` folder above it once empty."""
    for path in (staging, staging.parent):
        try:
            path.rmdir()
        except FileNotFoundError:
            continue
        except OSError:  # not empty: another run is rolling
            return
