"""Throughput of a default offline run, as a user sees it, beside pyoperon on the same rows.

For each row count (``--rows``) and evaluator replica count (``--replicas``) the script runs the
``sr-dist`` console script with default settings (``evolve``, 2 agents) for ``--budget`` seconds
on a noisy 4-variable target that no seed shape fits exactly, ``--repeat`` times, and reads the
run back from its Parquet results (DuckDB):

* **distinct ok/s**: distinct canonical forms with status ``ok``, per second of search
  (``search_s``: the agents' start to the stop) and per second of the whole command;
* **busy**: the evaluator's busy seconds over the search seconds (``evaluator_stats``);
* **fits/s busy**: structures fitted per busy second (the evaluator's own rate at that n);
* **compile s**: XLA compile seconds of the run (warm-up and search); with JAX's persistent
  compilation cache warm this is only loading the executables (0.9 s for the warm-up's three
  buckets in one measured run), cold it is several seconds a bucket;
* **overhead s**: the command's wall time beyond its budget (imports, Ray, the actors' start,
  the warm-up, the wrap-up and the report).

``--variant NAME=OVERRIDES`` (repeatable) runs each configuration again with extra Hydra
overrides (space-separated), e.g. ``--variant plain=+model.inherit_constants=false``; the
first variant, ``default`` unless named, is the baseline of the ``× default`` column (distinct
ok/s against the same rows and replicas of the baseline variant, measured in the same process).
pyoperon (``pyoperon.sklearn.SymbolicRegressor``, its defaults, 2 threads, the same training
rows and budget) is measured in the same process too: the ``× pyoperon`` column is sr-dist's
distinct ok/s over pyoperon's evaluations/s (``stats_['evaluation_count']``, which counts every
individual it evaluated, refitted or not, so it is an upper bound on its distinct forms).

Run it inside a network namespace with only loopback, as the tests do (Ray then uses 127.0.0.1)::

    unshare --net bash -c 'ip link set lo up; .venv/bin/python bench/throughput.py'
    .venv/bin/python bench/throughput.py --budget 10 --rows 1000 --replicas 1 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: The target: products, a quotient and a damped term of four variables, 1% Gaussian noise of
#: its RMS. No library shape is this law, so the run is the genetic search's, as on real data.
LAW = "1.3*x0*sin(x1) + x2**2/(1 + x3) + 0.4*x0*exp(-x3)"
NOISE = 0.01


def make_rows(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of :data:`LAW` on ``x_i ~ U(0.5, 3)`` with :data:`NOISE` relative noise."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.5, 3.0, (n, 4))
    y = 1.3 * X[:, 0] * np.sin(X[:, 1]) + X[:, 2] ** 2 / (1 + X[:, 3]) + 0.4 * X[:, 0] * np.exp(-X[:, 3])
    y = y + rng.normal(0.0, NOISE * float(np.sqrt(np.mean(y ** 2))), n)
    return X, y


def write_csv(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    names = [f"x{i}" for i in range(X.shape[1])]
    with path.open("w") as f:
        f.write(",".join(names + ["y"]) + "\n")
        for row, target in zip(X, y):
            f.write(",".join(f"{v:.17g}" for v in row) + f",{target:.17g}\n")


@dataclass(frozen=True)
class Run:
    """One measured ``sr-dist`` command."""

    variant: str
    rows: int
    replicas: int
    attempt: int
    budget_s: float
    wall_s: float
    search_s: float
    candidates: int
    distinct_ok: int
    busy_s: float
    fits: int
    compile_s: float
    compiles: int

    @property
    def overhead_s(self) -> float:
        """Start-up and wrap-up: the command's wall time beyond its budget."""
        return self.wall_s - self.budget_s

    @property
    def distinct_per_search_s(self) -> float:
        return self.distinct_ok / self.search_s if self.search_s > 0 else 0.0

    @property
    def distinct_per_wall_s(self) -> float:
        return self.distinct_ok / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def busy_share(self) -> float:
        return min(1.0, self.busy_s / self.search_s) if self.search_s > 0 else 0.0

    @property
    def fits_per_busy_s(self) -> float:
        return self.fits / self.busy_s if self.busy_s > 0 else 0.0


def read_run(results: Path) -> dict[str, Any]:
    """The run's row and its candidate counts, read back with DuckDB."""
    from sr_dist.results import duckdb_connection

    con = duckdb_connection(results)
    run_id, stats = con.execute(
        "SELECT run_id, evaluator_stats FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
    total, distinct_ok = con.execute(
        "SELECT count(*), count(DISTINCT canonical) FILTER (WHERE status = 'ok') FROM candidates "
        "WHERE run_id = ?", [run_id]).fetchone()
    return {"run_id": run_id, "stats": json.loads(stats) if stats else {}, "candidates": int(total),
            "distinct_ok": int(distinct_ok)}


def summarize(variant: str, rows: int, replicas: int, attempt: int, budget_s: float,
              wall_s: float, run: dict[str, Any]) -> Run:
    """A :class:`Run` from the command's wall time and :func:`read_run`."""
    stats = run["stats"]
    warm = stats.get("warmup") or {}
    return Run(variant=variant, rows=rows, replicas=replicas, attempt=attempt, budget_s=budget_s, wall_s=wall_s,
               search_s=float(stats.get("search_s") or 0.0), candidates=run["candidates"],
               distinct_ok=run["distinct_ok"], busy_s=float(stats.get("busy_s") or 0.0),
               fits=int(stats.get("search_fits") or 0),
               compile_s=float(stats.get("compile_s") or 0.0) + float(warm.get("compile_s") or 0.0),
               compiles=int(stats.get("compiles") or 0))


def run_sr_dist(csv: Path, results: Path, budget: float, replicas: int, extra: list[str]) -> float:
    """One ``sr-dist`` command with default settings; its wall time."""
    exe = Path(sys.executable).with_name("sr-dist")
    cmd = [str(exe), f"dataset.source=csv:{csv}", "dataset.target=y", f"search.max_seconds={budget}",
           f"evaluator.replicas={replicas}", f"results.path={results}", *extra]
    env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled")}
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"sr-dist exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return wall


@dataclass(frozen=True)
class Peer:
    rows: int
    seconds: float
    evaluations: int

    @property
    def per_s(self) -> float:
        return self.evaluations / self.seconds if self.seconds > 0 else 0.0


def run_pyoperon(csv: Path, budget: float, rows: int) -> Peer | None:
    """pyoperon on sr-dist's own training rows (the same split), ``budget`` seconds, 2 threads."""
    try:
        from pyoperon.sklearn import SymbolicRegressor
    except ImportError:
        return None
    from sr_dist.data import load_dataset

    ds = load_dataset(f"csv:{csv}", target="y")
    model = SymbolicRegressor(max_time=max(1, int(budget)), generations=10**9,
                              max_evaluations=10**12, n_threads=2, random_state=0)
    t0 = time.time()
    model.fit(np.asarray(ds.X_train), np.asarray(ds.y_train))
    seconds = time.time() - t0
    stats = dict(getattr(model, "stats_", {}) or {})
    return Peer(rows, seconds, int(stats.get("evaluation_count") or 0))


def render(runs: list[Run], peers: dict[int, Peer], budget: float, load: str) -> str:
    lines = [
        f"Default `sr-dist` runs of {budget:g} s on `{LAW}` + {NOISE:.0%} noise (4 variables); "
        f"attempt 1 is the first run of that shape on this machine, later attempts find the "
        f"compilation cache warm. Load average before the runs: {load}. `× default`: distinct "
        "ok/s over the first variant's (median) at the same rows and replicas; `× pyoperon`: "
        "over pyoperon's evaluations/s on the same training rows and budget.",
        "",
        "| variant | rows | replicas | attempt | wall s | search s | overhead s | candidates | "
        "distinct ok | distinct ok/s (search) | distinct ok/s (wall) | busy | fits/s busy | "
        "compile s | × default | × pyoperon |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base_variant = runs[0].variant if runs else ""
    base: dict[tuple[int, int], list[float]] = {}
    for r in runs:
        if r.variant == base_variant:
            base.setdefault((r.rows, r.replicas), []).append(r.distinct_per_search_s)
    for r in runs:
        peer = peers.get(r.rows)
        ratio = f"{r.distinct_per_search_s / peer.per_s:.4f}" if peer and peer.per_s else "-"
        ref = statistics.median(base.get((r.rows, r.replicas), [0.0]))
        own = f"{r.distinct_per_search_s / ref:.2f}" if ref else "-"
        lines.append(
            f"| {r.variant} | {r.rows:,} | {r.replicas} | {r.attempt} | {r.wall_s:.1f} | {r.search_s:.1f} | "
            f"{r.overhead_s:.1f} | {r.candidates:,} | {r.distinct_ok:,} | "
            f"{r.distinct_per_search_s:.0f} | {r.distinct_per_wall_s:.0f} | {100 * r.busy_share:.0f}% | "
            f"{r.fits_per_busy_s:.0f} | {r.compile_s:.1f} | {own} | {ratio} |")
    if peers:
        lines += ["", "| rows | pyoperon s | evaluations | evaluations/s |", "|---:|---:|---:|---:|"]
        for rows, p in sorted(peers.items()):
            lines.append(f"| {rows:,} | {p.seconds:.1f} | {p.evaluations:,} | {p.per_s:,.0f} |")
    for variant in dict.fromkeys(r.variant for r in runs):
        warm = [r for r in runs if r.attempt > 1 and r.variant == variant]
        if warm:
            over = [r.overhead_s for r in warm]
            rates = [r.distinct_per_search_s for r in warm]
            lines += ["", f"`{variant}`, runs after the first: median overhead (wall - budget) "
                          f"{statistics.median(over):.1f} s, median distinct ok/s "
                          f"{statistics.median(rates):.0f}."]
    return "\n".join(lines)


def parse_variants(specs: list[str]) -> list[tuple[str, list[str]]]:
    """``NAME=OVERRIDES`` strings as (name, overrides); ``default`` (no overrides) first unless
    a variant is named ``default``."""
    out: list[tuple[str, list[str]]] = []
    for spec in specs:
        name, sep, rest = spec.partition("=")
        if not sep or not name.strip():
            raise SystemExit(f"--variant {spec!r}: write NAME=OVERRIDES, e.g. "
                             "plain=+model.inherit_constants=false")
        out.append((name.strip(), rest.split()))
    if all(name != "default" for name, _ in out):
        out.insert(0, ("default", []))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=30.0, help="search.max_seconds per run")
    parser.add_argument("--rows", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=2, help="runs per configuration")
    parser.add_argument("--peers", choices=("pyoperon", "none"), default="pyoperon")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--json", type=Path, help="also write the measured values here")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra Hydra override for every sr-dist run")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=OVERRIDES",
                        help="a configuration to run too: a name, '=', space-separated overrides")
    args = parser.parse_args(argv)
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    variants = parse_variants(args.variant)
    runs: list[Run] = []
    peers: dict[int, Peer] = {}
    with tempfile.TemporaryDirectory(prefix="sr-dist-throughput-") as tmp:
        for n in args.rows:
            csv = Path(tmp) / f"noisy4_{n}.csv"
            write_csv(csv, *make_rows(n))
            for name, extra in variants:
                for replicas in args.replicas:
                    for attempt in range(1, args.repeat + 1):
                        results = Path(tmp) / f"{name}_{n}_{replicas}_{attempt}"
                        wall = run_sr_dist(csv, results, args.budget, replicas, args.set + extra)
                        run = summarize(name, n, replicas, attempt, args.budget, wall,
                                        read_run(results))
                        runs.append(run)
                        print(f"{name}: rows {n} replicas {replicas} attempt {attempt}: "
                              f"{run.distinct_ok} distinct ok in {run.search_s:.1f} s of search, "
                              f"wall {run.wall_s:.1f} s", flush=True)
            if args.peers == "pyoperon":
                peer = run_pyoperon(csv, args.budget, n)
                if peer is not None:
                    peers[n] = peer
    table = render(runs, peers, args.budget, load)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        args.json.write_text(json.dumps({"budget": args.budget, "load": load,
                                         "runs": [r.__dict__ for r in runs],
                                         "peers": {str(k): v.__dict__ for k, v in peers.items()}},
                                        indent=1))


if __name__ == "__main__":
    main()
