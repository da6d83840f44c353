"""Can a value-only evaluation tell which offspring to skip fitting? (issue 32, deliverable 3)

The offline search sends most offspring with their parents' constants (``starts``) for a local
search of ``local_iters`` Levenberg-Marquardt passes. A *screen* would skip that search where a
cheaper number says the offspring cannot join the breeding pool anyway. This script measures
how well such numbers predict it, on a live search:

1. ``evolve`` (seed ``--seed``) runs ``--turns`` turns in process against a real ``Evaluator``
   (default options) on ``bench/throughput.py``'s target (4 variables, 1% noise, ``--rows``)
   or on ``--csv``.
2. For each turn's offspring with a start that fitted ``ok``, it records
   * the NMSE on the training rows at the inherited start (one value-only pass, what a screen
     before fitting would see; constants the start lacks at ``UNNAMED_START``, as the evaluator
     does),
   * the NMSE after only ``k`` LM passes for each ``--passes`` ``k`` (a screen after a short
     search),
   * the fitness after the default local search (what the search keeps), and
   * the pool's entry bar before the turn: the ``pool_size``-th best score so far
     (``log10 NMSE + parsimony * complexity``, as ``evolve`` ranks) or a place on the Pareto
     front of (NMSE, complexity).
3. A screen with margin ``m`` skips an offspring whose screened score is more than ``m``
   decades above the bar. The table gives, per screen and margin, the share of local searches
   it would skip and how many of the offspring that did join the pool it would have lost.

It also times a value-only pass (parsing included) and a default local search per candidate (warm,
in process).

    .venv/bin/python bench/screening.py
    .venv/bin/python bench/screening.py --turns 40 --seed 2 --json /tmp/screen.json
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.evaluator_stream import evaluate_turn, write_target  # noqa: E402
from sr_dist.candidate import record_fitness  # noqa: E402
from sr_dist.conversation import Context  # noqa: E402
from sr_dist.data import load_dataset  # noqa: E402
from sr_dist.evaluator import Evaluator  # noqa: E402
from sr_dist.evaluator.starts import UNNAMED_START  # noqa: E402
from sr_dist.formula import parse_formula  # noqa: E402
from sr_dist.sr.evolve.model import EvolveModel  # noqa: E402
from sr_dist.sr.evolve.search import EvolveConfig  # noqa: E402

MARGINS = (0.5, 1.0, 2.0, 3.0, 5.0)
FLOOR = 1e-15


def fitness_score(nmse: float, complexity: int, parsimony: float) -> float:
    """``evolve``'s score: decades of NMSE plus the parsimony pressure (lower is better)."""
    if not math.isfinite(nmse):
        return math.inf
    return math.log10(max(nmse, FLOOR)) + parsimony * complexity


class Bar:
    """The breeding pool's entry bar, from every fitted candidate so far."""

    def __init__(self, pool_size: int, parsimony: float) -> None:
        self.pool_size, self.parsimony = pool_size, parsimony
        self._scores: list[float] = []
        self._best: dict[str, tuple[float, int]] = {}  # canonical -> (nmse, complexity)

    def add(self, canonical: str, nmse: float, complexity: int) -> None:
        if not math.isfinite(nmse) or canonical in self._best:
            return
        self._best[canonical] = (nmse, complexity)
        bisect.insort(self._scores, fitness_score(nmse, complexity, self.parsimony))

    def pool_bar(self) -> float:
        """The score that enters the pool: below the ``pool_size``-th best so far."""
        return self._scores[self.pool_size - 1] if len(self._scores) >= self.pool_size else math.inf

    def front_bar(self, complexity: int) -> float:
        """The NMSE that enters the Pareto front at ``complexity``."""
        held = [n for n, c in self._best.values() if c <= complexity]
        return min(held) if held else math.inf

    def joins(self, nmse: float, complexity: int) -> bool:
        return (fitness_score(nmse, complexity, self.parsimony) < self.pool_bar()
                or nmse < self.front_bar(complexity))

    def decades_above(self, nmse: float, complexity: int) -> float:
        """How far (decades of NMSE) ``nmse`` lies above the easier of the two bars."""
        score = fitness_score(nmse, complexity, self.parsimony)
        front = self.front_bar(complexity)
        to_front = math.log10(max(nmse, FLOOR)) - math.log10(max(front, FLOOR)) \
            if math.isfinite(front) else -math.inf
        return min(score - self.pool_bar(), to_front)


def _fitted_nmse(fit: Any) -> float:
    """A fit's training NMSE (``inf`` unless it fitted ``ok``)."""
    value = fit.train_nmse if fit.status == "ok" else None
    return float(value) if value is not None else math.inf


def start_nmse(evaluator: Evaluator, texts: Sequence[str], starts: Sequence[Mapping[str, float]],
               names: Sequence[str], y: np.ndarray) -> list[float]:
    """NMSE on the training rows at each start (one value-only pass)."""
    filled = []
    for text, start in zip(texts, starts, strict=True):
        constants = parse_formula(text, names).constants
        filled.append({c: float(start.get(c, UNNAMED_START)) for c in constants})
    preds = evaluator.evaluate_many(list(texts), constants=filled)
    var = float(np.var(y))
    out = []
    with np.errstate(all="ignore"):
        for p in preds:
            v = float(np.mean((p - y) ** 2) / var)
            out.append(v if math.isfinite(v) else math.inf)
    return out


def measure(csv: Path, turns: int, seed: int, passes: Sequence[int]) -> dict[str, Any]:
    dataset = load_dataset(f"csv:{csv}", seed=0)
    names = tuple(dataset.feature_names)
    y = np.asarray(dataset.y_train, dtype=np.float64)
    config = EvolveConfig()
    evaluator = Evaluator(dataset)
    short = {k: Evaluator(dataset, local_iters=k) for k in passes}
    timer = Evaluator(dataset)  # times the default local search, from an empty cache each turn
    model = EvolveModel(seed=seed, propose_ahead=False)
    info = {"variables": list(names), "seed": seed, "dataset": "screening",
            "sample": {"X": dataset.X_train[:500].tolist(), "y": dataset.y_train[:500].tolist()}}
    context = Context(info=info)
    bar = Bar(config.pool_size, config.parsimony)
    rows: list[dict[str, Any]] = []
    value_s = local_s = 0.0
    for _ in range(turns):
        before = len(context.tool_history)
        evaluate_turn(model, context, evaluator)
        for call, result in context.tool_history[before:]:
            if call.name != "evaluate_formulas":
                continue
            texts = call.arguments["expressions"]
            starts = call.arguments.get("starts") or [None] * len(texts)
            records = {r["expression"]: r for r in result.result.get("results", [])}
            local = [(t, s) for t, s in zip(texts, starts, strict=True)
                     if s is not None and records.get(t, {}).get("status") == "ok"]
            if local and math.isfinite(bar.pool_bar()):
                lt, ls = [t for t, _ in local], [s for _, s in local]
                start_nmse(evaluator, lt, ls, names, y)  # compiles (value-only kernels)
                t0 = time.perf_counter()
                at_start = start_nmse(evaluator, lt, ls, names, y)
                value_s += time.perf_counter() - t0
                after: dict[int, list[float]] = {}
                for k, ev in short.items():
                    fits = {f.expression: f for f in ev.fit_many(lt, starts=ls)}
                    after[k] = [_fitted_nmse(fits[t]) for t in lt]
                timer.fit_many(lt, starts=ls)  # compiles what this turn's buckets need
                timer.clear_cache()
                t0 = time.perf_counter()
                timer.fit_many(lt, starts=ls)
                local_s += time.perf_counter() - t0
                for i, text in enumerate(lt):
                    rec = records[text]
                    cx = int(rec["complexity"])
                    final = record_fitness(rec)
                    rows.append({
                        "joins": bar.joins(final, cx),
                        "start": bar.decades_above(at_start[i], cx),
                        **{f"after_{k}": bar.decades_above(after[k][i], cx) for k in passes},
                    })
            for rec in result.result.get("results", []):
                if rec.get("status") == "ok":
                    bar.add(rec["canonical"], record_fitness(rec), int(rec["complexity"]))
    return {"rows": rows, "value_ms": 1e3 * value_s / max(len(rows), 1),
            "local_ms": 1e3 * local_s / max(len(rows), 1)}


def table(rows: Sequence[Mapping[str, Any]], passes: Sequence[int]) -> list[dict[str, Any]]:
    joined = sum(1 for r in rows if r["joins"])
    out = []
    for screen in ["start", *(f"after_{k}" for k in passes)]:
        for m in MARGINS:
            skipped = [r for r in rows if r[screen] > m]
            out.append({"screen": screen, "margin": m, "skipped": len(skipped) / max(len(rows), 1),
                        "lost": sum(1 for r in skipped if r["joins"]), "joined": joined})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--csv", type=Path, help="a CSV with a column y (default: the target)")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0, help="the proposer's seed")
    parser.add_argument("--passes", type=int, nargs="*", default=[1, 3],
                        help="screens after this many LM passes")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        csv = args.csv
        if csv is None:
            csv = Path(tmp) / "target.csv"
            write_target(csv, args.rows)
        result = measure(csv, args.turns, args.seed, args.passes)
    rows = result["rows"]
    summary = table(rows, args.passes)
    joined = summary[0]["joined"] if summary else 0
    print(f"{len(rows)} local searches over {args.turns} turns (seed {args.seed}); {joined} joined "
          f"the pool or the front. Value-only pass {result['value_ms']:.3f} ms, local search "
          f"{result['local_ms']:.3f} ms a candidate. Load {' '.join(f'{v:.2f}' for v in os.getloadavg())}.")
    print("| screen | margin (decades) | local searches skipped | pool entrants lost |")
    print("|---|---:|---:|---:|")
    for r in summary:
        print(f"| {r['screen']} | {r['margin']:g} | {r['skipped']:.1%} | {r['lost']}/{r['joined']} |")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "value_ms": result["value_ms"],
                                         "local_ms": result["local_ms"], "table": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
