"""Whole-pipeline throughput: agents on Ray → one shared evaluator actor → Parquet.

For 1, 2, 4 and 8 ``evolve`` agents, with micro-batching on (``evaluator.max_batch=256``) and off
(``max_batch=1``: every formula is its own evaluator call), run a real search (``run_search``) on
one local Ray cluster and report candidates/s (rows written), fits/s (distinct structures
fitted), how busy the evaluator was, the mean evaluator batch size and the share of batches that
mixed agents, each rate as a ratio against the 1-agent, batching-off baseline measured in the same
run; then the evaluator's batch-size distribution per configuration.

Every agent runs the same number of turns (``--turns``; evolve's seeded generations), so each
configuration does the same work per agent and more agents means proportionally more work; a
fixed time budget would compare different work, because evolve's early generations propose
simpler (cheaper) formulas than its later ones. A warm-up search runs first (not reported) so the
JAX persistent compilation cache holds the shape buckets the measured runs use.

Usage:
    .venv/bin/python bench/pipeline.py                       # ~6 minutes on 2 cores
    .venv/bin/python bench/pipeline.py --turns 3 --agents 1 2 --markdown out.md
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hydra import compose, initialize_config_module  # noqa: E402

from sr_dist.search import run_search  # noqa: E402

BINS: tuple[tuple[int, int], ...] = ((1, 1), (2, 8), (9, 32), (33, 64), (65, 128), (129, 256))


@dataclass(frozen=True)
class Row:
    agents: int
    batching: bool
    search_s: float
    stop_reason: str
    busy_s: float
    candidates: int
    fits: int
    batches: int
    mean_batch: float
    mixed_share: float
    cache_hits: int
    batch_sizes: dict[int, int]

    @property
    def candidates_per_s(self) -> float:
        return self.candidates / self.search_s if self.search_s > 0 else 0.0

    @property
    def fits_per_s(self) -> float:
        return self.fits / self.search_s if self.search_s > 0 else 0.0


def _config(results: Path, agents: int, batching: bool, turns: int, seconds: float,
            problem: str, max_wait_s: float) -> Any:
    overrides = [
        f"results.path={results}", f"dataset.source={problem}", f"search.agents={agents}",
        f"search.max_seconds={seconds}", "search.target_nmse=null", f"search.max_turns={turns}",
        f"evaluator.max_batch={256 if batching else 1}", f"evaluator.max_wait_s={max_wait_s}",
        "search.progress_interval_s=1000",
    ]
    with initialize_config_module("sr_dist.conf", version_base="1.3"):
        return compose("config", overrides=overrides)


def measure(results: Path, agents: int, batching: bool, turns: int, seconds: float,
            problem: str, max_wait_s: float) -> Row:
    cfg = _config(results, agents, batching, turns, seconds, problem, max_wait_s)
    summary = run_search(cfg, stream=io.StringIO(), handle_signals=False)
    ev = summary.evaluator
    b = ev.get("batching", {})
    batches = int(b.get("batches", 0))
    return Row(
        agents=agents, batching=batching, search_s=summary.search_s,
        stop_reason=summary.stop_reason, busy_s=float(ev.get("busy_s", 0.0)),
        candidates=summary.candidates, fits=int(ev.get("search_fits", 0)), batches=batches,
        mean_batch=float(b.get("mean_batch_size", 0.0)),
        mixed_share=(int(b.get("mixed_agent_batches", 0)) / batches) if batches else 0.0,
        cache_hits=int(ev.get("cache_hits", 0)),
        batch_sizes={int(k): int(v) for k, v in dict(b.get("batch_sizes", {})).items()},
    )


def histogram(sizes: dict[int, int]) -> list[int]:
    return [sum(n for size, n in sizes.items() if lo <= size <= hi) for lo, hi in BINS]


def render(rows: list[Row], meta: dict[str, Any]) -> str:
    base = next((r for r in rows if r.agents == 1 and not r.batching), rows[0])
    lines = [
        f"Problem `{meta['problem']}`, `evolve` agents, {meta['turns']} turns per agent, "
        f"evaluator on CPU ({meta['cpus']} cores), max_wait_s={meta['max_wait_s']}. "
        f"Ratios are against {base.agents} agent with batching off, measured in the same run.",
        "",
        "| agents | batching | search s | candidates/s | × | fits/s | × | evaluator busy | "
        "mean batch | mixed batches |",
        "|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        c_ratio = r.candidates_per_s / base.candidates_per_s if base.candidates_per_s else 0.0
        f_ratio = r.fits_per_s / base.fits_per_s if base.fits_per_s else 0.0
        busy = r.busy_s / r.search_s if r.search_s > 0 else 0.0
        lines.append(
            f"| {r.agents} | {'on (256)' if r.batching else 'off (1)'} | {r.search_s:.1f} | "
            f"{r.candidates_per_s:.1f} | {c_ratio:.2f} | {r.fits_per_s:.1f} | {f_ratio:.2f} | "
            f"{100 * min(busy, 1.0):.0f}% | {r.mean_batch:.1f} | {100 * r.mixed_share:.0f}% |"
        )
    head = " | ".join(f"{lo}" if lo == hi else f"{lo}–{hi}" for lo, hi in BINS)
    lines += ["", "Evaluator batch sizes (number of batches per size range):", "",
              f"| agents | batching | {head} |", "|---:|:---|" + "---:|" * len(BINS)]
    for r in rows:
        counts = " | ".join(str(n) for n in histogram(r.batch_sizes))
        lines.append(f"| {r.agents} | {'on' if r.batching else 'off'} | {counts} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6, help="model turns per agent")
    parser.add_argument("--seconds", type=float, default=300.0,
                        help="safety budget per configuration (runs normally end on --turns)")
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--problem", default="feynman:I.6.2")
    parser.add_argument("--max-wait", type=float, default=0.02, help="evaluator.max_wait_s")
    parser.add_argument("--warmup-turns", type=int, default=8,
                        help="turns per agent of the unreported warm-up run (0: none)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    parser.add_argument("--markdown", type=Path, help="also write the tables as Markdown")
    args = parser.parse_args()

    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(address="local", include_dashboard=False, logging_level=logging.ERROR)
    meta = {"problem": args.problem, "turns": args.turns, "max_wait_s": args.max_wait,
            "cpus": int(ray.cluster_resources().get("CPU", 0))}
    rows: list[Row] = []
    try:
        with tempfile.TemporaryDirectory(prefix="sr-dist-bench-") as tmp:
            if args.warmup_turns > 0:
                t = time.perf_counter()
                measure(Path(tmp) / "warmup", 2, True, args.warmup_turns, args.seconds,
                        args.problem, args.max_wait)
                print(f"warm-up run: {time.perf_counter() - t:.0f} s", flush=True)
            for agents in args.agents:
                for batching in (False, True):
                    row = measure(Path(tmp) / f"a{agents}-{int(batching)}", agents, batching,
                                  args.turns, args.seconds, args.problem, args.max_wait)
                    rows.append(row)
                    print(f"agents={agents} batching={'on' if batching else 'off'}: "
                          f"{row.candidates_per_s:.1f} candidates/s, {row.fits_per_s:.1f} fits/s, "
                          f"mean batch {row.mean_batch:.1f} ({row.stop_reason}, "
                          f"{row.search_s:.1f} s)", flush=True)
    finally:
        ray.shutdown()
    text = render(rows, meta)
    print()
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=2))


if __name__ == "__main__":
    main()
