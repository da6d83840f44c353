"""Does ``evolve``'s seed library hold an exact answer, and how deep? A development probe.

For each problem the probe builds the library exactly as an agent does (``problem_info``'s
first 500 training rows, the units when ``--units on``), times it, then fits its entries in
order, ``--batch`` at a time with an in-process :class:`Evaluator`, until one has validation
NMSE < 1e-10 and passes the recovery check against the truth (where sympy cannot decide, test
NMSE < 1e-10), or ``--entries`` are spent. It
prints the rank of the first exact entry (what a search would reach after ``rank / batch``
calls) and the seed source that made it (``Seed.source``), the library's size and its build
time, and at the end a table of exact hits per source; with ``--every-source`` it fits all
``--entries`` and counts every source that has an exact seed, not only the first. It says nothing about the search around the
library; use ``bench/feynman_full.py`` and ``bench/synthetic.py`` for the answer a user gets.

Problems: AI Feynman file names, or ``synth:SEED:INDEX`` for ``bench/synthetic.py`` draws
(development seeds 1 and 2, and the spent held-out seeds 100 to 104 whose results are
published; the held-out seeds not yet drawn, 105 and up, are refused).

Usage:
    .venv/bin/python bench/library_probe.py --units on I.15.3x I.16.6 I.6.2
    .venv/bin/python bench/library_probe.py synth:1:0 synth:1:3 --entries 256
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sr_dist.data import dataset_from_arrays, load_dataset  # noqa: E402
from sr_dist.evaluator import Evaluator  # noqa: E402
from sr_dist.results.recovery import recovery_verdict  # noqa: E402
from sr_dist.sr.evolve import library_for_info  # noqa: E402
from sr_dist.sr.evolve.tree import render  # noqa: E402
from sr_dist.sr.factory import problem_info  # noqa: E402

EXACT_NMSE = 1e-10
#: Held-out synthetic seeds from here up have never been drawn: no probing them.
FIRST_UNSPENT_SEED = 105


def _dataset(problem: str, n: int, units: bool):  # type: ignore[no-untyped-def]
    if problem.startswith("synth:"):
        from synthetic import draw_formula

        _, seed, index = problem.split(":")
        if int(seed) >= FIRST_UNSPENT_SEED:
            raise SystemExit(f"held-out synthetic seeds (>= {FIRST_UNSPENT_SEED}) must not be probed while developing")
        f = draw_formula(int(seed), int(index))
        X, y = f.sample(n, np.random.default_rng(0))
        ds = dataset_from_arrays(X, y, feature_names=list(f.variables), name=problem)
        return ds, f.truth
    ds = load_dataset(f"feynman:{problem}", n=n, seed=0, units="feynman" if units else None)
    return ds, ds.ground_truth or ""


@dataclass(frozen=True)
class ProbeResult:
    """One problem's probe: the first exact entry (rank, source, expression) or None, the
    library's size and build time, and the sources with an exact seed among the fitted entries
    (all of them with ``every_source``, else the first exact one's)."""

    problem: str
    rank: int | None
    source: str | None
    expression: str
    size: int
    build_s: float
    decided_by_test: bool
    exact_sources: frozenset[str]
    best_val: float
    truth: str

    def line(self, entries: int) -> str:
        if self.rank is None:
            return (f"{self.problem:14s} none in {min(entries, self.size):4d} of {self.size:4d} "
                    f"(build {self.build_s:5.1f} s); best val NMSE {self.best_val:.2e}: {self.expression[:90]}"
                    f"   | truth {self.truth}")
        how = " (sympy undecided; test NMSE decides)" if self.decided_by_test else ""
        return (f"{self.problem:14s} EXACT at rank {self.rank:4d} of {self.size:4d} from {self.source} "
                f"(build {self.build_s:5.1f} s){how}: {self.expression}")


def probe(problem: str, n: int, units: bool, entries: int, batch: int, every_source: bool = False) -> ProbeResult:
    ds, truth = _dataset(problem, n, units)
    info = problem_info(ds)
    variables = tuple(info["variables"])
    start = time.perf_counter()
    library = library_for_info(info, with_sources=True)
    build_s = time.perf_counter() - start
    evaluator = Evaluator(ds)
    best = math.inf
    best_expr = ""
    first: tuple[int, str, str, bool] | None = None
    exact_sources: set[str] = set()
    for offset in range(0, min(entries, len(library)), batch):
        seeds = library[offset:offset + batch]
        for k, fit in enumerate(evaluator.fit_many([render(seed.tree) for seed in seeds])):
            val = fit.val_nmse if fit.val_nmse is not None and math.isfinite(fit.val_nmse) else math.inf
            if val < best:
                best, best_expr = val, fit.expression
            if val < EXACT_NMSE and (every_source or first is None) and seeds[k].source not in exact_sources:
                verdict = recovery_verdict(fit.expression, dict(fit.constants), truth, list(variables))
                test = fit.test_nmse if fit.test_nmse is not None else math.inf
                # Undecided by sympy: the test rows stand in for bench/scoring.py's fresh points.
                if verdict or (verdict is None and test < EXACT_NMSE):
                    exact_sources.add(seeds[k].source)
                    if first is None:
                        first = (offset + k, seeds[k].source, fit.expression, not verdict)
        if first is not None and not every_source:
            break
    if first is None:
        return ProbeResult(problem, None, None, best_expr, len(library), build_s, False, frozenset(), best, truth)
    rank, source, expression, by_test = first
    return ProbeResult(problem, rank, source, expression, len(library), build_s, by_test, frozenset(exact_sources),
                       best, truth)


def source_table(results: Sequence[ProbeResult]) -> str:
    """Per source: the problems where it gave the first exact entry, and where it gave any."""
    sources = sorted({s for r in results for s in r.exact_sources} | {r.source for r in results if r.source})
    lines = ["| source | first exact | any exact |", "|---|---|---|"]
    for source in sources:
        first = sum(r.source == source for r in results)
        any_ = sum(source in r.exact_sources for r in results)
        lines.append(f"| {source} | {first} | {any_} |")
    lines.append(f"| (none) | {sum(r.rank is None for r in results)} | |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--units", choices=("on", "off"), default="off")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=320)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--every-source", action="store_true",
                        help="fit all --entries and count every source with an exact seed (slower)")
    args = parser.parse_args(argv)
    results = []
    for problem in args.problems:
        result = probe(problem, args.n, args.units == "on", args.entries, args.batch, args.every_source)
        results.append(result)
        print(result.line(args.entries), flush=True)
    print()
    print(source_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
