"""Random formulas to develop sr-dist against, so that no fixed problem set gets tuned on.

``draw_formula(seed, index)`` draws one formula as SRBench's synthetic sets do: 1 to 6
variables ``x0..x5``, sums, differences, products, quotients, integer powers (2, 3), the unary
functions sin, cos, exp, log and sqrt, nesting depth up to 4, and random constants
(multiples of 0.1 between 0.1 and 4 other than 1, written as exact rationals in the truth so
the recovery check can compare them). Every variable gets a positive sampling range (low in {0.1, 0.5, 1, 2}, width
in {1, 2, 4, 8}; the recovery check takes variables as positive). A draw is rejected and the
next attempt of the same (seed, index) is tried when it is degenerate on its range:

* a sub-expression without a variable (``sin(0.7)``, ``0.3*0.5``): no closed form to snap to;
* an operation on two identical arguments (``x0 + x0``, ``x1/x1``) or an inverse pair
  (``log(exp(u))``, ``exp(log(u))``, ``sqrt(u)**2``, a power of a power);
* non-finite values; a pole in the range (a denominator that changes sign) or a log or sqrt
  of a value that reaches 0 or below; overflow (``max |y| > 1e6`` or an outlier more than 1000
  interquartile ranges from the median); a (nearly) constant target;
* sympy simplifies it to fewer variables than drawn (``x0*x1/x1``) or to fewer than half of
  its operations, or cannot simplify it within 30 s;
* a variable that barely matters on its range (shuffling its column moves ``y`` by less than
  1e-3 of its standard deviation on average).

Formula ``index`` of ``seed`` depends on nothing else (its own random stream), so a worker
draws only the one it runs and the list is the same on every machine with the same numpy.

**Seeds.** Development uses seeds 1 and 2 only. Seeds >= 100 are held out: they must not be
looked at (not even with ``--list``) while sr-dist is being tuned; the acceptance run of issue
15 uses one of them, named in ``docs/benchmarks.md``.

For each formula a worker process writes the sampled rows (``--n``, default 10,000, noise 0)
to a Parquet file in a temporary folder and runs sr-dist on ``parquet:<file>`` as a user does
(``run_search``, ``model=evolve``, ``search.agents=2``, ``search.max_seconds=--budget``,
default 30; the table is split 70/15/15 with seed 0 by sr-dist's data layer, and the ground
truth is not in the file). It scores the answer sr-dist hands the user (the documented
selection rule) with ``bench/scoring.py``: exact = symbolically equal after snapping constants,
or, where sympy cannot decide in 8 s, NMSE < 1e-20 on 2,000 fresh points.

Usage (run where Ray may bind loopback, e.g. ``unshare --net sh -c 'ip link set lo up && ...'``):
    .venv/bin/python bench/synthetic.py --list --seed 1 --count 20       # the draws, no search
    .venv/bin/python bench/synthetic.py --seed 1 --count 50 --json synth1.json --markdown s.md
    .venv/bin/python bench/synthetic.py --seed 1 --indices 0 3 --budget 10
    .venv/bin/python bench/synthetic.py --family nonlinear --seed 1 --count 50 --budget 60
Results are appended to ``--json`` after each formula; a rerun skips the formulas already there.
"""

from __future__ import annotations

import argparse
import itertools
import math
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scoring import (  # noqa: E402
    FRESH_ROWS,
    Outcome,
    exit_on_sigterm,
    fmt,
    judge,
    load_outcomes,
    median,
    run_srdist,
    run_worker,
    save_outcomes,
    short,
)

#: The families of formulas ``draw_formula`` draws from (``--family``).
DEFAULT_FAMILY = "srbench"
FAMILIES = ("srbench", "nonlinear")
#: Seeds tuned on; everything >= HELD_OUT_FROM is for judging only.
DEVELOPMENT_SEEDS: tuple[int, ...] = (1, 2)
HELD_OUT_FROM = 100
MAX_VARS = 6
MAX_DEPTH = 4
UNARY = ("sin", "cos", "exp", "log", "sqrt")
BINARY = ("add", "sub", "mul", "div")
#: How a binary op is chosen (products and sums dominate physical and SRBench formulas).
BINARY_WEIGHTS = (0.3, 0.15, 0.35, 0.2)
#: Attempts per (seed, index) before giving up (a draw is rejected only when degenerate).
MAX_ATTEMPTS = 2000
#: Rows the degeneracy checks look at (fixed, so a formula does not depend on --n).
CHECK_ROWS = 2000
#: A draw sympy cannot simplify in this long is rejected. Far above the slowest simplify of
#: seeds 1 and 2 (about 1 s for the 100 accepted draws of indices 0-49), so machine load does
#: not change which formulas are drawn.
SIMPLIFY_S = 30.0
RANGE_LOWS = (0.1, 0.5, 1.0, 2.0)
RANGE_WIDTHS = (1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Expr:
    """A node of a drawn formula: ``op`` is var/const, a binary op, ``pow`` or a unary name."""

    op: str
    args: tuple[Expr, ...] = ()
    value: Fraction | None = None
    var: int | None = None
    power: int | None = None

    def depth(self) -> int:
        """Nesting depth: a leaf is 0, an operation is 1 + its deepest argument."""
        return 0 if not self.args else 1 + max(a.depth() for a in self.args)

    def walk(self) -> Iterator[Expr]:
        yield self
        for a in self.args:
            yield from a.walk()

    def variables(self) -> frozenset[int]:
        return frozenset(e.var for e in self.walk() if e.op == "var" and e.var is not None)


_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def render(e: Expr, exact: bool) -> str:
    """Formula text: constants as rationals ``(13/10)`` when ``exact`` (the truth the recovery
    check reads), as decimals ``1.3`` otherwise (for people)."""
    if e.op == "var":
        return f"x{e.var}"
    if e.op == "const":
        assert e.value is not None
        if e.value.denominator == 1:
            return str(e.value.numerator)
        return f"({e.value.numerator}/{e.value.denominator})" if exact else f"{float(e.value):g}"
    if e.op in _SYMBOL:
        return f"({render(e.args[0], exact)} {_SYMBOL[e.op]} {render(e.args[1], exact)})"
    if e.op == "pow":
        return f"({render(e.args[0], exact)})**{e.power}"
    return f"{e.op}({render(e.args[0], exact)})"


def item_name(seed: int, index: int, family: str = DEFAULT_FAMILY) -> str:
    """A formula's name in tables and result files: ``seed1#3``, ``nonlinear-seed1#3``."""
    prefix = "" if family == DEFAULT_FAMILY else f"{family}-"
    return f"{prefix}seed{seed}#{index}"


@dataclass(frozen=True)
class SyntheticFormula:
    """One accepted draw: its truth, variables, sampling ranges, and how it was drawn."""

    seed: int
    index: int
    attempt: int
    tree: Expr
    ranges: tuple[tuple[float, float], ...]
    rejected: tuple[str, ...]
    #: ``srbench`` (this module's random trees) or ``nonlinear`` (``bench/nonlinear_family.py``).
    family: str = "srbench"

    @property
    def n_vars(self) -> int:
        return len(self.ranges)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(f"x{i}" for i in range(self.n_vars))

    @property
    def depth(self) -> int:
        return self.tree.depth()

    @property
    def truth(self) -> str:
        return render(self.tree, exact=True)

    @property
    def display(self) -> str:
        return render(self.tree, exact=False)

    @property
    def item(self) -> str:
        return item_name(self.seed, self.index, self.family)

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` rows uniform in the ranges and the noise-free target (float64)."""
        from sr_dist.formula import evaluate_numpy, parse_formula

        X = np.column_stack([rng.uniform(lo, hi, size=n) for lo, hi in self.ranges])
        with np.errstate(all="ignore"):
            y = np.asarray(evaluate_numpy(parse_formula(self.truth, self.variables), X,
                                          self.variables), dtype=np.float64)
        return X, y


# --- drawing ----------------------------------------------------------------------------------

def _grow(rng: np.random.Generator, depth_left: int, root: bool) -> Expr:
    """A random tree of depth <= depth_left; leaves are placeholders ``var``/``const``."""
    if depth_left == 0 or (not root and rng.random() < 0.2):
        if rng.random() < 0.8:
            return Expr("var")
        return Expr("const", value=Fraction(int(rng.choice([p for p in range(1, 41) if p != 10])), 10))
    r = rng.random()
    if r < 0.62:
        op = str(rng.choice(BINARY, p=BINARY_WEIGHTS))
        return Expr(op, (_grow(rng, depth_left - 1, False), _grow(rng, depth_left - 1, False)))
    if r < 0.74:
        return Expr("pow", (_grow(rng, depth_left - 1, False),), power=int(rng.choice([2, 3])))
    return Expr(str(rng.choice(UNARY)), (_grow(rng, depth_left - 1, False),))


def _assign(tree: Expr, names: list[int]) -> Expr:
    """The tree with its ``var`` placeholders replaced, in walk order, by ``names``."""
    if tree.op == "var":
        return replace(tree, var=names.pop(0))
    if not tree.args:
        return tree
    return replace(tree, args=tuple(_assign(a, names) for a in tree.args))


def _structure(rng: np.random.Generator, n_vars: int) -> Expr | None:
    """A tree using all ``n_vars`` variables, or None when the drawn shape has too few leaves."""
    lowest = max(1, math.ceil(math.log2(n_vars)))
    tree = _grow(rng, int(rng.integers(lowest, MAX_DEPTH + 1)), root=True)
    slots = sum(1 for e in tree.walk() if e.op == "var")
    if slots < n_vars:
        return None
    order = [int(v) for v in rng.permutation(n_vars)]
    order += [int(v) for v in rng.integers(0, n_vars, size=slots - n_vars)]
    rng.shuffle(order)
    return _assign(tree, order)


class _SimplifyTimeout(BaseException):
    """Raised by SIGALRM inside sympy's simplify."""


def _simplified(truth: str, variables: Sequence[str]) -> tuple[int, int] | None:
    """How many variables and operations sympy's simplified form of ``truth`` keeps (None:
    out of time)."""
    import sympy

    from sr_dist.formula import parse_formula

    expr = parse_formula(truth, tuple(variables)).to_sympy()
    positive = {s: sympy.Symbol(s.name, positive=True) for s in expr.free_symbols}

    def _expire(signum: int, frame: Any) -> None:
        raise _SimplifyTimeout

    previous = signal.signal(signal.SIGALRM, _expire)
    try:  # the timer starts inside the try: a very short deadline must still be caught
        signal.setitimer(signal.ITIMER_REAL, SIMPLIFY_S)
        simple = sympy.simplify(expr.xreplace(positive))
        return len(simple.free_symbols), int(sympy.count_ops(simple))
    except _SimplifyTimeout:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _corners(ranges: Sequence[tuple[float, float]]) -> np.ndarray:
    """Every corner of the sampling box (at most 2**6 rows)."""
    return np.array(list(itertools.product(*ranges)), dtype=np.float64)


_INVERSE = {("log", "exp"), ("exp", "log"), ("pow", "sqrt"), ("pow", "pow")}


def degeneracy(f: SyntheticFormula) -> str | None:
    """Why a draw is degenerate on its range (a short reason), or None when it is usable."""
    for node in f.tree.walk():
        if node.args and not node.variables():
            return "constant sub-expression"
        if len(node.args) == 2 and node.args[0] == node.args[1]:
            return "identical arguments"
        if node.args and (node.op, node.args[0].op) in _INVERSE:
            return "inverse pair"
    X, y = f.sample(CHECK_ROWS, np.random.default_rng([f.seed, f.index, f.attempt, 9]))
    # The box's corners too: a monotone inner expression (``x1 + 3.3 + x0 - x2``) reaches its
    # extremes there, where 2,000 random rows may not (and 10,000 sampled rows then would).
    corners = _corners(f.ranges)
    X_edges = np.vstack([X, corners])
    for node in f.tree.walk():
        inner = node.args[1] if node.op == "div" else (
            node.args[0] if node.op in ("log", "sqrt") else None)
        if inner is None:
            continue
        _, values = _sample_at(f, X_edges, inner)
        if node.op == "div" and not (np.all(values > 0) or np.all(values < 0)):
            return "pole in range"
        if node.op != "div" and not np.all(values > 0):
            return f"{node.op} of a non-positive value"
    if not np.all(np.isfinite(y)):
        return "non-finite"
    med = float(np.median(y))
    q75, q25 = np.percentile(y, [75, 25])
    spread = float(np.std(y))
    if spread <= 1e-9 * (1.0 + abs(med)) or q75 - q25 <= 1e-9 * (1.0 + abs(med)):
        return "constant target"
    if float(np.max(np.abs(y))) > 1e6 or float(np.max(np.abs(y - med))) > 1e3 * (q75 - q25):
        return "pole or overflow"
    shuffle = np.random.default_rng([f.seed, f.index, f.attempt, 10])
    for j in range(f.n_vars):
        moved = X.copy()
        moved[:, j] = shuffle.permutation(moved[:, j])
        _, y_moved = _sample_at(f, moved)
        if float(np.mean(np.abs(y_moved - y))) < 1e-3 * spread:
            return "a variable barely matters"
    kept = _simplified(f.truth, f.variables)
    if kept is None:
        return "sympy too slow"
    if kept[0] < f.n_vars:
        return "simplifies to fewer variables"
    if kept[1] < 0.5 * sum(1 for e in f.tree.walk() if e.args):
        return "simplifies to a much shorter formula"
    return None


def _sample_at(f: SyntheticFormula, X: np.ndarray,
               part: Expr | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The formula (or one of its sub-expressions) at the rows ``X``."""
    from sr_dist.formula import evaluate_numpy, parse_formula

    text = f.truth if part is None else render(part, exact=True)
    with np.errstate(all="ignore"):
        y = np.asarray(evaluate_numpy(parse_formula(text, f.variables), X, f.variables),
                       dtype=np.float64)
    return X, y


def draw_formula(seed: int, index: int, family: str = DEFAULT_FAMILY) -> SyntheticFormula:
    """Formula ``index`` of ``seed``: the first non-degenerate attempt of its own stream.
    ``family="nonlinear"``: a law with nonlinear parameters inside functions
    (``bench/nonlinear_family.py``)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}: use one of {', '.join(FAMILIES)}")
    if family == "nonlinear":
        from nonlinear_family import draw_nonlinear

        return draw_nonlinear(seed, index)[1]
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be >= 0, got seed={seed}, index={index}")
    rejected: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([seed, index, attempt])
        n_vars = int(rng.integers(1, MAX_VARS + 1))
        ranges = []
        for _ in range(n_vars):
            low = float(rng.choice(RANGE_LOWS))
            ranges.append((low, low + float(rng.choice(RANGE_WIDTHS))))
        tree = _structure(rng, n_vars)
        if tree is None:
            continue
        f = SyntheticFormula(seed, index, attempt, tree, tuple(ranges), ())
        why = degeneracy(f)
        if why is None:
            return replace(f, rejected=tuple(rejected))
        rejected.append(why)
    raise RuntimeError(f"no usable formula for seed {seed}, index {index} in {MAX_ATTEMPTS} "
                       "attempts; the generator's settings are too strict")


# --- one formula (worker side) ----------------------------------------------------------------

def setting_label(noise: float = 0.0) -> str:
    return f"noise={noise:g}"


def worker(seed: int, index: int, budget: float, n: int, agents: int,
           overrides: Sequence[str] = (), family: str = DEFAULT_FAMILY) -> dict[str, Any]:
    """Draw, sample, run sr-dist on a Parquet copy, judge its answer; an Outcome as a dict.
    ``overrides``: more sr-dist config overrides (the tests stop on a candidate count)."""
    from sr_dist.data import load_dataset

    t0 = time.time()
    f = draw_formula(seed, index, family)
    base: dict[str, Any] = {"item": f.item, "setting": setting_label(), "tool": "sr-dist",
                            "budget_s": budget, "n": n, "truth": f.truth}
    extra: dict[str, Any] = {"n_vars": f.n_vars, "depth": f.depth, "display": f.display}
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        X, y = f.sample(n, np.random.default_rng([seed, index, 1]))
        if not np.all(np.isfinite(y)):
            raise ValueError("the sampled rows have non-finite targets")
        fresh = f.sample(FRESH_ROWS, np.random.default_rng([seed, index, 2]))
        with tempfile.TemporaryDirectory(prefix="synthetic-") as folder:
            path = Path(folder) / f"{f.item.replace('#', '_')}.parquet"
            columns = {name: X[:, j] for j, name in enumerate(f.variables)}
            pq.write_table(pa.table({**columns, "y": y}), path)
            ds = load_dataset(f"parquet:{path}", seed=0)  # the rows and split sr-dist sees
            run = run_srdist([f"dataset.source=parquet:{path}", "dataset.n=null",
                              "dataset.seed=0", *overrides], budget, agents=agents)
        extra.update(stop_reason=run.stop_reason, search_s=run.search_s,
                     run_wall_s=run.run_wall_s)
        if run.answer is None:
            return {**base, "status": "no_answer", "candidates": run.candidates,
                    "wall_s": time.time() - t0, "extra": extra}
        a = run.answer
        v = judge(a.expression, a.constants, f.truth, f.variables, (ds.X_test, ds.y_test), fresh)
        return {**base, "status": "ok", "answer": a.expression, "constants": a.constants,
                "exact": v.exact, "how": v.how, "test_nmse": v.test_nmse,
                "fresh_nmse": v.fresh_nmse, "candidates": run.candidates,
                "wall_s": time.time() - t0, "extra": extra}
    except Exception as exc:  # noqa: BLE001 - a crashed run is a result, not a crash
        extra["traceback"] = traceback.format_exc()[-2000:]
        return {**base, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500],
                "wall_s": time.time() - t0, "extra": extra}


# --- tables -----------------------------------------------------------------------------------

def totals(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Exact share, median test NMSE of the answers, times."""
    ran = [o for o in outcomes if o.status != "not_run"]
    exact = [o for o in ran if o.exact]
    walls = [o.wall_s for o in ran if o.wall_s is not None]
    return {"formulas": len(ran), "exact": len(exact),
            "share": len(exact) / len(ran) if ran else None,
            "median_test_nmse": median([o.test_nmse for o in ran if o.test_nmse is not None]),
            "total_wall_s": sum(walls), "median_wall_s": median(walls)}


def markdown(outcomes: Sequence[Outcome]) -> str:
    """The per-formula table and the totals line."""
    lines = ["| formula | vars | depth | truth | exact | test NMSE | answer | wall (s) |",
             "|---|---:|---:|---|---|---:|---|---:|"]
    for o in outcomes:
        hit = "**yes**" if o.exact else ("no" if o.status == "ok" else o.status)
        lines.append(f"| {o.item} | {o.extra.get('n_vars', '-')} | {o.extra.get('depth', '-')} | "
                     f"`{short(o.extra.get('display') or o.truth, 60)}` | {hit} | "
                     f"{fmt(o.test_nmse, '.1e')} | `{short(o.answer, 60)}` | "
                     f"{fmt(o.wall_s, '.1f')} |")
    t = totals(outcomes)
    share = "-" if t["share"] is None else f"{100 * t['share']:.0f}%"
    lines.append("")
    lines.append(f"exact: {t['exact']}/{t['formulas']} ({share}); median test NMSE of the answer "
                 f"{fmt(t['median_test_nmse'], '.2e')}; wall {fmt(t['total_wall_s'], '.0f')} s in "
                 f"all, median {fmt(t['median_wall_s'], '.1f')} s per formula")
    return "\n".join(lines)


def list_formulas(seed: int, indices: Sequence[int], family: str = DEFAULT_FAMILY) -> str:
    """The drawn formulas as a table, without running anything."""
    lines = ["| formula | vars | depth | rejected before | ranges | truth |",
             "|---|---:|---:|---:|---|---|"]
    for i in indices:
        f = draw_formula(seed, i, family)
        ranges = ", ".join(f"x{j}∈[{lo:g},{hi:g}]" for j, (lo, hi) in enumerate(f.ranges))
        lines.append(f"| {f.item} | {f.n_vars} | {f.depth} | {len(f.rejected)} | {ranges} | "
                     f"`{f.display}` |")
    return "\n".join(lines)


# --- parent side ------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=DEVELOPMENT_SEEDS[0])
    ap.add_argument("--family", choices=FAMILIES, default=DEFAULT_FAMILY,
                    help="srbench: random trees (default); nonlinear: laws with nonlinear "
                         "parameters inside functions (bench/nonlinear_family.py)")
    ap.add_argument("--count", type=int, default=50, help="formulas 0..count-1")
    ap.add_argument("--indices", type=int, nargs="+", default=None,
                    help="only these formula indices (instead of --count)")
    ap.add_argument("--budget", type=float, default=30.0, help="search.max_seconds per formula")
    ap.add_argument("--n", type=int, default=10_000, help="rows per formula")
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--grace", type=float, default=150.0,
                    help="seconds beyond 1.5 x budget before a worker is killed")
    ap.add_argument("--json", type=Path, default=None,
                    help="results file (default bench/synthetic_seed<SEED>.json); resumed")
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra sr-dist override for every run (e.g. "
                         "+model.inherit_constants=true); give such runs their own --json")
    ap.add_argument("--list", action="store_true", help="print the drawn formulas and stop")
    ap.add_argument("--worker", nargs=5, metavar=("SEED", "INDEX", "BUDGET", "N", "AGENTS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        exit_on_sigterm()
        import json

        seed, index, budget, n, agents = args.worker
        print("\n" + json.dumps(Outcome.from_json(
            worker(int(seed), int(index), float(budget), int(n), int(agents),
                   overrides=args.set, family=args.family)).to_json()),
            flush=True)
        return 0
    indices = list(args.indices) if args.indices is not None else list(range(args.count))
    if args.seed >= HELD_OUT_FROM:
        print(f"seed {args.seed} is held out (>= {HELD_OUT_FROM}): use it to judge, never to "
              "tune", file=sys.stderr)
    if args.list:
        print(list_formulas(args.seed, indices, args.family))
        return 0
    stem = "synthetic" if args.family == DEFAULT_FAMILY else f"synthetic_{args.family}"
    path = args.json or ROOT / "bench" / f"{stem}_seed{args.seed}.json"
    outcomes, runs = load_outcomes(path)
    runs.append({"command": " ".join([Path(sys.executable).name, *sys.argv]),
                 "started": datetime.now().isoformat(), "seed": args.seed})
    limit = 1.5 * args.budget + args.grace
    mine: list[Outcome] = []
    for i in indices:
        key = (item_name(args.seed, i, args.family), setting_label(), "sr-dist",
               float(args.budget), args.n)
        done = [o for o in outcomes if o.key() == key]
        if done:
            mine.append(done[0])
            print(f"{key[0]:12s} already in {path.name}: skipped", flush=True)
            continue
        started = time.time()
        sets = [part for value in args.set for part in ("--set", value)]
        got, why = run_worker([str(Path(__file__).resolve()), "--family", args.family, *sets,
                               "--worker", str(args.seed), str(i), str(args.budget), str(args.n),
                               str(args.agents)], limit)
        o = Outcome.from_json(got) if got is not None else Outcome(
            item=key[0], setting=key[1], tool="sr-dist", budget_s=args.budget, n=args.n,
            status="timeout" if why.startswith("killed") else "failed", error=why,
            truth=draw_formula(args.seed, i, args.family).truth, wall_s=time.time() - started)
        outcomes.append(o)
        mine.append(o)
        save_outcomes(path, outcomes, runs)
        print(f"{o.item:12s} {o.status:9s} exact={'yes' if o.exact else 'no '} "
              f"nmse={fmt(o.test_nmse, '.2e')} wall={fmt(o.wall_s, '.1f')}s "
              f"{short(o.answer, 80)} {o.error or ''}"[:240], flush=True)
    table = markdown(mine)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
