"""``sr-dist-query PATH``: print a results root's runs, one run's Pareto front, or any SQL.

    sr-dist-query results                       # the runs
    sr-dist-query results --run RUN_ID          # that run's Pareto front (complexity vs val NMSE,
                                                # each formula beside its simplified form)
    sr-dist-query results --sql "SELECT ..."    # DuckDB SQL over views `candidates` and `runs`
    sr-dist-query results --score               # LLM-SRBench metrics of every run's best formula
    sr-dist-query results --score RUN_ID --tau 0.1 0.01 --split test
    sr-dist-query results --plot pareto|fit|progress --out FILE.png [--run ID] [--index N]

``--format table|csv|json`` picks the output; ``--limit N`` caps the rows. Every failure (no
results, unknown run, bad SQL) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, TextIO

import duckdb
import pyarrow as pa

from sr_dist.results.query import PARETO_METRICS, ResultsNotFound, duckdb_connection, pareto_front
from sr_dist.results.selection import SELECTION_RULES

PROG = "sr-dist-query"

RUN_COLUMNS: tuple[str, ...] = (
    "run_id", "status", "stop_reason", "dataset", "model", "agents", "started_at", "ended_at",
    "candidates", "best_val_nmse", "best_test_nmse", "best_complexity", "best_expression",
)
FRONT_COLUMNS: tuple[str, ...] = (
    "complexity", "train_nmse", "val_nmse", "test_nmse", "r2", "expression", "simplified",
    "constants", "agent_id", "step", "candidate_id",
)
SCORE_COLUMNS: tuple[str, ...] = (
    "run_id", "dataset", "split", "n", "nmse", "r2", "expression", "constants", "candidate_id",
)
#: Longest cell in table format; csv and json are never truncated.
MAX_CELL = 80


class QueryError(Exception):
    """A user-facing failure: printed as one line, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Query sr-dist results (Parquet under results.path) with DuckDB.",
    )
    parser.add_argument("path", help="results root (the run's results.path)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--run", metavar="ID", help="print the Pareto front of this run")
    what.add_argument("--sql", metavar="SQL",
                      help="run DuckDB SQL over the views `candidates` and `runs`")
    what.add_argument("--score", metavar="ID", nargs="*",
                      help="NMSE, R² and Acc_τ (and its worst-5%% variant) of the best "
                           "candidate of these runs (default: every run) on a split of the "
                           "run's dataset, rebuilt from its config")
    parser.add_argument("--split", choices=("train", "val", "test"), default="test",
                        help="split that --score predicts (default: test)")
    parser.add_argument("--tau", type=float, nargs="+", metavar="TAU", default=None,
                        help="tolerances of Acc_τ for --score (default: 0.1)")
    parser.add_argument("--select", choices=SELECTION_RULES, default="best",
                        help="which candidate --score takes: best = lowest validation NMSE "
                             "(default); parsimony = PySR-style pick that resists overfitting "
                             "noise")
    parser.add_argument("--metric", choices=PARETO_METRICS, default="val_nmse",
                        help="error axis of the Pareto front (default: val_nmse)")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table",
                        help="output format (default: table)")
    parser.add_argument("--limit", type=int, metavar="N", help="print at most N rows")
    plot = parser.add_argument_group("plots (the optional `plot` extra: matplotlib)")
    plot.add_argument("--plot", metavar="KIND",
                      help="draw pareto, fit or progress of --run (default: the latest run) "
                           "into --out (docs/plots.md)")
    plot.add_argument("--out", metavar="FILE", help="the image --plot writes (.png, .svg, .pdf)")
    plot.add_argument("--index", type=int, metavar="N",
                      help="the front formula (0 = simplest) --plot fit draws (default: the "
                           "one --select picks)")
    return parser


def _plot(args: argparse.Namespace) -> int:
    """``--plot``: one picture of one run, through sr_dist.viz (matplotlib loads only here)."""
    if args.sql is not None or args.score is not None:
        raise QueryError("--plot draws one run: use it with --run ID (or no --run for the "
                         "latest), not with --sql or --score")
    from sr_dist.viz import PLOT_KINDS, VizError, load_run, save_plot

    if args.plot not in PLOT_KINDS:
        raise QueryError(f"unknown --plot kind {args.plot!r}: choose one of "
                         f"{', '.join(PLOT_KINDS)}")
    if not args.out:
        raise QueryError(f"--plot {args.plot} needs --out FILE.png")
    try:
        info = save_plot(args.plot, load_run(args.path, args.run, select=args.select), args.out,
                         index=args.index)
    except VizError as exc:
        raise QueryError(str(exc)) from exc
    print(f"{PROG}: wrote {args.out} ({info.kind})", file=sys.stderr)
    return 0


# --- formatting (pure) -------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    """A JSON-ready value: NaN/inf → null, times → ISO 8601, decimals → float."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return _plain(float(value))
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _cell(value: Any) -> str:
    """A table cell: floats as %.4g, times to the second in UTC, null as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (float, Decimal)):
        number = float(value)
        return f"{number:.4g}" if math.isfinite(number) else str(number)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        stamp: str = value.strftime("%Y-%m-%d %H:%M:%S")
        return stamp
    if isinstance(value, (list, tuple, dict)):
        text = json.dumps(_plain(value))
    else:
        text = str(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Aligned columns; numbers right-aligned, text left-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    numeric = [
        all(isinstance(row[i], (int, float, Decimal)) and not isinstance(row[i], bool)
            for row in rows if row[i] is not None)
        for i in range(len(columns))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "  ".join(parts).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out) + "\n"


def format_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else _csv_value(v) for v in row])
    return buf.getvalue()


def _csv_value(value: Any) -> Any:
    plain = _plain(value)
    if isinstance(plain, (list, dict)):
        return json.dumps(plain)
    return "" if plain is None else plain


def format_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    records = [{c: _plain(v) for c, v in zip(columns, row)} for row in rows]
    return json.dumps(records, indent=2, allow_nan=False) + "\n"


FORMATS = {"table": format_table, "csv": format_csv, "json": format_json}


def _rows(table: pa.Table) -> tuple[list[str], list[tuple[Any, ...]]]:
    columns = table.column_names
    data = [table.column(c).to_pylist() for c in columns]
    return columns, list(zip(*data)) if data else []


# --- commands ----------------------------------------------------------------------------------

def _limit_sql(limit: int | None) -> str:
    return "" if limit is None else f" LIMIT {int(limit)}"


def _runs(con: duckdb.DuckDBPyConnection, limit: int | None) -> pa.Table:
    cols = ", ".join(RUN_COLUMNS)
    table = con.sql(
        f"SELECT {cols} FROM runs ORDER BY started_at, run_id{_limit_sql(limit)}"
    ).to_arrow_table()
    if table.num_rows == 0:
        pending = con.execute(
            "SELECT count(DISTINCT run_id), count(*) FROM candidates"
        ).fetchall()[0]
        if pending and pending[1]:
            print(f"{PROG}: note: no runs rows yet; {pending[1]} candidate(s) in {pending[0]} "
                  "run(s); use --run ID or --sql", file=sys.stderr)
    return table


def _front(con: duckdb.DuckDBPyConnection, run_id: str, metric: str,
           limit: int | None) -> pa.Table:
    known = con.execute(
        "SELECT count(*) FROM (SELECT run_id FROM candidates WHERE run_id = $1 "
        "UNION ALL SELECT run_id FROM runs WHERE run_id = $1)", [run_id]
    ).fetchall()[0]
    if not known or not known[0]:
        runs = [r[0] for r in con.execute(
            "SELECT DISTINCT run_id FROM (SELECT run_id FROM runs UNION SELECT run_id "
            "FROM candidates) ORDER BY 1 LIMIT 6").fetchall()]
        shown = ", ".join(runs[:5]) + (", ..." if len(runs) > 5 else "")
        raise QueryError(f"unknown run id {run_id!r} (known: {shown or 'none'})")
    rows = con.sql(
        "SELECT * FROM candidates WHERE run_id = $1 AND status = 'ok'", params=[run_id]
    ).to_arrow_table()
    stored = [c for c in FRONT_COLUMNS if c != "simplified"]  # computed by _simplified_front
    front = pareto_front(rows, metric=metric).select(stored)
    return front if limit is None else front.slice(0, limit)


def _simplified_front(path: str, run_id: str, front: pa.Table) -> pa.Table:
    """The front with a ``simplified`` column, checked on the run's validation split (the
    dataset rebuilt from the run's config; a note on stderr and an empty column if it cannot
    be)."""
    from sr_dist.results import ScoreError, load_run_dataset, read_run
    from sr_dist.results.simplified import with_simplified

    dataset = None
    if front.num_rows:
        try:
            record = read_run(path, run_id)
            if record is None:
                raise ScoreError(f"run {run_id!r} has no runs row (still starting, or it "
                                 "never wrote one), so its dataset is unknown")
            dataset = load_run_dataset(record, path)
        except ScoreError as exc:
            print(f"{PROG}: note: no simplified forms: {exc}", file=sys.stderr)
    return with_simplified(front, dataset)


def _sql(con: duckdb.DuckDBPyConnection, sql: str, limit: int | None) -> pa.Table | None:
    relation = con.sql(sql)
    if relation is None:
        return None
    if limit is not None:
        relation = relation.limit(limit)
    return relation.to_arrow_table()


def _score(path: str, run_ids: Sequence[str], split: str,
           taus: Sequence[float] | None, select: str = "best") -> pa.Table:
    """One row of metrics per run. Named runs must score; in the every-run listing a run that
    cannot be scored (its CSV moved, no ok candidate) is a note on stderr, not a failure."""
    from sr_dist.results import DEFAULT_TAUS, ScoreError, open_results, score_run

    taus = tuple(taus) if taus else DEFAULT_TAUS
    for tau in taus:
        if not (tau > 0 and math.isfinite(tau)):
            raise QueryError(f"--tau must be positive numbers, got {tau!r}")
    explicit = bool(run_ids)
    if explicit:
        ids = list(dict.fromkeys(run_ids))
    else:
        listed = open_results(path).runs.to_table(columns=["run_id", "started_at"])
        ids = list(dict.fromkeys(r["run_id"] for r in sorted(
            listed.to_pylist(), key=lambda r: (r["started_at"], r["run_id"]))))
    records: list[dict[str, Any]] = []
    for run_id in ids:
        try:
            score = score_run(path, run_id, split=split, taus=taus, select=select)
        except ScoreError as exc:
            if explicit:
                raise QueryError(str(exc)) from exc
            print(f"{PROG}: note: run {run_id} not scored: {exc}", file=sys.stderr)
            continue
        row = score.as_dict()
        row["constants"] = json.dumps(_plain(row["constants"]))
        records.append(row)
    if not records:
        if not explicit and not ids:
            raise QueryError(f"no runs under {path}")
        return pa.table({c: pa.array([], pa.string()) for c in SCORE_COLUMNS})
    names = list(SCORE_COLUMNS) + [k for k in records[0] if k not in SCORE_COLUMNS]
    return pa.table({n: [r.get(n) for r in records] for n in names})


def run(argv: Sequence[str] | None, out: TextIO) -> int:
    """Parse ``argv``, run the query, write to ``out``; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.limit is not None and args.limit < 0:
        raise QueryError(f"--limit must be at least 0, got {args.limit}")
    if args.plot is not None:
        return _plot(args)
    if args.out is not None or args.index is not None:
        raise QueryError("--out and --index go with --plot KIND")
    if args.score is not None:
        table = _score(args.path, args.score, args.split, args.tau, args.select)
        if args.limit is not None:
            table = table.slice(0, args.limit)
        columns, rows = _rows(table)
        out.write(FORMATS[args.format](columns, rows))
        out.flush()
        return 0
    con = duckdb_connection(args.path)
    try:
        if args.sql is not None:
            table = _sql(con, args.sql, args.limit)
            if table is None:
                return 0
        elif args.run is not None:
            table = _simplified_front(args.path, args.run,
                                      _front(con, args.run, args.metric, args.limit))
        else:
            table = _runs(con, args.limit)
    finally:
        con.close()
    columns, rows = _rows(table)
    out.write(FORMATS[args.format](columns, rows))
    out.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; never shows a traceback for a user error."""
    try:
        return run(argv, sys.stdout)
    except (QueryError, ResultsNotFound) as exc:
        message = str(exc)
    except duckdb.Error as exc:
        message = "SQL error: " + " ".join(str(exc).split())
    except BrokenPipeError:
        # The reader (e.g. `head`) went away: not an error of ours. Point stdout at devnull so
        # the interpreter's final flush does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (OSError, pa.ArrowException, ValueError) as exc:
        message = f"{type(exc).__name__}: " + " ".join(str(exc).split())
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
