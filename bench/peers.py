"""sr-dist against the symbolic-regression tools users would pick instead, on the same problems,
budgets and machine.

For every (noise level, problem, tool) the script starts a *worker process* (this file with
``--worker``) that loads ``feynman:<problem>`` with ``n`` rows (seed 0, split 70/15/15, the same
data for every tool), runs the tool under the wall-clock budget, scores its final model on the
test split and prints one JSON line. The parent kills a worker that overruns
``budget * 1.5 + --grace`` seconds (status ``timeout``), appends each result to ``--json`` at
once (so an interrupted run resumes: cells already in the file are skipped) and writes the
markdown tables to ``--markdown``.

Tools:

* ``sr-dist``: the real pipeline, ``run_search`` on a new local Ray cluster with a Hydra-composed
  config (``model=evolve``, ``search.agents=2``, ``search.max_seconds=budget``). Ray start-up and
  the evaluator's warm-up come before ``max_seconds`` (the search layer's definition of the
  budget); the table's ``wall`` column and the time to the first exact hit count from the worker
  process's start, so they include all of it.
* ``pyoperon``: ``pyoperon.sklearn.SymbolicRegressor`` with its defaults except
  ``max_time=budget``, unlimited generations/evaluations (time is the only stop),
  ``n_threads=2`` (the machine's cores) and the function set of the formula language
  (``add,sub,mul,div,constant,variable,sin,cos,exp,log,sqrt,square,tanh``).
* ``gplearn``: ``gplearn.genetic.SymbolicRegressor`` with ``population_size=1000`` and
  ``warm_start=True``, one generation at a time until the budget is spent (gplearn has no time
  limit), function set ``add,sub,mul,div,sqrt,log,sin,cos,neg,inv``, otherwise its defaults.
* ``pysr``: tried if ``import pysr`` works; it needs a Julia install and downloads Julia packages
  at first use, so on a machine without that it is reported ``not_run`` with the error.

Scores for every tool: exact recovery (``sr_dist.results.recovery.exact_recovery`` of the final
model, its float literals turned into named constants; constants snapped to closed forms within
2e-6 relative at noise 0 and 2e-3 with noise; tried only for models whose test NMSE is below
``max(1e-10, 10 * noise**2)``, and sympy gets ``CHECK_S`` seconds per model, after which the
model counts as not exact and the cell says so), test NMSE, R² and Acc0.1
(``sr_dist.results.regression_metrics``), candidates evaluated as each tool counts them
(sr-dist: rows written; pyoperon: ``stats_['evaluation_count']``; gplearn: population x
generations), time to the first exact hit (sr-dist: ``created_at`` of the first exactly
recovering candidate in Parquet; the peers only expose their final model, so theirs is their
total time when that model is exact).

sr-dist's final model is ``sr_dist.results.select_candidate(rule="parsimony")``, the PySR-style
pick on the validation Pareto front (on noisy data the lowest validation NMSE is usually a
longer formula fitting the noise); the lowest-NMSE answer and whether it was exact are kept in
the cell's ``extra.lowest_val_nmse`` and counted under the tables. pyoperon, gplearn and PySR
answer with their own default final model.

Usage:
    .venv/bin/python bench/peers.py                                  # full: 34 problems, noise 0 and 0.01, 120 s
    .venv/bin/python bench/peers.py --budget 15 --noise 0 --tools sr-dist pyoperon gplearn
    .venv/bin/python bench/peers.py --budget 5 --problems I.12.2 II.6.15b --json /tmp/p.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from peers_lib import (  # noqa: E402
    PROBLEMS,
    TOOLS,
    PeerResult,
    gplearn_to_formula,
    literals_to_constants,
    markdown_tables,
    operon_to_formula,
    recovery_rel_tol,
    result_key,
)

OPERON_SYMBOLS = "add,sub,mul,div,constant,variable,sin,cos,exp,log,sqrt,square,tanh"
GPLEARN_FUNCTIONS = ("add", "sub", "mul", "div", "sqrt", "log", "sin", "cos", "neg", "inv")
#: sr-dist candidates checked for the first exact hit: ok rows whose validation NMSE is at most
#: this (noise 0) or 3x the noise floor (noise² of NMSE), simplest first, at most this many
#: distinct structures and this many seconds of symbolic checks in all.
SRDIST_HIT_NMSE = 1e-8
SRDIST_HIT_CHECKS = 40
SRDIST_HIT_CHECK_S = 40.0
#: sr-dist's final answer: ``sr_dist.results.select_candidate`` with this rule (``parsimony``:
#: PySR's score rule on the validation Pareto front; ``best`` would be the lowest val NMSE).
SRDIST_SELECT = "parsimony"
#: ``time_to_exact_kind`` of a tool that only exposes its final model.
FINAL_MODEL_KIND = "end of fit (final model only)"
#: Seconds sympy may spend deciding one model (sympy's simplify can run for minutes on a large
#: expression that fits noisy data); a check that runs out counts as not exact and is recorded.
CHECK_S = 8.0


def _exact_within(seconds: float, formula: str, constants: dict[str, float], ds: Any,
                  noise: float) -> bool | None:
    """``exact_recovery`` with a deadline (``scoring.exact_within``): True/False, or None when
    sympy did not decide in time."""
    from scoring import exact_within

    return exact_within(seconds, formula, constants, _truth(ds), ds.feature_names,
                        recovery_rel_tol(noise))


# --- worker side ------------------------------------------------------------------------------

def _load(problem: str, n: int, noise: float) -> Any:
    from sr_dist.data import load_dataset

    return load_dataset(f"feynman:{problem}", n=n, seed=0, noise=noise)


def _truth(ds: Any) -> str:
    gt = ds.ground_truth_formula()
    return gt.text if gt is not None else ""


def _score(base: dict[str, Any], ds: Any, formula: str | None, constants: dict[str, float],
           pred_test: Any, noise: float) -> dict[str, Any]:
    from sr_dist.results import regression_metrics

    m = regression_metrics(ds.y_test, pred_test)
    # The symbolic check only runs for models that fit the data to the noise floor: a model that
    # does not cannot be the truth, and sympy can take minutes on a large wrong expression.
    near = m["nmse"] is not None and m["nmse"] < max(1e-10, 10.0 * noise**2)
    decided = _exact_within(CHECK_S, formula, constants, ds, noise) if formula and near else False
    extra = dict(base.get("extra") or {})
    if decided is None:
        extra["exact_check"] = f"sympy undecided after {CHECK_S:g} s (counted not exact)"
    return {**base, "extra": extra, "formula": formula, "constants": constants,
            "exact": bool(decided), "test_nmse": m["nmse"], "test_r2": m["r2"],
            "acc_0_1": m["acc_0.1"]}


def _final_model(base: dict[str, Any], ds: Any, formula: str | None,
                 constants: dict[str, float], pred_test: Any, noise: float,
                 fit_end_s: float) -> dict[str, Any]:
    """A peer's cell: it only hands back its final model, so its time to an exact hit is the
    end of its fit (seconds from the worker's start), and only when that model is exact."""
    extra = {**(base.get("extra") or {}), "fit_end_s": fit_end_s}
    res = _score({**base, "extra": extra}, ds, formula, constants, pred_test, noise)
    if res["exact"]:
        res["time_to_exact_s"] = fit_end_s
        res["time_to_exact_kind"] = FINAL_MODEL_KIND
    return res


def run_srdist(problem: str, noise: float, budget: float, n: int, t0: float) -> dict[str, Any]:
    import pyarrow.dataset as pads
    from hydra import compose, initialize_config_module

    from sr_dist.formula import evaluate_numpy, parse_formula
    from sr_dist.results import open_results, read_run, select_candidate
    from sr_dist.search import run_search

    ds = _load(problem, n, noise)
    started = datetime.fromtimestamp(t0, tz=UTC)
    with tempfile.TemporaryDirectory(prefix="peers-srdist-") as out:
        overrides = [f"dataset.source=feynman:{problem}", f"dataset.n={n}",
                     f"dataset.noise={noise}", "dataset.seed=0", "model=evolve",
                     "search.agents=2", f"search.max_seconds={budget}", f"results.path={out}",
                     "search.progress_interval_s=3600"]
        with initialize_config_module("sr_dist.conf", version_base="1.3"):
            cfg = compose("config", overrides=overrides)
        summary = run_search(cfg, stream=io.StringIO(), handle_signals=False)
        table = open_results(out).candidates.to_table(
            filter=(pads.field("run_id") == summary.run_id) & (pads.field("status") == "ok"),
            columns=["candidate_id", "status", "expression", "canonical", "complexity",
                     "constants", "val_nmse", "created_at"])
        rows = [r for r in table.to_pylist() if r["val_nmse"] is not None]
        record = read_run(out, summary.run_id)
    chosen = select_candidate(table, rule=SRDIST_SELECT)
    base = {"candidates": summary.candidates, "search_s": summary.search_s,
            "extra": {"stop_reason": summary.stop_reason, "run_wall_s": summary.wall_s,
                      "evaluator_fits": summary.evaluator.get("fits"), "select": SRDIST_SELECT}}
    best = summary.best
    if best is None or chosen is None:
        return {**base, "status": "failed", "error": "no ok candidate"}
    constants = {k: float(v) for k, v in json.loads(chosen["constants"] or "{}").items()
                 if v is not None}
    formula = parse_formula(chosen["expression"], ds.feature_names)
    pred = evaluate_numpy(formula, ds.X_test, ds.feature_names, constants)
    shown = ", ".join(f"{k}={v:.6g}" for k, v in constants.items())
    res = _score({**base, "model": f"{chosen['expression']}  [{shown}]"}, ds,
                 chosen["expression"], constants, pred, noise)
    if chosen["candidate_id"] != best.candidate_id:  # what the lowest-NMSE rule would answer
        best_consts = {k: float(v) for k, v in best.constants.items() if v is not None}
        res["extra"]["lowest_val_nmse"] = {
            "formula": best.expression, "constants": best_consts,
            "exact": _exact_within(CHECK_S, best.expression, best_consts, ds, noise)}
    # First exact hit: distinct structures that fit to the floor, simplest first, each checked
    # once (every row of an exact structure counts), within a total time for the checks.
    limit = SRDIST_HIT_NMSE if noise == 0 else 3.0 * noise * noise
    rows.sort(key=lambda r: (r["complexity"] or 0, r["val_nmse"]))
    seen: dict[str, bool] = {}
    undecided = 0
    first: datetime | None = None
    checks_end = time.time() + SRDIST_HIT_CHECK_S
    for r in rows:
        key = r["canonical"] or r["expression"]
        if r["val_nmse"] > limit:
            continue
        if key not in seen:
            left = checks_end - time.time()
            if len(seen) >= SRDIST_HIT_CHECKS or left <= 0.5:
                continue
            consts = {k: float(v) for k, v in json.loads(r["constants"] or "{}").items()
                      if v is not None}
            decided = _exact_within(min(CHECK_S, left), r["expression"], consts, ds, noise)
            undecided += decided is None
            seen[key] = bool(decided)
        if seen[key] and (first is None or r["created_at"] < first):
            first = r["created_at"]
    res["extra"]["hit_checks"] = {"structures": len(seen), "undecided": undecided}
    if first is not None:
        res["time_to_exact_s"] = (first - started).total_seconds()
        res["time_to_exact_kind"] = "first exact candidate (from process start)"
        res["exact_any"] = True
        if record is not None:
            res["extra"]["time_to_exact_from_run_row_s"] = (
                first - record.started_at).total_seconds()
    return res


def run_pyoperon(problem: str, noise: float, budget: float, n: int, t0: float) -> dict[str, Any]:
    from pyoperon.sklearn import SymbolicRegressor

    ds = _load(problem, n, noise)
    model = SymbolicRegressor(allowed_symbols=OPERON_SYMBOLS, max_time=max(1, int(budget)),
                              generations=10**9, max_evaluations=10**12, n_threads=2,
                              random_state=0)
    model.fit(ds.X_train, ds.y_train)
    fit_end = time.time()
    text = model.get_model_string(model.model_, 16, names=list(ds.feature_names))
    formula, constants = literals_to_constants(operon_to_formula(text))
    pred = model.predict(ds.X_test)
    stats = dict(getattr(model, "stats_", {}) or {})
    return _final_model({"model": text, "candidates": stats.get("evaluation_count"),
                         "search_s": fit_end - t0, "extra": {"stats": stats}},
                        ds, formula, constants, pred, noise, fit_end - t0)


def run_gplearn(problem: str, noise: float, budget: float, n: int, t0: float) -> dict[str, Any]:
    from gplearn.genetic import SymbolicRegressor

    ds = _load(problem, n, noise)
    population = 1000
    model = SymbolicRegressor(population_size=population, generations=1, warm_start=True,
                              function_set=GPLEARN_FUNCTIONS,
                              feature_names=list(ds.feature_names), random_state=0, n_jobs=1)
    start = time.time()
    generations = 0
    while True:
        model.set_params(generations=generations + 1)
        model.fit(ds.X_train, ds.y_train)
        generations += 1
        per_gen = (time.time() - start) / generations
        if time.time() - start + per_gen > budget:
            break
    fit_end = time.time()
    program = str(model._program)
    formula, constants = literals_to_constants(gplearn_to_formula(program))
    pred = model.predict(ds.X_test)
    return _final_model({"model": program, "candidates": population * generations,
                         "search_s": fit_end - start, "extra": {"generations": generations}},
                        ds, formula, constants, pred, noise, fit_end - t0)


def run_pysr(problem: str, noise: float, budget: float, n: int, t0: float) -> dict[str, Any]:
    try:
        import pysr  # noqa: F401
        from pysr import PySRRegressor
    except Exception as exc:  # noqa: BLE001 - an import failure is the result
        return {"status": "not_run", "error": f"import pysr failed: {type(exc).__name__}: "
                                              f"{str(exc).splitlines()[0][:300]}"}
    ds = _load(problem, n, noise)
    model = PySRRegressor(timeout_in_seconds=budget, niterations=10**6, procs=2,
                          binary_operators=["+", "-", "*", "/"],
                          unary_operators=["sin", "cos", "exp", "log", "sqrt"],
                          random_state=0, deterministic=False, progress=False)
    model.fit(ds.X_train, ds.y_train, variable_names=list(ds.feature_names))
    fit_end = time.time()
    text = str(model.sympy())
    formula, constants = literals_to_constants(text)
    pred = model.predict(ds.X_test)
    return _final_model({"model": text, "search_s": fit_end - t0}, ds, formula, constants,
                        pred, noise, fit_end - t0)


RUNNERS: dict[str, Callable[[str, float, float, int, float], dict[str, Any]]] = {
    "sr-dist": run_srdist, "pyoperon": run_pyoperon, "gplearn": run_gplearn, "pysr": run_pysr,
}


def worker(tool: str, problem: str, noise: float, budget: float, n: int) -> int:
    """Run one cell and print its PeerResult as the last stdout line."""
    t0 = time.time()
    base = {"tool": tool, "problem": problem, "noise": noise, "budget_s": budget, "n": n}
    try:
        ds = _load(problem, n, noise)
        base["truth"] = _truth(ds)
        found = RUNNERS[tool](problem, noise, budget, n, t0)
        found.setdefault("status", "ok")
        extra = dict(found.pop("extra", {}) or {})
        if "exact_any" in found:
            extra["exact_any"] = found.pop("exact_any")
        result = PeerResult(**base, **found, wall_s=time.time() - t0, extra=extra)
    except Exception as exc:  # noqa: BLE001 - a crashed tool is a result, not a crash
        result = PeerResult(**base, status="failed",
                            error=f"{type(exc).__name__}: {exc}"[:500],
                            wall_s=time.time() - t0,
                            extra={"traceback": traceback.format_exc()[-2000:]})
    sys.stdout.flush()
    print("\n" + json.dumps(result.to_json()), flush=True)
    return 0


# --- parent side ------------------------------------------------------------------------------

def _load_json(path: Path) -> tuple[list[PeerResult], list[dict[str, Any]]]:
    """The cells measured so far and one metadata record per earlier invocation."""
    if not path.is_file():
        return [], []
    data = json.loads(path.read_text())
    runs = data.get("runs")
    if runs is None:  # files written before per-run records: one "meta" for everything
        runs = [data["meta"]] if data.get("meta") else []
    return [PeerResult.from_json(r) for r in data.get("results", [])], list(runs)


def _save_json(path: Path, results: Sequence[PeerResult], runs: Sequence[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"runs": list(runs), "results": [r.to_json() for r in results]},
                              indent=1))
    os.replace(tmp, path)


def run_cell(tool: str, problem: str, noise: float, budget: float, n: int,
             grace: float) -> PeerResult:
    """One worker process with a hard time limit; its last stdout line is the result."""
    limit = budget * 1.5 + grace
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", tool, problem,
           str(noise), str(budget), str(n)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env,
                              cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return PeerResult(tool=tool, problem=problem, noise=noise, budget_s=budget, n=n,
                          status="timeout", error=f"killed after {limit:.0f} s",
                          wall_s=time.time() - t0)
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return PeerResult.from_json(json.loads(line))
            except (ValueError, TypeError):
                break
    return PeerResult(tool=tool, problem=problem, noise=noise, budget_s=budget, n=n,
                      status="failed", wall_s=time.time() - t0,
                      error=f"worker exited {proc.returncode} without a result: "
                            f"{proc.stderr.strip()[-400:]}")


def _selected(r: PeerResult, args: argparse.Namespace) -> bool:
    """Whether a stored cell is one the command line asks about."""
    return (r.problem in args.problems and r.tool in args.tools and r.noise in args.noise
            and r.budget_s == args.budget and r.n == args.n)


def recheck(results: Sequence[PeerResult], seconds: float,
            args: argparse.Namespace) -> list[PeerResult]:
    """Cells whose final model's symbolic check ran out of time, checked again with a longer
    deadline (in this process, main thread; the result and how it was decided are recorded)."""
    import dataclasses

    out: list[PeerResult] = []
    for r in results:
        last_verdict = str(r.extra.get("exact_check", "")).split("; ")[-1]
        pending = (r.status == "ok" and "undecided" in last_verdict and bool(r.formula)
                   and _selected(r, args))
        if not pending:
            out.append(r)
            continue
        ds = _load(r.problem, r.n, r.noise)
        t0 = time.time()
        decided = _exact_within(seconds, r.formula or "", dict(r.constants), ds, r.noise)
        verdict = {None: "undecided", True: "exact", False: "not exact"}[decided]
        extra = {**r.extra, "exact_check": f"{r.extra['exact_check']}; rechecked with "
                                           f"{seconds:g} s: {verdict} ({time.time() - t0:.1f} s)"}
        changes: dict[str, Any] = {"extra": extra, "exact": bool(decided)}
        if decided and r.time_to_exact_s is None and r.extra.get("fit_end_s") is not None:
            changes["time_to_exact_s"] = r.extra["fit_end_s"]
            changes["time_to_exact_kind"] = FINAL_MODEL_KIND
        print(f"{r.tool:9s} {r.problem:10s} noise={r.noise:g} recheck: {verdict}", flush=True)
        out.append(dataclasses.replace(r, **changes))
    return out


def _load_average() -> str:
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=120.0, help="seconds per problem and tool")
    ap.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.01])
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    ap.add_argument("--tools", nargs="+", default=list(TOOLS), choices=list(TOOLS))
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--grace", type=float, default=90.0,
                    help="extra seconds before a worker is killed (start-up, scoring)")
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "peers_results.json")
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--recheck", type=float, metavar="SECONDS", default=None,
                    help="re-run, with this many seconds each, the symbolic checks that ran out "
                         "of time (cells whose extra.exact_check says undecided), then print "
                         "the tables; no tool is run")
    ap.add_argument("--worker", nargs=5, metavar=("TOOL", "PROBLEM", "NOISE", "BUDGET", "N"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        tool, problem, noise, budget, n = args.worker
        return worker(tool, problem, float(noise), float(budget), int(n))
    results, runs = _load_json(args.json)
    if args.recheck is not None:
        results = recheck(results, args.recheck, args)
        _save_json(args.json, results, runs)
        wanted = [r for r in results if _selected(r, args)]
        print(markdown_tables(wanted, [t for t in TOOLS if t in args.tools]))
        return 0
    have = {r.key() for r in results}
    meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": f"{os.cpu_count()} CPU cores", "started": datetime.now().isoformat()}
    loads: list[str] = []
    unavailable: dict[str, PeerResult] = {}
    for noise in args.noise:
        for problem in args.problems:
            for tool in args.tools:
                key = result_key(tool, problem, noise, args.budget, args.n)
                if key in have:
                    continue
                if tool in unavailable:  # a tool that cannot import is not retried per cell
                    prev = unavailable[tool]
                    r = PeerResult(tool=tool, problem=problem, noise=noise,
                                   budget_s=args.budget, n=args.n, status="not_run",
                                   error=prev.error)
                else:
                    r = run_cell(tool, problem, noise, args.budget, args.n, args.grace)
                    if r.status == "not_run":
                        unavailable[tool] = r
                results.append(r)
                have.add(key)
                loads.append(_load_average())
                meta["load_averages"] = loads
                _save_json(args.json, results, [*runs, meta])
                tte = "-" if r.time_to_exact_s is None else f"{r.time_to_exact_s:.1f}"
                print(f"{tool:9s} {problem:10s} noise={noise:g} {r.status:8s} "
                      f"exact={'yes' if r.exact else 'no ':3s} "
                      f"nmse={r.test_nmse if r.test_nmse is not None else float('nan'):.2e} "
                      f"t_exact={tte} wall={r.wall_s or 0:.1f}s "
                      f"load={loads[-1]} {r.error or ''}"[:220], flush=True)
    wanted = [r for r in results if _selected(r, args)]
    table = markdown_tables(wanted, [t for t in TOOLS if t in args.tools])
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
