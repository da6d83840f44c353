"""Reading results back: pyarrow datasets, the Pareto front, DuckDB views.

Readers need no help from sr-dist: ``pyarrow.dataset`` with hive partitioning or DuckDB's
``read_parquet('<root>/candidates/**/*.parquet', hive_partitioning=true)`` both yield exactly
``CANDIDATE_SCHEMA``. The helpers here add the explicit schemas, the empty cases, and the
``runs`` rule (one row per run; if stray copies ever exist, the latest ``updated_at`` wins).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from sr_dist.candidate import NMSE_RESOLUTION
from sr_dist.candidate import pareto_front as front_of
from sr_dist.results.layout import (
    CANDIDATES_DIR,
    RUNS_DIR,
    data_files,
    run_candidate_dirs,
    run_file,
)
from sr_dist.results.schema import CANDIDATE_SCHEMA, OK_STATUS, RUNS_SCHEMA, RunRecord

T = TypeVar("T")

#: Metrics a Pareto front can be taken over: the NMSEs, and (schema version 3) the fitting
#: loss and the extra metrics of ``search.metrics``.
PARETO_METRICS: tuple[str, ...] = ("train_nmse", "val_nmse", "test_nmse", "train_loss",
                                   "val_loss", "mae", "aic", "bic", "r2", "pearson_r",
                                   "spearman_r")
#: Front metrics where higher is better (compared as ``1 - value``, as ``search.rank_by`` does).
HIGHER_IS_BETTER: frozenset[str] = frozenset({"r2", "pearson_r", "spearman_r"})
#: Front metrics that may be negative (not clamped at the NMSE resolution).
SIGNED_METRICS: frozenset[str] = frozenset({"aic", "bic"})


def metric_loss(metric: str, value: Any) -> float:
    """A front metric's value as a lower-is-better loss (``1 - value`` for higher-is-better
    ones), clamped at the NMSE resolution unless the metric may be negative."""
    number = float(value)
    if metric in HIGHER_IS_BETTER:
        number = 1.0 - number
    return number if metric in SIGNED_METRICS else max(number, NMSE_RESOLUTION)


class ResultsNotFound(FileNotFoundError):
    """No results (no candidate or run files) under a path."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(f"no results under {os.fspath(path)}")


@dataclasses.dataclass(frozen=True)
class Results:
    """The two tables of a results root as pyarrow datasets (a snapshot of the file list)."""

    path: Path
    candidates: ds.Dataset
    runs: ds.Dataset


def _has_parquet(directory: Path) -> bool:
    if not directory.is_dir():
        return False
    for _, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        if any(f.endswith(".parquet") and not f.startswith((".", "_")) for f in files):
            return True
    return False


def _hive(names: Iterable[str]) -> ds.Partitioning:
    return ds.partitioning(pa.schema([pa.field(n, pa.string()) for n in names]), flavor="hive")


def _table_dataset(directory: Path, schema: pa.Schema, partitions: Iterable[str]) -> ds.Dataset:
    if not _has_parquet(directory):
        return ds.InMemoryDataset(schema.empty_table())
    return ds.dataset(directory, schema=schema, format="parquet", partitioning=_hive(partitions))


def open_results(path: str | os.PathLike[str]) -> Results:
    """The ``candidates`` and ``runs`` datasets under ``path``; ``ResultsNotFound`` if neither.

    A table with no files yet is an empty dataset with its schema, so queries still work while
    a run is starting.
    """
    root = Path(path)
    cand_dir, runs_dir = root / CANDIDATES_DIR, root / RUNS_DIR
    if not (_has_parquet(cand_dir) or _has_parquet(runs_dir)):
        raise ResultsNotFound(path)
    return Results(
        path=root,
        candidates=_table_dataset(cand_dir, CANDIDATE_SCHEMA, ("dataset", "run_id")),
        runs=_table_dataset(runs_dir, RUNS_SCHEMA, ("run_id",)),
    )


# --- one run's files (used by writers resuming a run) ------------------------------------------

#: Times a read of one run's files is retried when a file it listed was merged away.
SWAP_RETRIES = 5


def retry_on_swap(read: Callable[[], T], attempts: int = SWAP_RETRIES) -> T:
    """``read()``, listed and read again if a file it listed vanished meanwhile.

    The writer rolls a run's files by swapping in a directory where N files became one
    (:mod:`sr_dist.results.rolling_files`); a reader whose listing predates the swap finds one of
    its files gone and fails (it never reads a wrong count). Listing again sees the new state.
    """
    for attempt in range(attempts):
        try:
            return read()
        except (FileNotFoundError, OSError, pa.ArrowException) as exc:
            gone = isinstance(exc, FileNotFoundError) or "No such file" in str(exc) \
                or "not found" in str(exc).lower()
            if not gone or isinstance(exc, ResultsNotFound) or attempt == attempts - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


def _run_candidates(path: str | os.PathLike[str], run_id: str, columns: list[str]) -> pa.Table:
    def read() -> pa.Table:
        files = [str(f) for d in run_candidate_dirs(path, run_id) for f in data_files(d)]
        if not files:
            return CANDIDATE_SCHEMA.empty_table().select(columns)
        schema = pa.schema([CANDIDATE_SCHEMA.field(c) for c in columns])
        return ds.dataset(files, schema=schema, format="parquet").to_table(columns=columns)

    return retry_on_swap(read)


def existing_candidate_ids(path: str | os.PathLike[str], run_id: str) -> frozenset[str]:
    """The candidate ids of ``run_id`` already on disk (seed for a resumed run's writer)."""
    ids = _run_candidates(path, run_id, ["candidate_id"]).column("candidate_id")
    return frozenset(ids.to_pylist())


def agent_progress(path: str | os.PathLike[str], run_id: str) -> dict[int, int]:
    """The last ``step`` each agent of ``run_id`` wrote; a resumed agent continues after it.

    Candidate ids are ``run:agent:step:index``, so a resumed run must not restart step numbers
    at zero or its new candidates would collide with old ids and be dropped as duplicates.
    """
    table = _run_candidates(path, run_id, ["agent_id", "step"])
    if table.num_rows == 0:
        return {}
    grouped = table.group_by("agent_id").aggregate([("step", "max")])
    return dict(zip(grouped["agent_id"].to_pylist(), grouped["step_max"].to_pylist()))


def read_run(path: str | os.PathLike[str], run_id: str) -> RunRecord | None:
    """``run_id``'s ``runs`` row, or ``None`` if it has none yet."""
    target = run_file(path, run_id)
    if not target.is_file():
        return None
    table = ds.dataset([str(target)], schema=RUNS_SCHEMA, format="parquet").to_table()
    rows = table.to_pylist()
    if not rows:
        return None
    return RunRecord.from_row(max(rows, key=lambda r: r["updated_at"]))


def best_candidate(table: pa.Table, metric: str = "val_nmse") -> dict[str, Any] | None:
    """The ok candidate with the lowest ``metric`` (of ties, the least complex, then earliest).

    That is the last point of the Pareto front, whose metric strictly falls with complexity.
    """
    front = pareto_front(table, metric=metric)
    if front.num_rows == 0:
        return None
    best: dict[str, Any] = front.slice(front.num_rows - 1).to_pylist()[0]
    return best


def summarize_run(path: str | os.PathLike[str], run_id: str,
                  metric: str = "val_nmse") -> tuple[int, dict[str, Any] | None]:
    """``(candidates on disk, best candidate row)`` for ``run_id``, read from its files; the
    best by ``metric`` (the run's ``search.rank_by``, as its agents' archives rank), or by
    ``val_nmse`` when no row has that metric (``val_loss`` without a validation split).

    This is what an interrupted or resumed run needs to fill its ``runs`` row when the
    in-memory tallies are gone.
    """
    table = _run_candidates(path, run_id, CANDIDATE_SCHEMA.names)
    best = best_candidate(table, metric) if metric in table.column_names else None
    if best is None and metric != "val_nmse":
        best = best_candidate(table)
    return table.num_rows, best


# --- Pareto front ------------------------------------------------------------------------------

def _as_table(source: Any, run_id: str | None, metric: str) -> pa.Table:
    wanted = (ds.field("status") == OK_STATUS) & ds.field(metric).is_valid()
    if run_id is not None:
        wanted = wanted & (ds.field("run_id") == run_id)
    if isinstance(source, Results):
        return source.candidates.to_table(filter=wanted)
    if isinstance(source, ds.Dataset):
        return source.to_table(filter=wanted)
    if isinstance(source, pa.Table):
        return ds.InMemoryDataset(source).to_table(filter=wanted)
    if isinstance(source, (str, os.PathLike)):
        return open_results(source).candidates.to_table(filter=wanted)
    raise TypeError(
        f"pareto_front expects a pyarrow Table, Dataset, Results or path, not {type(source).__name__}"
    )


def _admissible(table: pa.Table) -> pa.Table:
    """Without the dimensionally inconsistent rows when a consistent row exists (the rule of
    :func:`sr_dist.candidate.admissible`, on a table)."""
    if "dimensionally_consistent" not in table.column_names:
        return table
    flags = table["dimensionally_consistent"]
    if not pc.any(flags).as_py():
        return table
    return table.filter(pc.invert(pc.fill_null(pc.equal(flags, False), False)))


def pareto_front(
    table_or_path: Any, run_id: str | None = None, metric: str = "val_nmse"
) -> pa.Table:
    """The candidates no other candidate beats on both complexity and ``metric``.

    Only ``status == "ok"`` rows with a non-null ``metric`` and complexity take part, and of
    those no dimensionally inconsistent row when a consistent one is among them. The result
    is sorted by complexity (ascending; the metric strictly decreases along it) and has the
    input's columns. Of equal candidates the earliest (``created_at``, then ``candidate_id``)
    is kept, so the front is deterministic.
    """
    if metric not in PARETO_METRICS:
        raise ValueError(f"metric must be one of {PARETO_METRICS}, got {metric!r}")
    table = _as_table(table_or_path, run_id, metric)
    table = table.filter(pc.is_valid(table["complexity"]))
    if table.num_rows == 0:
        return table
    table = _admissible(table)
    keys = [("complexity", "ascending"),
            (metric, "descending" if metric in HIGHER_IS_BETTER else "ascending")]
    keys += [(k, "ascending") for k in ("created_at", "candidate_id") if k in table.column_names]
    table = table.take(pc.sort_indices(table, sort_keys=keys))
    complexities = table["complexity"].to_pylist()
    scores = table[metric].to_pylist()
    # Rows are sorted best-first within a complexity, so input order breaks ties; NMSEs under
    # the resolution are rounding noise and tie (the simplest exact fit wins), as everywhere.
    keep = front_of(
        range(table.num_rows),
        loss=lambda i: metric_loss(metric, scores[i]),
        complexity=lambda i: int(complexities[i]),
    )
    return table.take(pa.array(keep, type=pa.int64()))


# --- DuckDB ------------------------------------------------------------------------------------

_GLOB_CHARS = frozenset("*?[]{}")


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _select_list(schema: pa.Schema, present: Iterable[str] | None = None) -> str:
    """The schema's columns; a column no file has yet (results written by an older version)
    is selected as a typed NULL, so the view has every column either way."""
    have = set(schema.names) if present is None else set(present)
    return ", ".join(
        f'"{field.name}"' if field.name in have
        else f'CAST(NULL AS {_DUCKDB_TYPES.get(str(field.type), "VARCHAR")}) AS "{field.name}"'
        for field in schema)


_DUCKDB_TYPES = {"string": "VARCHAR", "int32": "INTEGER", "int64": "BIGINT", "double": "DOUBLE",
                 "bool": "BOOLEAN"}


def _source(con: duckdb.DuckDBPyConnection, name: str, directory: Path, dataset: ds.Dataset,
            schema: pa.Schema) -> str:
    """A FROM clause for one table: DuckDB's own Parquet reader where it can glob the path."""
    if isinstance(dataset, ds.InMemoryDataset) or _GLOB_CHARS & set(str(directory)):
        # Nothing on disk yet (an empty, typed table) or a path DuckDB would take as a glob.
        con.register(f"_sr_dist_{name}", dataset)
        return f"_sr_dist_{name}"
    glob = _sql_str(str(directory.resolve() / "**" / "*.parquet"))
    return f"read_parquet({glob}, hive_partitioning=true, union_by_name=true)"


def duckdb_connection(path: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with views ``candidates`` and ``runs`` over ``path``.

    The views read the files at query time, so rows flushed later show up; ``runs`` holds one
    row per run (the latest ``updated_at``). ``ResultsNotFound`` if ``path`` holds no results.
    """
    results = open_results(path)
    con = duckdb.connect()
    root = results.path
    cand = _source(con, "candidates", root / CANDIDATES_DIR, results.candidates, CANDIDATE_SCHEMA)
    runs = _source(con, "runs", root / RUNS_DIR, results.runs, RUNS_SCHEMA)
    have = [d[0] for d in con.execute(f"SELECT * FROM {cand} LIMIT 0").description]
    con.execute(f"CREATE VIEW candidates AS SELECT {_select_list(CANDIDATE_SCHEMA, have)} "
                f"FROM {cand}")
    present = [d[0] for d in con.execute(f"SELECT * FROM {runs} LIMIT 0").description]
    con.execute(
        f"CREATE VIEW runs AS SELECT {_select_list(RUNS_SCHEMA, present)} FROM {runs} "
        "QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY updated_at DESC) = 1"
    )
    return con
