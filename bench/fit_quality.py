"""Fit quality of the evaluator on known skeletons: variable projection off vs on, in one run.

A fixed, seeded set of skeletons (hand-written classic shapes plus formulas drawn from a small
seeded grammar; 1-4 variables, 1-8 constants, linear and nonlinear constants mixed) gets random
true constants; data are sampled from each with the true constants. Each *true* skeleton is
then fitted by ``Evaluator`` with ``variable_projection`` off and on, alternating which goes
first, and the table reports per mode the share fitted exactly (train NMSE < 1e-10), the median
train NMSE, fits/s (fitting wall time, XLA compiles excluded and reported separately, after a
warm-up that compiles every bucket; one formula per call, so per-call overhead is in it) and mean
LM passes, plus on/off ratios. "batched fits/s" is the search's workload: every skeleton fitted
as a candidate (mostly wrong structures) on one skeleton's data, 64 formulas per call, on
``--batched`` datasets.

    python bench/fit_quality.py                 # 240 skeletons, 1000 rows, seed 0
    python bench/fit_quality.py --count 200 --n 2000 --seed 1 --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sr_dist.evaluator import Evaluator  # noqa: E402
from sr_dist.evaluator.evaluator import Bucket, EvaluatorOptions, bucket_for  # noqa: E402
from sr_dist.evaluator.program import find_linear, lower  # noqa: E402
from sr_dist.formula import evaluate_numpy, parse_formula  # noqa: E402

VARS = ("x0", "x1", "x2", "x3")
EXACT_NMSE = 1e-10

#: Hand-written classic shapes (constants named c0, c1, ... in order).
CLASSICS: tuple[str, ...] = (
    "c0*exp(-c1*x0)",
    "c0*sin(c1*x0 + c2)",
    "c0*sin(c1*x0 + c2) + c3",
    "c0/(1 + exp(-c1*(x0 - c2)))",
    "c0*x0**c1",
    "c0*x0/(c1 + x0)",
    "c0 + c1*x0 + c2*x0**2",
    "c0*exp(-(x0 - c1)**2/c2)",
    "c0*x0*x1/x2**2",
    "c0*cos(c1*x0)*exp(-c2*x1)",
    "c0*x0/(x1 + c1) + x2**2",
    "c0*x0**c1*x1**c2",
    "c0*log(c1*x0) + c2",
    "c0*tanh(c1*x0 + c2) + c3",
    "c0*x0 + c1*x1 + c2*x2 + c3*x3 + c4",
    "c0*exp(-c1*x0) + c2*exp(-c3*x1)",
    "c0*sqrt(x0**2 + c1*x1**2)",
    "(c0*x0 + c1)/(x1 + c2)",
    "c0*x0*x1 + c1*sin(c2*x2) + c3",
    "c0*(x0 - c1)**2 + c2",
    "c0/(x0**2 + c1) + c2*x1",
    "c0*x0*exp(-c1*x0) + c2",
    "c0*sin(c1*x0)*cos(c2*x1)",
    "c0*x0**2 + c1*x0*x1 + c2*x1**2 + c3*x2 + c4*x3 + c5",
    "c0*x0/(x1 + c1) + c2*x2/(x3 + c3)",
    "c0*exp(-c1*x0)*sin(c2*x1 + c3) + c4",
    "c0*(x0 + c1)",
    "x0/(c0 + x1)",
)


@dataclass(frozen=True)
class Skeleton:
    """A known formula, its true constants and where it came from."""

    text: str
    constants: tuple[float, ...]
    source: str  # "classic" or "grammar"
    n_vars: int
    n_linear: int


@dataclass(frozen=True)
class Data:
    """An in-memory dataset for ``Evaluator`` (the ``DatasetLike`` protocol)."""

    feature_names: tuple[str, ...]
    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    content_hash: str


class _Grammar:
    """A small seeded formula grammar: a sum of 1-3 terms (and maybe an intercept); a term is
    an optional linear constant times one or two factors drawn from variables, powers,
    saturations and unary functions of scaled variables (whose scales are nonlinear)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.k = 0

    def const(self) -> str:
        name = f"c{self.k}"
        self.k += 1
        return name

    def var(self, used: Sequence[str]) -> str:
        return str(used[int(self.rng.integers(len(used)))])

    def factor(self, used: Sequence[str]) -> str:
        r, v, w = self.rng, self.var(used), self.var(used)
        kind = int(r.integers(9))
        if kind == 0:
            return v
        if kind == 1:
            return f"{v}*{w}"
        if kind == 2:
            return f"{v}**{r.choice(['2', '3', '0.5', '-1'])}"
        if kind == 3:
            return f"{v}/({w} + {self.const()})"
        if kind == 4:
            fn = str(r.choice(["sin", "cos", "tanh", "sqrt", "log"]))
            return f"{fn}({self.const()}*{v})"
        if kind == 5:
            fn = str(r.choice(["sin", "cos", "log"]))
            return f"{fn}({self.const()}*{v} + {self.const()})"
        if kind == 6:
            return f"exp(-{self.const()}*{v})"
        if kind == 7:
            return f"{v}**{self.const()}"
        return f"exp(-{self.const()}*{v}*{w})"

    def formula(self, used: Sequence[str]) -> str:
        r = self.rng
        terms = []
        for _ in range(int(r.integers(1, 4))):
            parts = [self.factor(used) for _ in range(int(r.integers(1, 3)))]
            if r.random() < 0.8:
                parts.insert(0, self.const())
            terms.append("*".join(parts))
        if r.random() < 0.5:
            terms.append(self.const())
        return " + ".join(terms)


def _renumber(text: str, k: int) -> str:
    """Name constants c0..c{k-1} in order of first appearance (the grammar numbers them in
    creation order, which nesting can reorder)."""
    f = parse_formula(text, VARS)
    for i, name in enumerate(f.constants):
        text = text.replace(name, f"_k{i}_")
    for i in range(k):
        text = text.replace(f"_k{i}_", f"c{i}")
    return text


def _true_constants(text: str, rng: np.random.Generator) -> tuple[float, ...]:
    """Linear constants: magnitude 0.5-3 with a random sign; nonlinear ones: 0.5-2, positive,
    so logs, square roots and powers stay real on positive inputs."""
    f = parse_formula(text, VARS)
    linear = set(find_linear(f.tree))
    out = []
    for name in f.constants:
        if name in linear:
            out.append(float(rng.uniform(0.5, 3.0) * rng.choice([-1.0, 1.0])))
        else:
            out.append(float(rng.uniform(0.5, 2.0)))
    return tuple(out)


def _sample(text: str, consts: Sequence[float], n: int, seed: int) -> Data | None:
    """Rows from the skeleton with the true constants (70/15/15); ``None`` if the target is not
    finite or nearly constant (float32 could not fit it to 1e-10 NMSE: the mean swamps it)."""
    f = parse_formula(text, VARS)
    rng = np.random.default_rng(seed)
    X = rng.uniform(1.0, 3.0, size=(n, len(VARS)))
    with np.errstate(all="ignore"):
        y = evaluate_numpy(text, X, VARS, dict(zip(f.constants, consts)))
    y = np.asarray(y, dtype=np.float64) * np.ones(n)
    if not np.all(np.isfinite(y)) or np.max(np.abs(y)) > 1e6:
        return None
    if np.std(y) < 0.05 * math.sqrt(float(np.mean(y * y))):
        return None
    a, b = int(0.7 * n), int(0.85 * n)
    tag = hashlib.blake2b(f"{text}|{consts}|{n}|{seed}".encode(), digest_size=8).hexdigest()
    return Data(VARS, X[:a], y[:a], X[a:b], y[a:b], X[b:], y[b:], tag)


def skeletons(count: int, seed: int) -> list[Skeleton]:
    """The fixed set: every classic, then grammar draws until ``count`` (seeded)."""
    rng = np.random.default_rng(seed)
    texts: list[tuple[str, str]] = [(t, "classic") for t in CLASSICS]
    seen = set(CLASSICS)
    while len(texts) < count:
        used = list(VARS[: int(rng.integers(1, 5))])
        g = _Grammar(rng)
        text = g.formula(used)
        if not 1 <= g.k <= 8:
            continue
        text = _renumber(text, g.k)
        if text not in seen:
            seen.add(text)
            texts.append((text, "grammar"))
    out = []
    for text, source in texts[:count]:
        f = parse_formula(text, VARS)
        out.append(Skeleton(text, _true_constants(text, rng), source, len(f.variables),
                            len(find_linear(f.tree))))
    return out


@dataclass(frozen=True)
class Outcome:
    """One fit of one skeleton in one mode."""

    nmse: float
    iterations: int
    fit_s: float


def _fit(data: Data, text: str, vp: bool, subsample: int | None = None) -> tuple[Outcome, dict[str, float]]:
    ev = Evaluator(data, variable_projection=vp, **_options(subsample))
    res = ev.fit(text)
    st = ev.stats()
    nmse = res.train_nmse if res.train_nmse is not None and res.status == "ok" else math.inf
    return (Outcome(float(nmse), res.iterations, float(st["fit_s"])),
            {"compiles": st["compiles"], "compile_s": st["compile_s"]})


def _options(subsample: int | None) -> dict[str, int]:
    """Evaluator options beyond the defaults: ``subsample`` when given."""
    return {} if subsample is None else {"subsample": subsample}


def _summary(outs: list[Outcome]) -> dict[str, float]:
    fit_s = sum(o.fit_s for o in outs)
    return {
        "exact_share": sum(o.nmse < EXACT_NMSE for o in outs) / len(outs),
        "median_nmse": statistics.median(o.nmse for o in outs),
        "fits_per_s": len(outs) / fit_s if fit_s > 0 else 0.0,
        "mean_passes": statistics.fmean(o.iterations for o in outs),
        "fit_s": fit_s,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="rows per skeleton (70%% train)")
    ap.add_argument("--count", type=int, default=240, help="skeletons (at least 200)")
    ap.add_argument("--seed", type=int, default=0, help="skeleton, constant and data seed")
    ap.add_argument("--json", default=None, help="write per-skeleton results here")
    ap.add_argument("--batched", type=int, default=3,
                    help="datasets on which every skeleton is fitted as a candidate, in batches "
                         "(the search's workload), for the batched fits/s column")
    ap.add_argument("--subsample", type=int, default=None,
                    help="the evaluator's subsample (train rows a multi-start fit runs on before "
                         "it polishes on all; default: EvaluatorOptions'), to compare settings")
    args = ap.parse_args(argv)
    if args.count < len(CLASSICS):
        ap.error(f"--count must be at least {len(CLASSICS)} (the classic shapes)")
    sks = skeletons(args.count, args.seed)
    jobs = []
    for i, sk in enumerate(sks):
        data = None
        consts = sk.constants
        for attempt in range(20):  # redraw constants until the target is usable
            data = _sample(sk.text, consts, args.n, args.seed * 100_003 + i)
            if data is not None:
                break
            consts = _true_constants(sk.text, np.random.default_rng((args.seed, i, attempt)))
        if data is not None:
            jobs.append((Skeleton(sk.text, consts, sk.source, sk.n_vars, sk.n_linear), data))
    load0 = os.getloadavg()
    # Warm-up: one fit per shape bucket in each mode compiles everything before timing.
    compiles = {"compiles": 0, "compile_s": 0.0}
    t0 = time.perf_counter()
    warmed: set[Bucket] = set()
    for sk, data in jobs:
        f = parse_formula(sk.text, VARS)
        names = [f"c{j}" for j in range(len(f.canonical_constants))]
        key = bucket_for(lower(f.canonical_tree, VARS, names), EvaluatorOptions().const_buckets)
        if key not in warmed:
            warmed.add(key)
            for vp in (False, True):
                _, c = _fit(data, sk.text, vp, args.subsample)
                compiles["compiles"] += c["compiles"]
                compiles["compile_s"] += c["compile_s"]
    warm_s = time.perf_counter() - t0
    results: dict[bool, list[Outcome]] = {False: [], True: []}
    rows = []
    for i, (sk, data) in enumerate(jobs):
        order = (False, True) if i % 2 == 0 else (True, False)
        got = {}
        for vp in order:
            out, c = _fit(data, sk.text, vp, args.subsample)
            compiles["compiles"] += c["compiles"]
            compiles["compile_s"] += c["compile_s"]
            got[vp] = out
            results[vp].append(out)
        rows.append({"text": sk.text, "source": sk.source, "constants": sk.constants,
                     "n_vars": sk.n_vars, "n_linear": sk.n_linear,
                     "off": got[False].__dict__, "on": got[True].__dict__})
    # Throughput as a search uses the evaluator: every skeleton as a candidate (mostly wrong
    # structures) on one dataset, in batches, for a few datasets.
    batched: dict[bool, list[float]] = {False: [], True: []}
    texts = [sk.text for sk, _ in jobs]
    for j, (_, data) in enumerate(jobs[: args.batched]):
        for vp in ((False, True) if j % 2 == 0 else (True, False)):
            ev = Evaluator(data, variable_projection=vp, **_options(args.subsample))
            ev.fit_many(texts)
            st = ev.stats()
            compiles["compiles"] += st["compiles"]
            compiles["compile_s"] += st["compile_s"]
            batched[vp].append(float(st["fit_s"]))
    load1 = os.getloadavg()
    off, on = _summary(results[False]), _summary(results[True])
    for vp, s in ((False, off), (True, on)):
        total = sum(batched[vp])
        s["batched_fits_per_s"] = len(texts) * len(batched[vp]) / total if total else 0.0
    n_lin = [sk.n_linear for sk, _ in jobs]
    print(f"fit_quality: {len(jobs)} skeletons ({sum(s.source == 'classic' for s, _ in jobs)} "
          f"classic), n={args.n}, seed={args.seed}, subsample "
          f"{args.subsample or EvaluatorOptions().subsample}; with linear constants: "
          f"{sum(k > 0 for k in n_lin)}; warm-up {warm_s:.1f} s; compiles "
          f"{compiles['compiles']} ({compiles['compile_s']:.1f} s, excluded); load average "
          f"{load0[0]:.2f} -> {load1[0]:.2f}")
    print(f"{'mode':<14}{'exact(<1e-10)':>15}{'median NMSE':>14}{'fits/s':>10}{'passes':>9}"
          f"{'batched fits/s':>16}")
    for name, s in (("varpro off", off), ("varpro on", on)):
        b = f"{s['batched_fits_per_s']:.1f}" if args.batched else "-"
        print(f"{name:<14}{s['exact_share']:>14.1%} {s['median_nmse']:>13.2e}"
              f"{s['fits_per_s']:>10.1f}{s['mean_passes']:>9.1f}{b:>16}")

    def ratio(key: str) -> str:
        return f"{on[key] / off[key]:.2f}x" if off[key] else "-"

    print(f"{'on / off':<14}{ratio('exact_share'):>15}{'':>14}{ratio('fits_per_s'):>10}"
          f"{ratio('mean_passes'):>9}{ratio('batched_fits_per_s'):>16}")
    n_consts = [len(sk.constants) for sk, _ in jobs]
    groups = (("no linear constant", lambda i: n_lin[i] == 0),
              ("linear and nonlinear", lambda i: 0 < n_lin[i] < n_consts[i]),
              ("all linear", lambda i: n_lin[i] == n_consts[i] > 0))
    for label, pick in groups:
        idx = [i for i in range(len(jobs)) if pick(i)]
        if idx:
            a = sum(results[False][i].nmse < EXACT_NMSE for i in idx)
            b = sum(results[True][i].nmse < EXACT_NMSE for i in idx)
            pa = statistics.fmean(results[False][i].iterations for i in idx)
            pb = statistics.fmean(results[True][i].iterations for i in idx)
            print(f"  {label}: {len(idx)} skeletons, exact off {a}, on {b}; "
                  f"mean passes off {pa:.1f}, on {pb:.1f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "off": off, "on": on, "load": [load0, load1],
                       "compiles": compiles, "skeletons": rows}, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
