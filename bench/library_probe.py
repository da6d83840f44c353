"""Does ``evolve``'s seed library hold an exact answer, and how deep? A development probe.

For each problem the probe builds the library exactly as an agent does (``problem_info``'s
first 500 training rows, the units when ``--units on``), times it, then fits its entries in
order, ``--batch`` at a time with an in-process :class:`Evaluator`, until one has validation
NMSE < 1e-10 and passes the recovery check against the truth (where sympy cannot decide, test
NMSE < 1e-10), or ``--entries`` are spent. It
prints the rank of the first exact entry (what a search would reach after ``rank / batch``
calls), the library's size and its build time. It says nothing about the search around the
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
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sr_dist.data import dataset_from_arrays, load_dataset  # noqa: E402
from sr_dist.evaluator import Evaluator  # noqa: E402
from sr_dist.sr.evolve.dimensions import units_from_info  # noqa: E402
from sr_dist.sr.evolve.model import EvolveModel  # noqa: E402
from sr_dist.sr.evolve.recovery import recovery_verdict  # noqa: E402
from sr_dist.sr.evolve.seeding import Sample  # noqa: E402
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


def probe(problem: str, n: int, units: bool, entries: int, batch: int) -> str:
    ds, truth = _dataset(problem, n, units)
    info = problem_info(ds)
    variables = tuple(info["variables"])
    sample = Sample(np.asarray(info["sample"]["X"], dtype=float), np.asarray(info["sample"]["y"], dtype=float))
    model = EvolveModel(seed=0, batch_size=batch)
    start = time.perf_counter()
    library = model._library(variables, sample, units_from_info(info, variables))
    build_s = time.perf_counter() - start
    evaluator = Evaluator(ds)
    best = math.inf
    best_expr = ""
    for offset in range(0, min(entries, len(library)), batch):
        texts = [render(t) for t in library[offset:offset + batch]]
        for k, fit in enumerate(evaluator.fit_many(texts)):
            val = fit.val_nmse if fit.val_nmse is not None and math.isfinite(fit.val_nmse) else math.inf
            if val < best:
                best, best_expr = val, fit.expression
            if val < EXACT_NMSE:
                verdict = recovery_verdict(fit.expression, dict(fit.constants), truth, list(variables))
                test = fit.test_nmse if fit.test_nmse is not None else math.inf
                # Undecided by sympy: the test rows stand in for bench/scoring.py's fresh points.
                if verdict or (verdict is None and test < EXACT_NMSE):
                    how = "" if verdict else " (sympy undecided; test NMSE decides)"
                    return (f"{problem:14s} EXACT at rank {offset + k:4d} of {len(library):4d} "
                            f"(build {build_s:5.1f} s){how}: {fit.expression}")
    return (f"{problem:14s} none in {min(entries, len(library)):4d} of {len(library):4d} "
            f"(build {build_s:5.1f} s); best val NMSE {best:.2e}: {best_expr[:90]}   | truth {truth}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--units", choices=("on", "off"), default="off")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=320)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    for problem in args.problems:
        print(probe(problem, args.n, args.units == "on", args.entries, args.batch), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
