"""A digest of ``evolve``'s seed library per problem: the safety net for moving the search code.

For each problem the script builds the library exactly as an agent does (``problem_info``'s
first 500 training rows of a 10,000-row dataset, the units when the problem is marked units-on),
renders every entry in order, and records the count, a SHA-256 of the whole rendered list and
one of each block of 64 entries (so a mismatch says where the libraries part). ``--check``
compares against the committed ``bench/library_digests.json`` and exits 1 on any difference;
``--write`` (re)writes the entries it built. A restructuring that changes no behaviour leaves
every digest identical; a change of behaviour on purpose rewrites the file in the same commit,
with the before/after benchmark figures in the commit message.

A library is a chain of greedy choices among near-equal fits, so it is reproducible on one
machine, not across machines: numpy and OpenBLAS pick their vector kernels at run time (AVX2 or
AVX-512), and a last-bit difference in one reduction can flip a choice. The file records the
numerics it was written with (:func:`numerics`: numpy's version and enabled dispatch targets,
the BLAS and the kernel family it chose); ``--check`` says when this machine's differ, and the
test of ``make test`` skips there. On such a machine, write a baseline at your base commit
(``--write --file base.json``) and check your change against it (``--check --file base.json``).

The fixed list: development synthetic seeds 1 and 2, 20 draws each (``synth:SEED:INDEX``), and
15 AI Feynman problems (every 7th row of the table, so nobody chose them), each with and without
units (``feynman:NAME:on`` / ``feynman:NAME:off``).

Usage:
    .venv/bin/python bench/library_digest.py --check            # every listed problem
    .venv/bin/python bench/library_digest.py --check feynman:I.6.2a:off synth:1:0
    .venv/bin/python bench/library_digest.py --write            # after a deliberate change
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    # One BLAS thread (before numpy loads): two builds side by side with default threads run
    # several times slower. Imported by the tests, the module leaves the environment alone.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sr_dist.data import dataset_from_arrays, load_dataset  # noqa: E402
from sr_dist.data.feynman import feynman_equations  # noqa: E402
from sr_dist.sr.evolve import library_for_info  # noqa: E402
from sr_dist.sr.evolve.tree import render  # noqa: E402
from sr_dist.sr.factory import problem_info  # noqa: E402

DIGEST_FILE = ROOT / "bench" / "library_digests.json"
ROWS = 10_000
BLOCK = 64
DEVELOPMENT_SEEDS = (1, 2)
DRAWS_PER_SEED = 20
FEYNMAN_STEP = 7


def feynman_names(step: int = FEYNMAN_STEP) -> list[str]:
    """Every ``step``-th problem of the AI Feynman table (the one sr-dist ships, the same rows in
    the same order as ``shared/data/FeynmanEquations.csv``)."""
    return [eq.filename for eq in feynman_equations()][::step]


def numerics() -> str:
    """The float kernels this process runs: numpy's version and the dispatch targets it enabled
    on this CPU, and the BLAS library, version and kernel family (threadpoolctl) it loaded."""
    try:  # numpy's own record of its run-time dispatch (what np.show_runtime prints)
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:
        enabled = ["dispatch-unknown"]
    else:
        enabled = [t for t in __cpu_dispatch__ if __cpu_features__.get(t)]
    blas = "blas unknown"
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # a bench environment without scikit-learn's helper
        pass
    else:
        found = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        # numpy's own BLAS (its wheel's numpy.libs), not whichever scipy or another package
        # loaded first; without one there, every BLAS loaded, in a fixed order.
        own = [i for i in found if Path(str(i.get("filepath", ""))).parent.name.startswith("numpy")]
        named = sorted(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
                       for i in (own or found))
        if named:
            blas = " + ".join(named)
    return f"numpy {np.__version__} {'+'.join(enabled) or 'baseline'}; {blas}"


def problem_list() -> list[str]:
    synth = [f"synth:{s}:{i}" for s in DEVELOPMENT_SEEDS for i in range(DRAWS_PER_SEED)]
    feynman = [f"feynman:{name}:{units}" for name in feynman_names() for units in ("off", "on")]
    return synth + feynman


def _dataset(problem: str) -> Any:
    kind, name, flag = problem.split(":")
    if kind == "synth":
        from synthetic import HELD_OUT_FROM, draw_formula

        if int(name) >= HELD_OUT_FROM or int(name) not in DEVELOPMENT_SEEDS:
            raise SystemExit(f"{problem}: only the development seeds {DEVELOPMENT_SEEDS} are digested")
        f = draw_formula(int(name), int(flag))
        X, y = f.sample(ROWS, np.random.default_rng(0))
        return dataset_from_arrays(X, y, feature_names=list(f.variables), name=problem)
    if kind == "feynman":
        return load_dataset(f"feynman:{name}", n=ROWS, seed=0, units="feynman" if flag == "on" else None)
    raise SystemExit(f"unknown problem {problem!r}: write synth:SEED:INDEX or feynman:NAME:on|off")


def rendered_library(problem: str) -> list[str]:
    """The library an ``evolve`` agent builds for ``problem``, rendered, in order."""
    return [render(tree) for tree in library_for_info(problem_info(_dataset(problem)))]


def digest(entries: Sequence[str]) -> dict[str, Any]:
    def sha(items: Sequence[str]) -> str:
        return hashlib.sha256("\n".join(items).encode()).hexdigest()

    return {
        "count": len(entries),
        "sha256": sha(entries),
        "blocks": [sha(entries[k:k + BLOCK])[:16] for k in range(0, len(entries), BLOCK)],
    }


def compare(problem: str, built: dict[str, Any], stored: dict[str, Any] | None) -> str | None:
    """None when identical, else a line saying where the libraries part."""
    if stored is None:
        return f"{problem}: no committed digest (run --write)"
    if built["sha256"] == stored["sha256"]:
        return None
    first = next((k for k, (a, b) in enumerate(zip(built["blocks"], stored["blocks"])) if a != b),
                 min(len(built["blocks"]), len(stored["blocks"])))
    return (f"{problem}: library changed: {built['count']} entries against {stored['count']}, "
            f"first differing block of {BLOCK} starts at entry {first * BLOCK}")


def load_digests(path: Path = DIGEST_FILE) -> dict[str, dict[str, Any]]:
    """The stored digest of each problem."""
    return dict(json.loads(path.read_text())["problems"]) if path.exists() else {}


def written_with(path: Path = DIGEST_FILE) -> str | None:
    """The :func:`numerics` the file was written with (None: no file)."""
    return str(json.loads(path.read_text())["numerics"]) if path.exists() else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problems", nargs="*", help="default: the whole fixed list")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="compare with the committed digests")
    mode.add_argument("--write", action="store_true", help="store the digests built")
    parser.add_argument("--file", type=Path, default=DIGEST_FILE)
    args = parser.parse_args(argv)
    problems = args.problems or problem_list()
    stored = load_digests(args.file)
    here, there = numerics(), written_with(args.file)
    if args.check and there is not None and there != here:
        print(f"note: {args.file.name} was written with {there}; this machine runs {here}, so "
              "libraries may part on near-ties (write a baseline here with --write --file)", flush=True)
    failures = 0
    for problem in problems:
        start = time.perf_counter()
        built = digest(rendered_library(problem))
        seconds = time.perf_counter() - start
        if args.write:
            stored[problem] = built
            print(f"{problem:24s} {built['count']:5d} entries  {built['sha256'][:16]}  ({seconds:.1f} s)", flush=True)
            continue
        problem_line = compare(problem, built, stored.get(problem))
        failures += problem_line is not None
        print(problem_line or f"{problem:24s} identical ({built['count']} entries, {seconds:.1f} s)", flush=True)
    if args.write:
        listed = problem_list()
        ordered = {p: stored[p] for p in [*(p for p in listed if p in stored), *sorted(set(stored) - set(listed))]}
        args.file.write_text(json.dumps({"numerics": here, "problems": ordered}, indent=1) + "\n")
    print(f"{len(problems) - failures} of {len(problems)} identical" if args.check else f"wrote {args.file}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
