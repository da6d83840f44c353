"""What a run already has on disk, read in one streaming pass (a writer's start-up).

A writer that starts for a run with files (a resumed run, or a writer actor Ray restarted
mid-run) must know which ids are written, so resent rows are dropped, and its tally of the
rows so far. :func:`scan_run` reads every file of the run batch by batch, so memory stays at
one record batch however big the run: it feeds the ids to a
:class:`~sr_dist.results.dedup.SeenIds` and keeps counts and the best-candidate contenders.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sr_dist.candidate import NMSE_RESOLUTION
from sr_dist.results.dedup import SeenIds
from sr_dist.results.layout import data_files, run_candidate_dirs
from sr_dist.results.schema import OK_STATUS

__all__ = ["RunScan", "scan_run"]

#: Rows per batch read (bounds the scan's memory).
SCAN_BATCH_ROWS = 64 * 1024
#: Best-candidate contenders kept (rows tied on NMSE, the simplest first).
MAX_CONTENDERS = 64


@dataclasses.dataclass(frozen=True)
class RunScan:
    """A run's rows on disk, summed up."""

    rows: int = 0
    by_agent: Mapping[int, int] = dataclasses.field(default_factory=dict)
    by_status: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: The ``ok`` rows with the lowest NMSE (clamped at the resolution, so ties are kept),
    #: among the dimensionally consistent or unchecked rows and among the inconsistent ones:
    #: the best candidate is one of them (``RunTally`` picks it by its rank).
    contenders: tuple[Mapping[str, Any], ...] = ()


def _ranked(batch: pa.RecordBatch) -> pa.Array:
    """The NMSE rows are ranked by: validation, else training, clamped at the resolution;
    null where neither is finite (as :func:`sr_dist.candidate.record_fitness`)."""
    def finite(name: str) -> pa.Array:
        col = batch.column(name)
        return pc.if_else(pc.is_finite(col), col, pa.scalar(None, col.type))

    value = pc.coalesce(finite("val_nmse"), finite("train_nmse"))
    return pc.max_element_wise(value, pa.scalar(NMSE_RESOLUTION))


def scan_run(root: str | os.PathLike[str], run_id: str, seen: SeenIds | None = None) -> RunScan:
    """Sum up ``run_id``'s rows under ``root`` (every dataset directory of the run); each
    ``candidate_id`` is added to ``seen`` when given."""
    rows = 0
    by_agent: Counter[int] = Counter()
    by_status: Counter[str] = Counter()
    # Contenders per class: [0] consistent or unchecked rows, [1] dimensionally inconsistent
    # ones (which rank after every other row, so the best of each class is kept).
    classes = [_Contenders(), _Contenders()]
    for directory in run_candidate_dirs(root, run_id):
        for path in data_files(directory):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=SCAN_BATCH_ROWS):
                rows += batch.num_rows
                names = batch.schema.names
                if seen is not None:
                    for cid in batch.column("candidate_id").to_pylist():
                        seen.add(str(cid))
                if "agent_id" in names:
                    for item in pc.value_counts(batch.column("agent_id")).to_pylist():
                        by_agent[int(item["values"])] += int(item["counts"])
                if "status" not in names:
                    continue
                for item in pc.value_counts(batch.column("status")).to_pylist():
                    by_status[str(item["values"])] += int(item["counts"])
                if "val_nmse" not in names or "train_nmse" not in names:
                    continue
                ranked = _ranked(batch)
                ok = pc.and_(pc.equal(batch.column("status"), OK_STATUS), pc.is_valid(ranked))
                if "dimensionally_consistent" in names:
                    off = pc.fill_null(pc.equal(batch.column("dimensionally_consistent"), False),
                                       False)
                else:
                    off = pa.array([False] * batch.num_rows, pa.bool_())
                classes[0].consider(batch, ranked, pc.and_(ok, pc.invert(off)))
                classes[1].consider(batch, ranked, pc.and_(ok, off))
    return RunScan(rows=rows, by_agent=dict(sorted(by_agent.items())),
                   by_status=dict(sorted(by_status.items())),
                   contenders=(*classes[0].rows, *classes[1].rows))


class _Contenders:
    """The rows tied at the lowest ranked NMSE seen so far (the simplest first, bounded)."""

    def __init__(self) -> None:
        self.best: float | None = None
        self.rows: list[dict[str, Any]] = []

    def consider(self, batch: pa.RecordBatch, ranked: pa.Array, usable: pa.Array) -> None:
        ranked = pc.if_else(usable, ranked, pa.scalar(None, ranked.type))
        low = pc.min(ranked).as_py()
        if low is None or (self.best is not None and low > self.best):
            return
        chosen = _simplest(batch.filter(pc.fill_null(pc.equal(ranked, low), False)))
        if self.best is None or low < self.best:
            self.best, self.rows = low, chosen
        else:
            self.rows = _simplest_rows([*self.rows, *chosen])


def _rank_rest(row: Mapping[str, Any]) -> tuple[int, str]:
    """The rest of :func:`sr_dist.candidate.rank_key` after the NMSE: complexity, then text."""
    return int(row.get("complexity") or 0), str(row.get("canonical") or row.get("expression"))


def _simplest_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of rows tied on NMSE, the ones the rank would pick first (bounded: a run of many equal
    fits, say a constant target, must not turn the scan into a copy of the run)."""
    return sorted(rows, key=_rank_rest)[:MAX_CONTENDERS]


def _simplest(tied: pa.RecordBatch) -> list[dict[str, Any]]:
    if tied.num_rows > MAX_CONTENDERS and "complexity" in tied.schema.names:
        complexity = pc.fill_null(tied.column("complexity"), 0)
        tied = tied.filter(pc.equal(complexity, pc.min(complexity)))
    if tied.num_rows > MAX_CONTENDERS and {"canonical", "expression"} <= set(tied.schema.names):
        # then the text (code point order, as Python compares), by arrow
        order = pc.sort_indices(pc.coalesce(tied.column("canonical"), tied.column("expression")))
        tied = tied.take(order[:MAX_CONTENDERS])
    return _simplest_rows(tied.to_pylist())
