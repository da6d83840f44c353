"""Where results files live, and how one is written atomically.

Layout under a results root::

    candidates/dataset=<q(dataset)>/run_id=<q(run_id)>/part-<seq>-<uuid>.parquet
    candidates/dataset=<q(dataset)>/run_id=<q(run_id)>/part-<first>-to-<last>-<uuid>.parquet
    runs/run_id=<q(run_id)>/run.parquet
    .staging/run_id=<q(run_id)>/<uuid>/      (the writer's work space while it rolls files)

A flush writes ``part-<seq>-...``; rolling merges flushes ``first`` to ``last`` into one
``part-<first>-to-<last>-...`` (see :mod:`sr_dist.results.rolling_files`), so the highest
number on disk is still the next flush's base.

``q`` is URL quoting with no safe characters (``feynman:I.6.2`` → ``feynman%3AI.6.2``), and
the first character is also encoded where DuckDB could take the value for a number or a date
(``2024-01-01`` → ``%32024-01-01``). Both
pyarrow's hive partitioning and DuckDB's ``hive_partitioning=true`` URL-decode partition values,
and both let the directory value win over the same-named column inside the file, so the full
value also stored in the file reads back unchanged either way.

A file is first written under a hidden temporary name ``.<uuid>.parquet.tmp`` in its final
directory (pyarrow skips names starting with ``.``; DuckDB's ``*.parquet`` glob does not match the
``.tmp`` suffix) and then renamed over its final name with ``os.replace``, so readers see either
no file or a whole one.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import uuid
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

CANDIDATES_DIR = "candidates"
RUNS_DIR = "runs"
RUN_FILE = "run.parquet"

#: The null marker of hive partitioning: a value that would read back as null.
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
#: Longest quoted value that, with its ``key=`` prefix, stays under the usual 255-byte name limit.
MAX_PARTITION_VALUE_BYTES = 240

STAGING_DIR = ".staging"

_PART_RE = re.compile(r"^part-(\d+)(?:-to-(\d+))?-[0-9a-f]+\.parquet$")


def _may_autocast(value: str) -> bool:
    """Whether DuckDB's hive type detection might read ``value`` as a non-string.

    DuckDB guesses partition types from the raw directory text: ``0`` becomes an integer,
    ``2024-01-01`` and even ``inf`` a date. Its guesses need a leading digit, sign or dot, or a
    bare word (``inf``, ``infinity``, ``epoch``...); percent-encoding the first character of
    such values makes the raw text unparseable while both readers still decode it.
    """
    first = value[0]
    return not (first.isascii() and first.isalpha()) or (value.isascii() and value.isalpha())


def partition_value(value: str, what: str = "value") -> str:
    """``value`` quoted for a ``key=value`` directory name; ``ValueError`` when it cannot be."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    if value == _HIVE_NULL:
        raise ValueError(f"{what} {value!r} is reserved by hive partitioning (it reads as null)")
    quoted = quote(value, safe="")
    if _may_autocast(value):
        first = value[0]
        quoted = "".join(f"%{b:02X}" for b in first.encode()) + quote(value[1:], safe="")
    if len(quoted.encode()) > MAX_PARTITION_VALUE_BYTES:
        raise ValueError(
            f"{what} is too long for a partition directory ({len(quoted.encode())} bytes "
            f"quoted, at most {MAX_PARTITION_VALUE_BYTES}); use a shorter name: {value[:60]!r}..."
        )
    return quoted


def candidates_dir(root: str | os.PathLike[str], dataset: str, run_id: str) -> Path:
    """The directory holding one run's candidate files."""
    return (
        Path(root)
        / CANDIDATES_DIR
        / f"dataset={partition_value(dataset, 'dataset')}"
        / f"run_id={partition_value(run_id, 'run_id')}"
    )


def run_candidate_dirs(root: str | os.PathLike[str], run_id: str) -> list[Path]:
    """Every candidates directory of ``run_id`` (one per dataset it wrote under)."""
    name = f"run_id={partition_value(run_id, 'run_id')}"
    base = Path(root) / CANDIDATES_DIR
    if not base.is_dir():
        return []
    return sorted(d / name for d in base.iterdir() if (d / name).is_dir())


def run_file(root: str | os.PathLike[str], run_id: str) -> Path:
    """The one file holding ``run_id``'s ``runs`` row."""
    return Path(root) / RUNS_DIR / f"run_id={partition_value(run_id, 'run_id')}" / RUN_FILE


def data_files(directory: Path) -> list[Path]:
    """The visible Parquet files directly in ``directory`` (temporaries excluded)."""
    if not directory.is_dir():
        return []
    return sorted(
        p for p in directory.iterdir()
        if p.suffix == ".parquet" and not p.name.startswith((".", "_")) and p.is_file()
    )


def part_seqs(name: str) -> tuple[int, int] | None:
    """``(first, last)`` flush numbers a candidate file holds (equal for one flush's file),
    or ``None`` for a name sr-dist did not make."""
    m = _PART_RE.match(name)
    if m is None:
        return None
    first = int(m.group(1))
    return first, int(m.group(2)) if m.group(2) is not None else first


def is_rolled(name: str) -> bool:
    """Whether ``name`` is a merged (rolled or compacted) file rather than one flush's."""
    m = _PART_RE.match(name)
    return m is not None and m.group(2) is not None


def next_part_seq(directory: Path) -> int:
    """One more than the highest flush number in ``directory``'s file names (0 if none)."""
    seqs = [s[1] for p in data_files(directory) if (s := part_seqs(p.name)) is not None]
    return max(seqs, default=-1) + 1


def part_name(seq: int, last: int | None = None) -> str:
    """A new candidate file name (``last``: a merged file holding flushes ``seq`` to
    ``last``); the uuid keeps two writers of one run from colliding."""
    span = f"{seq:06d}" if last is None else f"{seq:06d}-to-{last:06d}"
    return f"part-{span}-{uuid.uuid4().hex[:12]}.parquet"


def staging_dir(root: str | os.PathLike[str], run_id: str) -> Path:
    """Where a run's writer builds a directory's next state (outside ``candidates/``, on the
    same file system, so no reader's glob sees it and hard links work)."""
    return Path(root) / STAGING_DIR / f"run_id={partition_value(run_id, 'run_id')}"


def write_atomic(table: pa.Table, target: Path) -> None:
    """Write ``table`` to ``target`` so that readers never see a partial file.

    The data is fsynced before the rename and the directory after it (so a returned call is
    durable); on any failure the temporary file is removed and the exception propagates with
    ``target`` untouched.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{uuid.uuid4().hex}.parquet.tmp"
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def fsync_dir(directory: Path) -> None:
    """Make renames in ``directory`` durable (the new names survive a power cut).

    Never raises: it runs after a rename has already made the file visible, and a caller that
    took a failure here for a failed write would write the same rows again. A directory that
    cannot be opened or fsynced (Windows, some network file systems) is logged and skipped.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        log.debug("results: cannot open %s to fsync it: %s", directory, exc)
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            log.warning("results: fsync of directory %s failed: %s", directory, exc)
    finally:
        os.close(fd)
