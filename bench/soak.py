"""A long run: one sr-dist search of at least a million candidate rows, its memory and its files.

One ``run_search`` in this process, on a local Ray cluster this script starts (or the one this
process is already connected to), with ``model=scripted`` agents: every turn each agent sends
``--calls-per-turn`` ``evaluate_formulas`` calls of ``--formulas`` formulas drawn (seeded) from
a fixed pool of ``--structures`` structures, on a small dataset (``--problem``, ``--rows``
rows), so after the pool's first fits nearly every formula is an evaluator cache hit while
every proposal is still a real candidate row through the real pipeline (agent loop → tool →
evaluator pool → recorder → result writer actor → Parquet). The run stops at
``search.max_candidates`` = ``--candidates`` plus :data:`OVERRUN` of it (at least
:data:`MIN_OVERRUN`), so the 100% point is
measured while every process is still up (a run that stops at the target shuts its actors down
within a fraction of a second, before the monitor's next poll).

A monitor thread polls the writer's progress and, when the candidates it has accepted pass
10%, 50% and 100% of the target, prints a row: candidates accepted by the writer, rows on disk
(a DuckDB count of the run's Parquet files), Parquet files, bytes, and the resident memory of
this process (the driver), of the writer actor, of each evaluator replica and of the largest
agent actor (actor pids from Ray's actor table, by the names ``sr-dist:<run_id>:writer``,
``...:evaluator[-i]``, ``...:agent-<i>``). After the run: rows sent by the agents against rows
the writer wrote, a DuckDB count (and distinct ``candidate_id`` count) over the raw
``read_parquet('<root>/candidates/**/*.parquet', hive_partitioning=true)`` glob after the
writer has closed (and compacted, where this sr-dist compacts), the files and bytes left, and
the ratio of each process's memory at 100% to 10%: memory is meant to stay flat.

The ``results.roll_files``, ``results.roll_s``, ``results.target_file_mb`` and
``results.compact`` options are passed only where this sr-dist's results config has them.

Usage:
    .venv/bin/python bench/soak.py                               # 1,000,000 candidates
    .venv/bin/python bench/soak.py --candidates 50000 --json out.json

Run it where Ray may bind 127.0.0.1 (``unshare --net`` then ``ip link set lo up``, as root).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hydra import compose, initialize_config_module  # noqa: E402

from sr_dist.conf.schema import ResultsConfig  # noqa: E402
from sr_dist.results.layout import run_candidate_dirs  # noqa: E402
from sr_dist.search import run_search  # noqa: E402
from sr_dist.search.ray_setup import writer_actor_name  # noqa: E402

#: Fractions of the target at which a row is taken.
CHECKPOINTS: tuple[float, ...] = (0.1, 0.5, 1.0)
#: How far past ``--candidates`` the run goes, so its last checkpoint finds it running: a share
#: of the target, and at least a few turns of the agents (5% of a tiny soak was less than one
#: turn of 256 formulas, and under load the run ended before the monitor's next poll).
OVERRUN = 0.05
MIN_OVERRUN = 1024
#: Results options passed only when this sr-dist's results config has them (issue 14).
ROLL_OPTIONS: tuple[str, ...] = ("roll_files", "roll_s", "target_file_mb", "compact")
#: A process whose memory at 100% is more than this times its memory at 10% "grows".
FLAT_RATIO = 1.25

# --------------------------------------------------------------------------- measurements


def rss_mib(pid: int | None) -> float | None:
    """Resident memory of ``pid`` in MiB (``None``: no such process)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def actor_pids(run_id: str) -> dict[str, int]:
    """Live actors of ``run_id`` by Ray name → pid, from the GCS actor table (Ray's state API
    needs the dashboard, which a local soak cluster does not start)."""
    import ray

    prefix = f"sr-dist:{run_id}:"
    out: dict[str, int] = {}
    with contextlib.suppress(Exception):
        for info in ray._private.state.actors().values():
            name, pid = info.get("Name") or "", info.get("Pid")
            if name.startswith(prefix) and info.get("State") == "ALIVE" and pid:
                out[name[len(prefix):]] = int(pid)
    return out


def parquet_files(root: Path, run_id: str) -> list[Path]:
    """The run's visible Parquet files (temporaries, hidden and ``_`` names left out)."""
    files: list[Path] = []
    for directory in run_candidate_dirs(root, run_id):
        for here, dirs, names in os.walk(directory):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
            files += [Path(here) / n for n in names
                      if n.endswith(".parquet") and not n.startswith((".", "_"))]
    return files


def disk(root: Path, run_id: str) -> tuple[int, int]:
    """(files, bytes) of the run's Parquet files; a file compacted away meanwhile is skipped."""
    count = size = 0
    for path in parquet_files(root, run_id):
        with contextlib.suppress(FileNotFoundError):
            size += path.stat().st_size
            count += 1
    return count, size


#: The DuckDB count, run in a child process so that DuckDB's own memory never shows up in the
#: driver's resident memory the table reports.
_COUNT_SCRIPT = """
import sys, duckdb
glob, run_id = sys.argv[1], sys.argv[2]
sql = ("SELECT count(*), count(DISTINCT candidate_id) FROM read_parquet(?, "
       "hive_partitioning=true) WHERE run_id = ?")
with duckdb.connect() as con:
    rows, distinct = con.execute(sql, [glob, run_id]).fetchone()
print(rows, distinct)
"""


def duckdb_count(root: Path, run_id: str, attempts: int = 3) -> tuple[int, int]:
    """(rows, distinct candidate ids) of the run, read with DuckDB over the raw
    ``<root>/candidates/**/*.parquet`` glob as a user would (in a child process); retried when
    a file is replaced while it is read (rolling, compaction)."""
    if not parquet_files(root, run_id):
        return 0, 0
    glob = str(root / "candidates" / "**" / "*.parquet")
    for attempt in range(attempts):
        done = subprocess.run([sys.executable, "-c", _COUNT_SCRIPT, glob, run_id],
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode == 0:
            rows, distinct = done.stdout.split()
            return int(rows), int(distinct)
        if attempt == attempts - 1:
            raise RuntimeError(f"the DuckDB count failed: {done.stderr.strip()[-500:]}")
        time.sleep(0.2)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Point:
    """One row of the table: the run at a checkpoint."""

    label: str
    elapsed_s: float
    candidates: int
    on_disk: int
    files: int
    bytes: int
    driver_mib: float | None
    writer_mib: float | None
    evaluator_mib: tuple[float | None, ...]
    agent_max_mib: float | None
    agent_processes: int
    #: Candidates per second since the previous point (the first: since the first rows).
    rows_per_s: float


def measure_point(label: str, started: float, candidates: int, root: Path, run_id: str,
                  since: tuple[float, int]) -> Point:
    """Everything a row shows, read now (memory first, before anything is read from disk);
    ``since`` is the (time, candidates) the rate counts from."""
    now = time.monotonic()
    rate = (candidates - since[1]) / (now - since[0]) if now > since[0] else 0.0
    pids = actor_pids(run_id)
    evaluators = sorted(name for name in pids if name.startswith("evaluator"))
    agents = [rss_mib(pid) for name, pid in pids.items() if name.startswith("agent-")]
    agent_sizes = [a for a in agents if a is not None]
    driver, writer = rss_mib(os.getpid()), rss_mib(pids.get("writer"))
    evaluator = tuple(rss_mib(pids[name]) for name in evaluators)
    files, size = disk(root, run_id)
    on_disk, _ = duckdb_count(root, run_id)
    return Point(
        label=label, elapsed_s=round(now - started, 1), candidates=candidates,
        on_disk=on_disk, files=files, bytes=size, driver_mib=driver, writer_mib=writer,
        evaluator_mib=evaluator, agent_max_mib=max(agent_sizes) if agent_sizes else None,
        agent_processes=len(agent_sizes), rows_per_s=round(rate, 1),
    )


class Monitor:
    """Polls the writer's progress from a thread and takes a :class:`Point` at each checkpoint
    (candidates accepted by the writer ≥ the checkpoint's share of ``target``)."""

    def __init__(self, run_id: str, root: Path, target: int, poll_s: float = 0.25,
                 say: Any = print) -> None:
        self.run_id, self.root, self.target, self.poll_s = run_id, root, target, poll_s
        self.say = say
        self.points: list[Point] = []
        self.started = time.monotonic()
        self.missed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-monitor", daemon=True)

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _progress(self, writer: Any) -> int | None:
        import ray

        try:
            return int(ray.get(writer.progress.remote(), timeout=30).candidates)
        except Exception:  # noqa: BLE001 - the writer has closed (the run is ending)
            return None

    def _run(self) -> None:
        import ray

        writer = None
        todo = list(CHECKPOINTS)
        since: tuple[float, int] | None = None
        while todo and not self._stop.wait(self.poll_s):
            if writer is None:
                with contextlib.suppress(Exception):
                    writer = ray.get_actor(writer_actor_name(self.run_id))
                continue
            count = self._progress(writer)
            if count is None:
                break
            if since is None and count > 0:
                since = (time.monotonic(), count)
            while since is not None and todo and count >= todo[0] * self.target:
                share = todo.pop(0)
                taken = time.monotonic()
                point = measure_point(f"{share:.0%}", self.started, count, self.root,
                                      self.run_id, since)
                since = (taken, count)
                self.points.append(point)
                self.say(table([point], header=len(self.points) == 1))
        self.missed = [f"{share:.0%}" for share in todo]


# --------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class Final:
    """How the run ended and what its files hold afterwards."""

    status: str
    stop_reason: str
    search_s: float
    wall_s: float
    rows_sent: int
    rows_written: int
    writer: dict[str, Any]
    duckdb_rows: int
    duckdb_distinct: int
    files: int
    bytes: int
    agents: dict[str, int] = field(default_factory=dict)

    @property
    def counts_match(self) -> bool:
        return self.rows_sent == self.rows_written == self.duckdb_rows == self.duckdb_distinct


def overrides(args: argparse.Namespace, root: Path) -> tuple[list[str], list[str]]:
    """The run's config overrides, and the results options left out because this sr-dist's
    results config does not have them."""
    keys = set(ResultsConfig.config_keys())
    out = [
        f"results.path={root}", f"results.flush_s={args.flush_s}",
        f"dataset.source={args.problem}", f"dataset.n={args.rows}",
        "model=scripted", f"model.formulas_per_call={args.formulas}",
        f"model.calls_per_turn={args.calls_per_turn}", f"model.structures={args.structures}",
        f"search.agents={args.agents}", f"search.agents_per_actor={args.agents_per_actor}",
        f"search.max_candidates={args.candidates + max(MIN_OVERRUN, round(args.candidates * OVERRUN))}", f"search.max_seconds={args.seconds}",
        "search.max_turns=1000000000", "search.target_nmse=null", f"search.seed={args.seed}",
        "search.progress_interval_s=60", "search.stop_grace_s=60",
        f"evaluator.replicas={args.replicas}",
    ]
    skipped = []
    for key in ROLL_OPTIONS:
        value = getattr(args, key)
        if value is None:
            continue
        if key in keys:
            out.append(f"results.{key}={str(value).lower() if isinstance(value, bool) else value}")
        else:
            skipped.append(f"results.{key}")
    return out + list(args.set or []), skipped


def soak(args: argparse.Namespace, root: Path, say: Any = print) -> tuple[list[Point], Final,
                                                                          list[str]]:
    """Run the search, watch it, and count its files afterwards."""
    run_id = f"soak-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    config, skipped = overrides(args, root)
    if skipped:
        say(f"(not in this sr-dist's results config, left out: {', '.join(skipped)})")
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        cfg = compose("config", overrides=config)
    log = io.StringIO()
    started = time.monotonic()
    with Monitor(run_id, root, args.candidates, say=say) as monitor:
        try:
            summary = run_search(cfg, stream=log, run_id=run_id,
                                 handle_signals=threading.current_thread() is threading.main_thread())
        except Exception:
            say(f"the run failed; the end of its log:\n{log.getvalue()[-3000:]}")
            raise
    wall = time.monotonic() - started
    rows, distinct = duckdb_count(root, run_id)
    files, size = disk(root, run_id)
    writer = {k: v for k, v in dict(summary.writer).items() if k != "rejected_examples"}
    reasons: dict[str, int] = {}
    for outcome in summary.agents:
        reasons[outcome.stop_reason] = reasons.get(outcome.stop_reason, 0) + 1
    final = Final(
        status=summary.status, stop_reason=summary.stop_reason,
        search_s=round(summary.search_s, 1), wall_s=round(wall, 1),
        rows_sent=summary.rows_sent, rows_written=int(writer.get("rows_written", 0)),
        writer=writer, duckdb_rows=rows, duckdb_distinct=distinct, files=files, bytes=size,
        agents=reasons,
    )
    missed = monitor.missed
    return monitor.points, final, missed


# --------------------------------------------------------------------------- output


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def table(points: Sequence[Point], header: bool = True) -> str:
    lines = [
        "| at | elapsed s | candidates (writer) | rows on disk (DuckDB) | Parquet files | MiB on disk "
        "| driver RSS MiB | writer RSS MiB | evaluator RSS MiB | agent RSS MiB (max) "
        "| agent processes | rows/s since last |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ] if header else []
    for p in points:
        evaluators = " / ".join(_mib(e) for e in p.evaluator_mib) or "-"
        lines.append(
            f"| {p.label} | {p.elapsed_s:,.1f} | {p.candidates:,} | {p.on_disk:,} | {p.files:,} "
            f"| {p.bytes / 2**20:,.1f} | {_mib(p.driver_mib)} | {_mib(p.writer_mib)} "
            f"| {evaluators} | {_mib(p.agent_max_mib)} | {p.agent_processes} "
            f"| {p.rows_per_s:,.0f} |")
    return "\n".join(lines)


def final_line(final: Final) -> str:
    verdict = "counts match" if final.counts_match else "COUNTS DIFFER"
    return (f"end ({final.status}, {final.stop_reason}, search {final.search_s:,.1f} s, "
            f"{final.rows_sent / final.search_s if final.search_s else 0:,.0f} rows/s): rows sent "
            f"{final.rows_sent:,}, written {final.rows_written:,} in "
            f"{int(final.writer.get('files_written', 0)):,} files; DuckDB over the glob after "
            f"the writer closed: {final.duckdb_rows:,} rows, {final.duckdb_distinct:,} distinct "
            f"candidate ids, in {final.files:,} Parquet files, "
            f"{final.bytes / 2**20:,.1f} MiB: {verdict}")


def ratios(points: Sequence[Point]) -> dict[str, float | None]:
    """Each process's memory at the last point over the first (10%)."""
    first, last = points[0], points[-1]

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(b / a, 3) if a and b else None

    out = {"driver": ratio(first.driver_mib, last.driver_mib),
           "writer": ratio(first.writer_mib, last.writer_mib),
           "agent (max)": ratio(first.agent_max_mib, last.agent_max_mib)}
    for i, (a, b) in enumerate(zip(first.evaluator_mib, last.evaluator_mib)):
        out[f"evaluator {i}"] = ratio(a, b)
    return out


def flat_line(points: Sequence[Point], limit: float = FLAT_RATIO) -> str:
    if len(points) < 2:
        return "memory: fewer than two points measured, no verdict"
    shares = ratios(points)
    shown = ", ".join(f"{k} {'-' if v is None else f'{v:.2f}x'}" for k, v in shares.items())
    grew = [k for k, v in shares.items() if v is not None and v > limit]
    verdict = ("flat" if not grew else "GROWS: " + ", ".join(grew))
    return (f"memory at {points[-1].label} / {points[0].label}: {shown} -> {verdict} "
            f"(limit {limit:.2f}x)")


def build_parser() -> argparse.ArgumentParser:
    """The script's command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=1_000_000, help="target rows")
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--agents-per-actor", type=int, default=1)
    parser.add_argument("--formulas", type=int, default=64, help="formulas per tool call (<= 64)")
    parser.add_argument("--calls-per-turn", type=int, default=16)
    parser.add_argument("--structures", type=int, default=256, help="size of the formula pool")
    parser.add_argument("--problem", default="feynman:I.6.2")
    parser.add_argument("--rows", type=int, default=200, help="dataset rows")
    parser.add_argument("--replicas", type=int, default=1, help="evaluator replicas")
    parser.add_argument("--flush-s", type=float, default=2.0, help="results.flush_s")
    parser.add_argument("--roll-files", dest="roll_files", type=int, default=None,
                        help="results.roll_files (where this sr-dist has it)")
    parser.add_argument("--roll-s", dest="roll_s", type=float, default=None,
                        help="results.roll_s (where this sr-dist has it)")
    parser.add_argument("--target-file-mb", dest="target_file_mb", type=float, default=None,
                        help="results.target_file_mb (where this sr-dist has it)")
    parser.add_argument("--compact", dest="compact", action=argparse.BooleanOptionalAction,
                        default=None, help="results.compact (where this sr-dist has it)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="any other config override (repeatable)")
    parser.add_argument("--seconds", type=float, default=3600, help="search.max_seconds (safety)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpus", type=int, default=None, help="CPUs of the local Ray cluster")
    parser.add_argument("--results", type=Path, default=None,
                        help="results root to keep (default: a temporary one, removed)")
    parser.add_argument("--json", type=Path, help="write the points and the end as JSON here")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.candidates < 1:
        parser.error("--candidates must be positive")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    logging.basicConfig(level=logging.WARNING)

    import ray

    started_ray = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"address": "local", "include_dashboard": False,
                                  "logging_level": logging.ERROR}
        if args.cpus:
            kwargs["num_cpus"] = args.cpus
        ray.init(**kwargs)
        started_ray = True
    root = args.results or Path(tempfile.mkdtemp(prefix="sr-dist-soak-"))
    print(f"soak: {args.candidates:,} candidates, {args.agents} scripted agents "
          f"({args.calls_per_turn} x {args.formulas} formulas a turn, {args.structures} "
          f"structures), {args.problem} with {args.rows} rows, results under {root}", flush=True)
    try:
        points, final, missed = soak(args, root, say=lambda text: print(text, flush=True))
    finally:
        if started_ray:
            ray.shutdown()
        if args.results is None:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(table(points))
    if missed:
        print(f"(not measured: {', '.join(missed)}; the run ended first)")
    print(final_line(final))
    print(flat_line(points))
    if args.json:
        args.json.write_text(json.dumps({
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "points": [asdict(p) for p in points],
            "missed": missed, "final": asdict(final) | {"counts_match": final.counts_match},
            "memory_ratio": ratios(points) if len(points) >= 2 else {},
        }, indent=2))
    return 0 if final.counts_match else 1


if __name__ == "__main__":
    raise SystemExit(main())
