"""Benchmark: sr-dist's batched evaluator against per-formula fitting baselines.

For each n (rows of the Feynman I.29.16 dataset) and 256 formulas (seeded random trees plus
hand-written LLM-like candidates) it measures fits/s of

  (a) sympy -> jax, one ``jax.jit`` per formula (Levenberg-Marquardt with autodiff Jacobians),
  (b) numpy ``lambdify`` + ``scipy.optimize.least_squares(method="lm")`` per formula (LLM-SR's
      way of fitting a skeleton; finite differences),
  (c) sr-dist ``Evaluator.fit_many`` (all formulas in one call, on its default 512-row
      subsample), and (c0) the same on all training rows,
  (d) the same call with ``starts``: every ``ok`` formula again from its fitted constants, each
      10% off (seeded signs), as a genetic search's offspring inheriting their parents'
      constants are fitted (a local search: ``local_restarts`` lanes of at most ``local_iters``
      LM passes instead of 4 restarts of 40),

(a)-(c) with the same 4 restart points per formula, and the share of formulas where (c)'s train
MSE (re-evaluated in float64 numpy for every method) is within 1% of the better baseline, and
the share of (d)'s local fits within 1% of (c)'s train MSE. The
baselines run on a fixed stratified subset of the formulas (they are slow); sr-dist fits all of
them. It also measures value-only throughput in node-evaluations per second.

Run: ``.venv/bin/python bench/evaluator.py`` (add ``--quick`` for a smoke run). Prints a table and
rewrites its own table in the "## Evaluator" section of docs/benchmarks.md (between two HTML
comments; the measurements written by hand around it stay) unless ``--no-docs``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sr_dist.data import load_dataset  # noqa: E402
from sr_dist.evaluator import Evaluator  # noqa: E402
from sr_dist.evaluator.evaluator import initial_constants  # noqa: E402
from sr_dist.formula import Formula, evaluate_numpy, parse_formula  # noqa: E402

DATASET = "feynman:I.29.16"
RESTARTS = 4
MAX_ITERS = 40

# Hand-written candidates in the style an LLM proposes for
# x = sqrt(x1**2 + x2**2 - 2*x1*x2*cos(theta1 - theta2)) (law of cosines).
HAND_WRITTEN: tuple[str, ...] = (
    "a*x1 + b*x2 + c",
    "a*x1 + b*x2 + c*cos(theta1 - theta2) + d",
    "sqrt(a*x1**2 + b*x2**2 + c*x1*x2*cos(theta1 - theta2))",
    "a*sqrt(x1**2 + x2**2 - b*x1*x2*cos(theta1 - theta2))",
    "sqrt(x1**2 + x2**2 - k*x1*x2*cos(theta1 - theta2)) + c",
    "a*sqrt(x1**2 + x2**2) + b*cos(theta1 - theta2)",
    "a*(x1 + x2) + b*x1*x2*cos(theta1 - theta2) + c",
    "sqrt(abs(a*x1**2 + b*x2**2 + c*x1*x2*cos(d*(theta1 - theta2))))",
    "a*x1 + b*x2 + c*x1*x2 + d*cos(theta1) + e*cos(theta2)",
    "a*abs(x1 - x2) + b*(x1 + x2)*sin((theta1 - theta2)/2)**2",
    "a*x1*sin(b*(theta1 - theta2)) + c*x2",
    "(a*x1 + b*x2)*(1 - c*cos(theta1 - theta2))",
    "a*x1**2 + b*x2**2 + c*x1*x2 + d",
    "a*exp(b*x1) + c*exp(d*x2)",
    "a*log(x1 + x2) + b*cos(theta1 - theta2) + c",
    "a*x1 + b*x2 + c*sin(theta1)*sin(theta2) + d*cos(theta1)*cos(theta2)",
    "sqrt(a + b*x1**2 + c*x2**2)",
    "a*(x1**2 + x2**2)**p",
    "a*x1/(1 + b*x2) + c*x2",
    "a*tanh(b*x1) + c*tanh(d*x2) + e",
    "a*x1 + b*x2 - c*sqrt(x1*x2)*cos(theta1 - theta2)",
    "a*sqrt(x1**2 + x2**2)*(1 - b*cos(theta1 - theta2))**0.5",
    "a*x1 + b*x2*cos(theta1 - theta2) + c*x2*sin(theta1 - theta2)",
    "a*x1**b*x2**c",
    "a*(x1 + x2) + b*(x1 - x2)**2 + c*cos(theta1 - theta2)",
    "a*x1 + b*x2 + c*cos(d*theta1 + e*theta2)",
    "sqrt((x1 - a*x2*cos(theta1 - theta2))**2 + (b*x2*sin(theta1 - theta2))**2)",
    "a*x1 + b*x2 + c*x1*cos(theta1) + d*x2*cos(theta2) + e*theta1 + f*theta2",
    "a*(x1 + x2)*abs(sin(b*(theta1 - theta2)))",
    "a*x1*x2/(x1 + x2) + b*(x1 + x2)",
    "a + b*x1 + c*x2 + d*x1**2 + e*x2**2 + f*x1*x2",
    "a*sqrt(x1**2 + x2**2) + b*sqrt(x1*x2)*cos(theta1 - theta2) + c",
)


def random_formulas(count: int, variables: Sequence[str], seed: int) -> list[str]:
    """Seeded random expression trees (depth <= 4) with free constants ``a0, a1, ...``."""
    rng = np.random.default_rng(seed)
    binary = ("+", "-", "*", "/")
    unary = ("sin", "cos", "exp", "log", "sqrt", "tanh", "abs")
    out: list[str] = []
    while len(out) < count:
        n_const = [0]

        def leaf() -> str:
            u = rng.random()
            if u < 0.55:
                return str(rng.choice(variables))
            if u < 0.85:
                n_const[0] += 1
                return f"a{n_const[0] - 1}"
            return f"{rng.integers(1, 5)}"

        def tree(depth: int) -> str:
            if depth == 0 or rng.random() < 0.25:
                return leaf()
            u = rng.random()
            if u < 0.2:
                return f"{rng.choice(unary)}({tree(depth - 1)})"
            if u < 0.3:
                return f"({tree(depth - 1)})**2"
            op = str(rng.choice(binary))
            return f"({tree(depth - 1)} {op} {tree(depth - 1)})"

        text = f"a_s*{tree(4)} + a_o"
        if n_const[0] <= 6:
            out.append(text)
    return out


# ---------------------------------------------------------------- baselines
@dataclass
class Fit:
    constants: dict[str, float]
    seconds: float


def scipy_fit(f: Formula, X: np.ndarray, y: np.ndarray, names: Sequence[str],
              starts: np.ndarray) -> Fit:
    """(b): numpy lambdify + scipy least_squares (LM, finite differences), best of the starts."""
    import sympy
    from scipy.optimize import least_squares

    t0 = time.perf_counter()
    symbols = [sympy.Symbol(v, real=True) for v in names]
    consts = [sympy.Symbol(c, real=True) for c in f.constants]
    fn = sympy.lambdify(symbols + consts, f.to_sympy(), "numpy")
    cols = [X[:, i] for i in range(X.shape[1])]
    best: tuple[float, np.ndarray] = (math.inf, np.ones(len(consts)))
    if not consts:
        return Fit({}, time.perf_counter() - t0)

    def resid(c: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.broadcast_to(fn(*cols, *c), y.shape) - y

    for x0 in starts:
        try:
            res = least_squares(resid, x0, method="lm")
        except Exception:  # noqa: BLE001 - non-finite start etc.: this restart failed
            continue
        if np.isfinite(res.cost) and res.cost < best[0]:
            best = (float(res.cost), res.x)
    return Fit(dict(zip(f.constants, map(float, best[1]))), time.perf_counter() - t0)


def jax_jit_fit(f: Formula, X: np.ndarray, y: np.ndarray, names: Sequence[str],
                starts: np.ndarray) -> Fit:
    """(a): sympy -> jax, a fresh ``jax.jit`` per formula of a vmapped LM fit (autodiff J)."""
    import jax
    import jax.numpy as jnp
    import sympy

    t0 = time.perf_counter()
    symbols = [sympy.Symbol(v, real=True) for v in names]
    consts = [sympy.Symbol(c, real=True) for c in f.constants]
    if not consts:
        return Fit({}, time.perf_counter() - t0)
    fn = sympy.lambdify(symbols + consts, f.to_sympy(), "jax")
    Xj = jnp.asarray(X, jnp.float32)
    yj = jnp.asarray(y, jnp.float32)

    def resid(c: jax.Array) -> jax.Array:
        out = fn(*[Xj[:, i] for i in range(Xj.shape[1])], *[c[i] for i in range(len(consts))])
        r = jnp.broadcast_to(out, yj.shape) - yj
        return jnp.where(jnp.isfinite(r), r, 0.0)

    def lm(c0: jax.Array) -> tuple[jax.Array, jax.Array]:
        def loss(c: jax.Array) -> jax.Array:
            r = resid(c)
            return jnp.dot(r, r)

        def body(s):  # type: ignore[no-untyped-def]
            c, lam, cur, it, stall = s
            J = jax.jacfwd(resid)(c)
            r = resid(c)
            A = J.T @ J
            d = jnp.maximum(jnp.diag(A), 1e-12)
            step = jnp.linalg.solve(A + lam * jnp.diag(d), -J.T @ r)
            new = loss(c + step)
            ok = jnp.isfinite(new) & (new < cur)
            small = (~ok) | ((cur - new) < 1e-6 * cur)
            return (jnp.where(ok, c + step, c), jnp.where(ok, lam / 3, lam * 6),
                    jnp.where(ok, new, cur), it + 1, jnp.where(small, stall + 1, 0))

        s = (c0, jnp.float32(1e-3), loss(c0), 0, 0)
        s = jax.lax.while_loop(lambda s: (s[3] < MAX_ITERS) & (s[4] < 3), body, s)
        return s[0], s[2]

    fit = jax.jit(jax.vmap(lm))
    cs, losses = fit(jnp.asarray(starts, jnp.float32))
    losses = np.where(np.isfinite(np.asarray(losses)), np.asarray(losses), np.inf)
    best = int(np.argmin(losses))
    c = np.asarray(cs)[best]
    return Fit(dict(zip(f.constants, map(float, c))), time.perf_counter() - t0)


def starts_for(f: Formula) -> np.ndarray:
    """The 4 restart points sr-dist uses for this formula, in its original constant order."""
    canon = initial_constants(f.canonical, 0, RESTARTS, len(f.canonical_constants), 1.0)
    order = {name: i for i, name in enumerate(f.canonical_constants)}
    return canon[:, [order[c] for c in f.constants]] if f.constants else canon


def train_mse(f: Formula, constants: dict[str, float], X: np.ndarray, y: np.ndarray,
              names: Sequence[str]) -> float:
    pred = evaluate_numpy(f, X, names, constants)
    if not np.all(np.isfinite(pred)):
        return math.inf
    return float(np.mean((pred - y) ** 2))


# ---------------------------------------------------------------- runner
@dataclass
class Row:
    n: int
    method: str
    formulas: int
    seconds: float

    @property
    def fits_per_s(self) -> float:
        return self.formulas / self.seconds if self.seconds > 0 else math.inf


def stratified_subset(n_random: int, n_hand: int, k: int) -> list[int]:
    """Indices of a fixed subset: k/2 evenly spaced random trees and k/2 hand-written ones."""
    half = k // 2
    rnd = np.linspace(0, n_random - 1, half).round().astype(int).tolist()
    hand = (n_random + np.linspace(0, n_hand - 1, k - half).round().astype(int)).tolist()
    return rnd + hand


def run_size(n: int, texts: list[str], subset: list[int], jit_subset: list[int],
             log: Callable[[str], None]) -> dict[str, object]:
    ds = load_dataset(DATASET, n=n, seed=0)
    names = ds.feature_names
    X, y = ds.X_train, ds.y_train
    formulas = [parse_formula(t, names) for t in texts]

    # (c) sr-dist: cold (includes compiles) and warm (compiled buckets, empty result cache).
    t0 = time.perf_counter()
    ev = Evaluator(ds, restarts=RESTARTS, max_iters=MAX_ITERS)
    cold_results = ev.fit_many(texts)
    cold = time.perf_counter() - t0
    compile_s = ev.stats()["compile_s"]
    ev.clear_cache()
    t0 = time.perf_counter()
    results = ev.fit_many(texts)
    warm = time.perf_counter() - t0
    assert [r.canonical for r in results] == [r.canonical for r in cold_results]
    srd_mse = [train_mse(f, r.constants, X, y, names) if r.status in ("ok", "nonfinite")
               else math.inf for f, r in zip(formulas, results)]
    log(f"  n={n}: sr-dist {len(texts)} fits warm {warm:.2f}s, cold {cold:.2f}s "
        f"(compile {compile_s:.1f}s)")

    # (c0) the same fits on all training rows (``subsample`` at least the rows: off), the
    # default before 512 rows: what the subsample saves, and what it costs in fit quality.
    full_ev = Evaluator(ds, restarts=RESTARTS, max_iters=MAX_ITERS,
                        subsample=max(X.shape[0], 64), local_subsample=0)
    full_ev.fit_many(texts)
    full_ev.clear_cache()
    t0 = time.perf_counter()
    full_results = full_ev.fit_many(texts)
    full_s = time.perf_counter() - t0
    full_mse = [train_mse(f, r.constants, X, y, names) if r.status in ("ok", "nonfinite")
                else math.inf for f, r in zip(formulas, full_results)]
    sub_close = sum(not math.isfinite(b) or a <= 1.01 * b + 1e-9 * float(np.var(y))
                    for a, b in zip(srd_mse, full_mse))
    log(f"  n={n}: sr-dist {len(texts)} fits on all rows warm {full_s:.2f}s, "
        f"{sub_close} of the subsampled fits within 1% of them")

    # (d) local fits from starts 10% off the fitted constants (compiled first, timed warm).
    rng = np.random.default_rng(7)
    local_idx = [i for i, r in enumerate(results) if r.status == "ok" and r.constants]
    starts = [{k: float(v) * (1.0 + 0.1 * float(rng.choice([-1.0, 1.0])))
               for k, v in results[i].constants.items()} for i in local_idx]
    local_texts = [texts[i] for i in local_idx]
    ev.clear_cache()
    ev.fit_many(local_texts, starts=starts)
    ev.clear_cache()
    t0 = time.perf_counter()
    local_results = ev.fit_many(local_texts, starts=starts)
    local_s = time.perf_counter() - t0
    local_close = sum(
        r.status in ("ok", "nonfinite")
        and train_mse(formulas[i], r.constants, X, y, names) <= 1.01 * srd_mse[i] + 1e-9 * float(np.var(y))
        for i, r in zip(local_idx, local_results))
    log(f"  n={n}: sr-dist {len(local_texts)} local fits warm {local_s:.2f}s, "
        f"{local_close} within 1% of the full fit")

    # (b) scipy and (a) per-formula jit, on the subsets.
    scipy_mse: dict[int, float] = {}
    scipy_s = 0.0
    for i in subset:
        fit = scipy_fit(formulas[i], X, y, names, starts_for(formulas[i]))
        scipy_s += fit.seconds
        scipy_mse[i] = train_mse(formulas[i], fit.constants, X, y, names)
    log(f"  n={n}: scipy {len(subset)} fits {scipy_s:.2f}s")
    # (b1) the same with LLM-SR's single start from all ones: timing reference only.
    single_s = 0.0
    for i in subset:
        single_s += scipy_fit(formulas[i], X, y, names, starts_for(formulas[i])[:1]).seconds
    log(f"  n={n}: scipy, 1 start, {len(subset)} fits {single_s:.2f}s")
    jit_mse: dict[int, float] = {}
    jit_s = 0.0
    for i in jit_subset:
        fit = jax_jit_fit(formulas[i], X, y, names, starts_for(formulas[i]))
        jit_s += fit.seconds
        jit_mse[i] = train_mse(formulas[i], fit.constants, X, y, names)
    log(f"  n={n}: per-formula jit {len(jit_subset)} fits {jit_s:.2f}s")

    # Quality: sr-dist within 1% of the better baseline (or both baselines failed).
    var = float(np.var(y))
    wins = 0
    for i in subset:
        base = min(scipy_mse[i], jit_mse.get(i, math.inf))
        if not math.isfinite(base) or srd_mse[i] <= 1.01 * base + 1e-9 * var:
            wins += 1
    quality = wins / len(subset)

    # Value-only throughput: predictions of all formulas at their fitted constants.
    ok = [(f, r) for f, r in zip(formulas, results) if r.status == "ok"]
    consts = [r.constants for _, r in ok]
    parsed = [f for f, _ in ok]
    ev.evaluate_many(parsed, consts, X)  # warm the predict buckets
    t0 = time.perf_counter()
    reps = 3
    for _ in range(reps):
        ev.evaluate_many(parsed, consts, X)
    val_s = (time.perf_counter() - t0) / reps
    node_evals = sum(r.complexity or 0 for _, r in ok) * X.shape[0]
    return {
        "n": n, "n_train": X.shape[0],
        "rows": [Row(n, "(a) sympy->jax, jit per formula", len(jit_subset), jit_s),
                 Row(n, "(b) numpy+scipy least_squares", len(subset), scipy_s),
                 Row(n, "(b1) numpy+scipy, 1 start only (reference)", len(subset), single_s),
                 Row(n, "(c) sr-dist fit_many (warm)", len(texts), warm),
                 Row(n, "(c) sr-dist fit_many (cold, incl. compile)", len(texts), cold),
                 Row(n, "(d) sr-dist fit_many with starts 10% off (warm, local)", len(local_texts),
                     local_s),
                 Row(n, "(c0) sr-dist fit_many on all training rows (warm, no subsample)",
                     len(texts), full_s)],
        "subsample_quality": sub_close / len(texts),
        "quality": quality, "local_quality": local_close / max(len(local_texts), 1), "subset": len(subset), "compile_s": compile_s,
        "node_evals_per_s": node_evals / val_s, "value_s": val_s,
        "status": {s: sum(r.status == s for r in results) for s in ("ok", "nonfinite",
                                                                     "invalid", "error")},
        "stats": ev.stats(),
    }


def render(reports: list[dict[str, object]], command: str) -> str:
    lines = [
        "| n (train rows) | method | formulas timed | fits/s | sr-dist speed-up | "
        "sr-dist within 1% of better baseline |",
        "|---|---|---|---|---|---|",
    ]
    for rep in reports:
        rows: list[Row] = rep["rows"]  # type: ignore[assignment]
        warm = next(r for r in rows if r.method.startswith("(c) sr-dist fit_many (warm)")).fits_per_s
        for row in rows:
            ratio = f"{warm / row.fits_per_s:.1f}x" if row.method.startswith(("(a)", "(b")) else ""
            q = f"{rep['quality']:.0%} of {rep['subset']}" if row.method.startswith(
                "(c) sr-dist fit_many (warm)") else ""
            if row.method.startswith("(c0)"):
                ratio = f"(c) {warm / row.fits_per_s:.1f}x"
                q = f"(c) within 1% of (c0) on {rep['subsample_quality']:.0%} of {row.formulas}"
            if row.method.startswith("(d)"):
                ratio = f"{row.fits_per_s / warm:.1f}x (c)"
                q = f"{rep['local_quality']:.0%} of {row.formulas} within 1% of (c)"
            lines.append(f"| {rep['n']} ({rep['n_train']}) | {row.method} | {row.formulas} | "
                         f"{row.fits_per_s:.2f} | {ratio} | {q} |")
    lines.append("")
    lines.append("| n (train rows) | value-only node-evaluations/s | compile s (cold) | "
                 "statuses |")
    lines.append("|---|---|---|---|")
    for rep in reports:
        lines.append(f"| {rep['n']} ({rep['n_train']}) | {rep['node_evals_per_s']:.3g} | "
                     f"{rep['compile_s']:.1f} | {rep['status']} |")
    return "\n".join(lines)


#: The block of docs/benchmarks.md this script owns; the hand-written measurements around it
#: in the "## Evaluator" section stay as they are.
BEGIN_MARK = "<!-- bench/evaluator.py writes from here: -->"
END_MARK = "<!-- bench/evaluator.py writes up to here. -->"


def write_docs(table: str, command: str, notes: str, path: Path | None = None) -> None:
    """Put this run's table between :data:`BEGIN_MARK` and :data:`END_MARK` in the "## Evaluator"
    section of ``path`` (docs/benchmarks.md), adding the marks (and the section) where missing;
    nothing outside them is changed."""
    path = path or ROOT / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{BEGIN_MARK}\n\nCommand: `{command}`\n\n{notes}\n\n{table}\n\n{END_MARK}"
    if BEGIN_MARK in text and END_MARK in text.split(BEGIN_MARK, 1)[1]:
        head, _, rest = text.partition(BEGIN_MARK)
        text = head + block + rest.split(END_MARK, 1)[1]
    elif "## Evaluator" in text:  # the section without the marks: the block goes at its end
        head, _, rest = text.partition("## Evaluator")
        body, sep, tail = rest.partition("\n## ")
        text = head + "## Evaluator" + body.rstrip("\n") + "\n\n" + block + "\n" + sep + tail
    else:
        text = text.rstrip("\n") + "\n\n## Evaluator\n\n" + block + "\n"
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--formulas", type=int, default=256)
    ap.add_argument("--baseline-subset", type=int, default=32)
    ap.add_argument("--jit-subset", type=int, default=16)
    ap.add_argument("--quick", action="store_true", help="n=1000 only, 32 formulas, 8 baselines")
    ap.add_argument("--no-docs", action="store_true")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.quick:
        args.sizes, args.formulas, args.baseline_subset, args.jit_subset = "1000", 32, 8, 4
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    variables = ("x1", "x2", "theta1", "theta2")
    n_hand = min(len(HAND_WRITTEN), args.formulas // 2)
    texts = random_formulas(args.formulas - n_hand, variables, seed=1) + list(HAND_WRITTEN[:n_hand])
    subset = stratified_subset(args.formulas - n_hand, n_hand, args.baseline_subset)
    jit_subset = subset[:: max(1, len(subset) // args.jit_subset)][: args.jit_subset]
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    reports = []
    t_all = time.perf_counter()
    for n in sizes:
        log(f"n={n} ...")
        reports.append(run_size(n, texts, subset, jit_subset, log))
    command = " ".join([".venv/bin/python bench/evaluator.py",
                        *(argv if argv is not None else sys.argv[1:])])
    table = render(reports, command)
    print(table)
    for rep in reports:
        rows: list[Row] = rep["rows"]  # type: ignore[assignment]
        print(f"n={rep['n']}: sr-dist/jit = {rows[3].fits_per_s / rows[0].fits_per_s:.1f}x, "
              f"sr-dist/scipy = {rows[3].fits_per_s / rows[1].fits_per_s:.1f}x "
              f"(1-start scipy: {rows[3].fits_per_s / rows[2].fits_per_s:.1f}x), "
              f"quality {rep['quality']:.0%}, value-only {rep['node_evals_per_s']:.3g} "
              "node-evals/s")
    total = time.perf_counter() - t_all
    print(f"total {total:.0f}s")
    notes = (
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()} with "
        f"{os.cpu_count()} CPU cores (JAX CPU), dataset `{DATASET}` (70/15/15 split; n is the "
        f"total rows), {args.formulas} formulas ({args.formulas - n_hand} seeded random trees + "
        f"{n_hand} hand-written LLM-like candidates), {RESTARTS} restarts and at most "
        f"{MAX_ITERS} LM iterations for sr-dist and the jit baseline (scipy: its own defaults), "
        "the same start points for (a), (b) and (c); (b1) is scipy from all ones only, LLM-SR's "
        "protocol, timed for reference (4x less work than (b), so the speed-up is smaller). "
        "sr-dist fits all "
        f"formulas; scipy runs on a fixed stratified subset of {len(subset)} and the per-formula "
        f"jit on {len(jit_subset)} of those (the baselines are slow). Quality = share of the "
        "subset where sr-dist's train MSE (recomputed in float64 numpy) is within 1% of the "
        "better baseline's; for (d), the share of its local fits within 1% of (c)'s train MSE "
        "(its speed-up is over (c)). (c) fits on a subsample of at most 512 training rows "
        "(`evaluator.subsample`, refined on all of them when near-exact); (c0) is the same on all "
        "training rows, its quality column the share of formulas where (c)'s all-rows train MSE "
        "is within 1% of (c0)'s. Warm = compiled buckets, empty result cache; cold includes the XLA "
        "compiles. Value-only = `evaluate_many` of every `ok` (pre-parsed) formula at its fitted "
        "constants on the train rows, "
        "node-evaluations = tree nodes x rows. GPU figures were not measured. "
        f"Whole run: {total:.0f} s."
    )
    if not args.no_docs:
        write_docs(table, command, notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
