"""Where results files live, and how one is written atomically.

Layout under a results root::

    candidates/dataset=<q(dataset)>/run_id=<q(run_id)>/part-<seq>-<uuid>.parquet
    runs/run_id=<q(run_id)>/run.parquet

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

import os
import re
import uuid
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

CANDIDATES_DIR = "candidates"
RUNS_DIR = "runs"
RUN_FILE = "run.parquet"

#: The null marker of hive partitioning: a value that would read back as null.
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
#: Longest quoted value that, with its ``key=`` prefix, stays under the usual 255-byte name limit.
MAX_PARTITION_VALUE_BYTES = 240

_PART_RE = re.compile(r"^part-(\d+)-[0-9a-f]+\.parquet$")


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


def next_part_seq(directory: Path) -> int:
    """One more than the highest ``part-<seq>-...`` number in ``directory`` (0 if none)."""
    seqs = [int(m.group(1)) for p in data_files(directory) if (m := _PART_RE.match(p.name))]
    return max(seqs, default=-1) + 1


def part_name(seq: int) -> str:
    """A new candidate file name; the uuid keeps two writers of one run from colliding."""
    return f"part-{seq:06d}-{uuid.uuid4().hex[:12]}.parquet"


def write_atomic(table: pa.Table, target: Path) -> None:
    """Write ``table`` to ``target`` so that readers never see a partial file.

    The data is fsynced before the rename; on any failure the temporary file is removed and
    the exception propagates with ``target`` untouched.
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
