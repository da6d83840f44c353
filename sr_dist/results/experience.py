"""The ``experience`` table: per episode and tool, what an agent learned using the tool.

Layout under a results root (next to ``candidates/`` and ``runs/``)::

    experience/run_id=<q(run_id)>/part-<uuid>.parquet

One file per finished episode (written atomically, like every results file), one row per tool
it called, all in :data:`EXPERIENCE_SCHEMA`. :func:`read_experience` reads every run's rows
back, newest last, for the agents that start later (docs/tool-experience.md); DuckDB reads
the same files with ``read_parquet('<root>/experience/*/*.parquet', hive_partitioning=true)``.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sr_dist.results.layout import data_files, partition_value, write_atomic
from sr_dist.results.schema import utc_now

__all__ = ["EXPERIENCE_DIR", "EXPERIENCE_SCHEMA", "experience_dir", "read_experience",
           "write_experience"]

log = logging.getLogger(__name__)

EXPERIENCE_DIR = "experience"

#: One row per (episode, tool): ``failure_kinds`` is JSON text ``{"invalid_tool_call": 2}``;
#: ``lessons`` are short texts starting ``failed:`` or ``helped:``.
EXPERIENCE_SCHEMA = pa.schema([
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("dataset", pa.string()),
    pa.field("model", pa.string()),
    pa.field("agent_id", pa.int32()),
    pa.field("tool", pa.string(), nullable=False),
    pa.field("calls", pa.int32()),
    pa.field("failures", pa.int32()),
    pa.field("improved", pa.int32()),
    pa.field("failure_kinds", pa.string()),
    pa.field("lessons", pa.list_(pa.string())),
    pa.field("written_at", pa.timestamp("us", tz="UTC")),
])


def experience_dir(root: str | os.PathLike[str], run_id: str) -> Path:
    """The directory holding ``run_id``'s experience files."""
    return Path(root) / EXPERIENCE_DIR / f"run_id={partition_value(run_id, 'run_id')}"


def write_experience(root: str | os.PathLike[str], run_id: str, rows: Iterable[Mapping[str, Any]], *,
                     dataset: str = "", model: str = "", agent_id: int = 0) -> Path | None:
    """Write one episode's rows (``ToolExperience.row()`` dicts) as one new file; returns its
    path, or ``None`` when there was nothing to write."""
    now = utc_now()
    table_rows = [{"run_id": run_id, "dataset": dataset, "model": model, "agent_id": int(agent_id),
                   "tool": str(row["tool"]), "calls": int(row.get("calls") or 0),
                   "failures": int(row.get("failures") or 0), "improved": int(row.get("improved") or 0),
                   "failure_kinds": str(row.get("failure_kinds") or "{}"),
                   "lessons": [str(x) for x in row.get("lessons") or ()], "written_at": now}
                  for row in rows]
    if not table_rows:
        return None
    target = experience_dir(root, run_id) / f"part-{uuid.uuid4().hex[:16]}.parquet"
    write_atomic(pa.Table.from_pylist(table_rows, schema=EXPERIENCE_SCHEMA), target)
    return target


def read_experience(root: str | os.PathLike[str], *, limit: int = 5000) -> list[dict[str, Any]]:
    """The latest ``limit`` rows of every run on ``root``, oldest first (empty when there are
    none). A file that cannot be read is skipped with a warning: experience is advice, and a
    damaged file must not stop an agent from starting."""
    base = Path(root) / EXPERIENCE_DIR
    if not base.is_dir():
        return []
    rows: list[dict[str, Any]] = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        for path in data_files(folder):
            try:
                table = pq.read_table(path, schema=EXPERIENCE_SCHEMA)
            except (OSError, pa.ArrowException) as exc:
                log.warning("experience: skipping %s (%s)", path, exc)
                continue
            rows.extend(table.to_pylist())
    rows.sort(key=lambda r: r["written_at"] or utc_now())
    return rows[-limit:]
