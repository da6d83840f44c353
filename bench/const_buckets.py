"""What the evaluator's constant buckets cost: cold compiles against warm fitting speed.

Each bucket of ``EvaluatorOptions.const_buckets`` is one XLA program per size class, compiled
once per process (or loaded from the persistent cache). Fewer buckets mean fewer compiles on a
cold cache but more padded constants in every fit. For each bucket set this script starts a
fresh process with an empty compilation cache, fits one batch of formulas with 1 to 5 constants
(the cold start: compiles and their seconds), then times ``--rounds`` more batches of
the same shapes with shifted literals (warm fits per second). The table's ratios are against
the first set (the default).

Usage:
    .venv/bin/python bench/const_buckets.py                       # n = 1000 and 10000
    .venv/bin/python bench/const_buckets.py --n 1000 --sets 2,4,8,16 8,16 16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Shapes with 1 to 5 constants (the default buckets put them in 2, 4 and 8).
SHAPES = ("c0*q*sin(c1*theta)+c2*Ef", "q*(c0*Ef + c1*B*v*sin(theta))", "c0*q*exp(c1*v)",
          "c0*B*v+c1*Ef*q+c2", "c0*q*Ef", "c0*q*Ef+c1*B*v*q*sin(theta)+c2*q+c3",
          "c0*sin(c1*theta+c2)*q*B*v+c3*Ef*q+c4")
DEFAULT_SETS = ("2,4,8,16", "8,16", "16")


def _batch(k: int) -> list[str]:
    """The shapes with their variable ``q`` shifted by a literal: new formulas, same buckets."""
    return [s.replace("q", f"(q+{k}.{i})") for i, s in enumerate(SHAPES)]


def measure(buckets: tuple[int, ...], n: int, rounds: int) -> dict[str, float]:
    """One bucket set in this process (call it in a fresh one: compiles are process-wide)."""
    from sr_dist.data import load_dataset
    from sr_dist.evaluator import Evaluator

    ds = load_dataset("feynman:I.12.11", n=n)
    ev = Evaluator(ds, compilation_cache_dir=tempfile.mkdtemp(prefix="srd-buckets-"),
                   const_buckets=buckets)
    t = time.perf_counter()
    ev.fit_many(_batch(0))
    cold = time.perf_counter() - t
    stats = ev.stats()
    t = time.perf_counter()
    for k in range(1, rounds + 1):
        ev.fit_many(_batch(k))
    warm = time.perf_counter() - t
    return {"cold_s": cold, "compiles": float(stats["compiles"]),
            "compile_s": float(stats["compile_s"]), "warm_fits_per_s": rounds * len(SHAPES) / warm}


def table(rows: Sequence[tuple[str, int, dict[str, float]]]) -> str:
    lines = ["| const_buckets | n | first batch (s) | compiles | compile (s) | warm fits/s | "
             "first batch vs default | warm fits/s vs default |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    base: dict[int, dict[str, float]] = {}
    for sets, n, r in rows:
        b = base.setdefault(n, r)
        lines.append(f"| ({sets}) | {n:,} | {r['cold_s']:.1f} | {r['compiles']:.0f} | "
                     f"{r['compile_s']:.1f} | {r['warm_fits_per_s']:.0f} | "
                     f"{r['cold_s'] / b['cold_s']:.2f} | "
                     f"{r['warm_fits_per_s'] / b['warm_fits_per_s']:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 10_000], help="rows")
    ap.add_argument("--sets", nargs="+", default=list(DEFAULT_SETS),
                    help="bucket sets, the first is the baseline (default: 2,4,8,16 8,16 16)")
    ap.add_argument("--rounds", type=int, default=10, help="warm batches timed")
    ap.add_argument("--one", nargs=3, metavar=("SETS", "N", "ROUNDS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        sets, n, rounds = args.one
        print(json.dumps(measure(tuple(int(b) for b in sets.split(",")), int(n), int(rounds))))
        return 0
    rows = []
    env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    for n in args.n:
        for sets in args.sets:
            done = subprocess.run([sys.executable, __file__, "--one", sets, str(n),
                                   str(args.rounds)], capture_output=True, text=True, env=env)
            if done.returncode != 0:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            rows.append((sets, n, json.loads(done.stdout.strip().splitlines()[-1])))
            print(f"const_buckets=({sets}) n={n}: {rows[-1][2]}", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
