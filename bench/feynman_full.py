"""sr-dist on all 100 equations of the AI Feynman table, as a user would run it, with and
without units; pyoperon and gplearn on the problems it misses.

For every (problem, units mode) a worker process (this file with ``--worker``) loads
``feynman:<problem>`` (``--n`` rows, default 10,000, seed 0, split 70/15/15, ``--noise``
default 0), runs ``run_search`` on a new local Ray cluster (``model=evolve``,
``search.agents=2``, ``search.max_seconds=--budget``, default 30) and scores the answer sr-dist
hands the user, the documented selection rule (``bench/scoring.py``): exact = the snapped answer
symbolically equal to the table's formula, or, where sympy cannot decide in 8 s, NMSE < 1e-10 on
2,000 fresh noise-free points. The parent kills a worker past ``1.5 x budget + --grace``.

``--units on`` adds ``dataset.units=feynman`` (the units of ``FeynmanUnits.csv``). ``--units both``
(the default) runs each problem without and with units.

``--peers pyoperon,gplearn`` runs those tools through ``bench/peers.py`` (same data: the same
``load_dataset`` call; same budget; their own final model) on each problem where some sr-dist
cell of this invocation's settings is not exact, and judges their model with the same rule. The
peers are in the ``bench`` extra; a missing one stops the script before anything runs.

``--problems peers`` is the 34-problem list of ``bench/peers.py`` (with ``--noise 0.01``: the
noisy comparison of issue 15); ``--problems all`` (default) the whole table; or names.

Results go to ``--json`` after every cell (default ``bench/feynman_full_results.json``); a rerun
skips the cells already there, so the 100 x 2 x 30 s (about 2.5 h with start-up and scoring)
can take several sittings. The per-problem table and the totals are printed as markdown (and
written to ``--markdown``).

Usage (where Ray may bind loopback, e.g. ``unshare --net sh -c 'ip link set lo up && ...'``):
    .venv/bin/python bench/feynman_full.py --units off --markdown feynman.md
    .venv/bin/python bench/feynman_full.py --units both --peers pyoperon,gplearn
    .venv/bin/python bench/feynman_full.py --noise 0.01 --problems peers --units off
    .venv/bin/python bench/feynman_full.py --units off --problems I.6.2a I.10.7 --budget 10
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import time
import traceback
from collections.abc import Sequence
from datetime import datetime
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

#: The override that gives a feynman dataset its units (issue 15, deliverable 2).
UNITS_OVERRIDE = "dataset.units=feynman"
PEER_TOOLS = ("pyoperon", "gplearn")
#: Seed of the fresh points (the dataset uses seed 0).
FRESH_SEED = 1


def all_problems() -> tuple[str, ...]:
    """Every equation of the embedded AI Feynman table, in file order."""
    from sr_dist.data import feynman_equations

    return tuple(eq.filename for eq in feynman_equations())


def resolve_problems(spec: Sequence[str]) -> list[str]:
    """``all``, ``peers`` (bench/peers.py's 34) or explicit names (checked against the table)."""
    from peers_lib import PROBLEMS

    if list(spec) == ["all"]:
        return list(all_problems())
    if list(spec) == ["peers"]:
        return list(PROBLEMS)
    known = set(all_problems())
    unknown = [p for p in spec if p not in known]
    if unknown:
        raise SystemExit(f"unknown AI Feynman problem(s): {', '.join(unknown)}; use names of the "
                         "table (e.g. I.6.2a, II.6.15b), 'all' or 'peers'")
    return list(spec)


def modes(units: str) -> list[bool]:
    """The units modes to run: off, on or both (off first)."""
    return {"off": [False], "on": [True], "both": [False, True]}[units]


def setting_label(units: bool | None, noise: float) -> str:
    """The setting part of a cell's key (peers have no units mode: None)."""
    prefix = "" if units is None else f"units={'on' if units else 'off'} "
    return f"{prefix}noise={noise:g}"


def peers_missing_message(tools: Sequence[str]) -> str | None:
    """Why the asked-for peers cannot run here, or None when all import."""
    missing = [t for t in tools if importlib.util.find_spec(t) is None]
    if not missing:
        return None
    return (f"--peers {','.join(tools)}: {', '.join(missing)} not importable by "
            f"{sys.executable}; the peers are in sr-dist's bench extra: install it into this "
            "environment with `pip install -e '.[bench]'` (or leave out --peers)")


# --- worker side ------------------------------------------------------------------------------

def worker(problem: str, noise: float, budget: float, n: int, units: bool,
           agents: int, extra_overrides: Sequence[str] = ()) -> dict[str, Any]:
    """One sr-dist cell: search, take the answer by the selection rule, judge it.
    ``extra_overrides``: more sr-dist overrides (``--set``)."""
    from sr_dist.data import feynman_equation, load_dataset, sample_feynman

    t0 = time.time()
    eq = feynman_equation(problem)
    base: dict[str, Any] = {"item": problem, "setting": setting_label(units, noise),
                            "tool": "sr-dist", "budget_s": budget, "n": n, "truth": eq.formula}
    extra: dict[str, Any] = {"n_vars": len(eq.variables)}
    try:
        ds = load_dataset(f"feynman:{problem}", n=n, seed=0, noise=noise)
        fresh = sample_feynman(eq, FRESH_ROWS, np.random.default_rng(FRESH_SEED))
        overrides = [f"dataset.source=feynman:{problem}", f"dataset.n={n}",
                     f"dataset.noise={noise}", "dataset.seed=0"]
        run = run_srdist([*overrides, *([UNITS_OVERRIDE] if units else []), *extra_overrides],
                         budget, agents=agents)
        extra.update(stop_reason=run.stop_reason, search_s=run.search_s,
                     run_wall_s=run.run_wall_s)
        if run.answer is None:
            return {**base, "status": "no_answer", "candidates": run.candidates,
                    "wall_s": time.time() - t0, "extra": extra}
        a = run.answer
        v = judge(a.expression, a.constants, eq.formula, ds.feature_names,
                  (ds.X_test, ds.y_test), fresh, noise=noise)
        return {**base, "status": "ok", "answer": a.expression, "constants": a.constants,
                "exact": v.exact, "how": v.how, "test_nmse": v.test_nmse,
                "fresh_nmse": v.fresh_nmse, "candidates": run.candidates,
                "wall_s": time.time() - t0, "extra": extra}
    except Exception as exc:  # noqa: BLE001 - a crashed run is a result, not a crash
        extra["traceback"] = traceback.format_exc()[-2000:]
        return {**base, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500],
                "wall_s": time.time() - t0, "extra": extra}


# --- peers ------------------------------------------------------------------------------------

def peer_cell(tool: str, problem: str, noise: float, budget: float, n: int,
              grace: float) -> Outcome:
    """One peer through ``bench/peers.py``'s worker; its final model judged by our rule."""
    import peers

    return judge_peer(peers.run_cell(tool, problem, noise, budget, n, grace))


def judge_peer(r: Any) -> Outcome:
    """A ``peers_lib.PeerResult`` as an Outcome, its final model judged as sr-dist's answer is
    (peers.py's own verdict has no fresh-points rule)."""
    from sr_dist.data import feynman_equation, load_dataset, sample_feynman

    status = {"ok": "ok", "timeout": "timeout", "not_run": "not_run"}.get(r.status, "failed")
    o = Outcome(item=r.problem, setting=setting_label(None, r.noise), tool=r.tool,
                budget_s=r.budget_s, n=r.n, status=status, truth=r.truth,
                answer=r.formula or r.model, constants=dict(r.constants),
                test_nmse=r.test_nmse, wall_s=r.wall_s, candidates=r.candidates, error=r.error,
                extra={"model": r.model})
    if r.status != "ok" or not r.formula:
        return o
    eq = feynman_equation(r.problem)
    ds = load_dataset(f"feynman:{r.problem}", n=r.n, seed=0, noise=r.noise)
    fresh = sample_feynman(eq, FRESH_ROWS, np.random.default_rng(FRESH_SEED))
    try:
        v = judge(r.formula, r.constants, eq.formula, ds.feature_names, (ds.X_test, ds.y_test),
                  fresh, noise=r.noise)
    except Exception as exc:  # noqa: BLE001 - an unparseable peer model is not exact
        return dataclasses.replace(o, how=f"not judged: {type(exc).__name__}: {exc}"[:300])
    return dataclasses.replace(o, exact=v.exact, how=v.how, test_nmse=v.test_nmse,
                               fresh_nmse=v.fresh_nmse)


# --- tables -----------------------------------------------------------------------------------

def column_label(o: Outcome) -> str:
    if o.tool != "sr-dist":
        return o.tool
    return "sr-dist units " + ("on" if o.setting.startswith("units=on") else "off")


def cell(o: Outcome | None) -> str:
    if o is None:
        return "·"
    if o.status != "ok":
        return o.status
    return f"{'**yes**' if o.exact else 'no'} / {fmt(o.test_nmse, '.1e')} / {fmt(o.wall_s, '.0f')}"


def markdown(outcomes: Sequence[Outcome], problems: Sequence[str]) -> str:
    """Per-problem table (cell: exact / test NMSE / wall s) and one totals row per column."""
    columns = [c for c in ("sr-dist units off", "sr-dist units on", *PEER_TOOLS)
               if any(column_label(o) == c for o in outcomes)]
    by = {(o.item, column_label(o)): o for o in outcomes}
    truths = {o.item: o.truth for o in outcomes}
    lines = ["Cell: exact / test NMSE of the answer / wall seconds (process start to verdict).",
             "", "| problem | truth | " + " | ".join(columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for p in problems:
        if not any((p, c) in by for c in columns):
            continue
        lines.append(f"| {p} | `{short(truths.get(p), 50)}` | "
                     + " | ".join(cell(by.get((p, c))) for c in columns) + " |")
    lines += ["", "| column | problems run | exact | exact rate | median test NMSE | "
                  "wall (s, all) |", "|---|---:|---:|---:|---:|---:|"]
    for c in columns:
        mine = [o for o in outcomes if column_label(o) == c and o.item in set(problems)]
        ran = [o for o in mine if o.status != "not_run"]
        exact = sum(1 for o in ran if o.exact)
        rate = f"{100 * exact / len(ran):.0f}%" if ran else "-"
        nm = median([o.test_nmse for o in ran if o.test_nmse is not None])
        wall = sum(o.wall_s for o in ran if o.wall_s is not None)
        lines.append(f"| {c} | {len(ran)} | {exact} | {rate} | {fmt(nm, '.2e')} | "
                     f"{wall:.0f} |")
    return "\n".join(lines)


# --- parent side ------------------------------------------------------------------------------

def pending_peers(outcomes: Sequence[Outcome], problem: str, noise: float, budget: float,
                  n: int, units_modes: Sequence[bool]) -> bool:
    """Whether the peers should run on ``problem``: some sr-dist cell of these settings is
    stored and not exact."""
    cells = [o for o in outcomes if o.tool == "sr-dist" and o.item == problem
             and o.budget_s == budget and o.n == n
             and o.setting in {setting_label(u, noise) for u in units_modes}]
    return any(not o.exact for o in cells)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=["all"],
                    help="'all' (100), 'peers' (bench/peers.py's 34) or names")
    ap.add_argument("--units", choices=("on", "off", "both"), default="both")
    ap.add_argument("--noise", type=float, default=0.0)
    ap.add_argument("--budget", type=float, default=30.0, help="search.max_seconds per problem")
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--grace", type=float, default=150.0,
                    help="seconds beyond 1.5 x budget before a worker is killed")
    ap.add_argument("--peers", default="", help="comma list of peers: pyoperon,gplearn")
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "feynman_full_results.json")
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra sr-dist override for every run (e.g. "
                         "+model.inherit_constants=true); give such runs their own --json")
    ap.add_argument("--worker", nargs=6,
                    metavar=("PROBLEM", "NOISE", "BUDGET", "N", "UNITS", "AGENTS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        exit_on_sigterm()
        problem, noise, budget, n, units, agents = args.worker
        result = worker(problem, float(noise), float(budget), int(n), units == "on",
                        int(agents), args.set)
        print("\n" + json.dumps(Outcome.from_json(result).to_json()), flush=True)
        return 0
    problems = resolve_problems(args.problems)
    tools = [t for t in args.peers.split(",") if t]
    bad = [t for t in tools if t not in PEER_TOOLS]
    if bad:
        print(f"--peers: unknown tool(s) {', '.join(bad)}; choose from {', '.join(PEER_TOOLS)}",
              file=sys.stderr)
        return 2
    why = peers_missing_message(tools)
    if why:
        print(why, file=sys.stderr)
        return 2
    wanted = modes(args.units)
    outcomes, runs = load_outcomes(args.json)
    runs.append({"command": " ".join([Path(sys.executable).name, *sys.argv]),
                 "started": datetime.now().isoformat()})
    have = {o.key() for o in outcomes}
    limit = 1.5 * args.budget + args.grace
    for problem in problems:
        for units in wanted:
            key = (problem, setting_label(units, args.noise), "sr-dist", float(args.budget),
                   args.n)
            if key in have:
                continue
            started = time.time()
            sets = [part for value in args.set for part in ("--set", value)]
            got, why = run_worker([str(Path(__file__).resolve()), *sets, "--worker", problem,
                                   str(args.noise), str(args.budget), str(args.n),
                                   "on" if units else "off", str(args.agents)], limit)
            o = Outcome.from_json(got) if got is not None else Outcome(
                item=problem, setting=key[1], tool="sr-dist", budget_s=args.budget, n=args.n,
                status="timeout" if why.startswith("killed") else "failed", error=why,
                truth=_truth(problem), wall_s=time.time() - started)
            _record(o, outcomes, have, args.json, runs)
        if tools and pending_peers(outcomes, problem, args.noise, args.budget, args.n, wanted):
            for tool in tools:
                key = (problem, setting_label(None, args.noise), tool, float(args.budget), args.n)
                if key not in have:
                    _record(peer_cell(tool, problem, args.noise, args.budget, args.n,
                                      args.grace), outcomes, have, args.json, runs)
    selected = [o for o in outcomes if o.item in set(problems) and o.budget_s == args.budget
                and o.n == args.n and o.setting.endswith(f"noise={args.noise:g}")]
    table = markdown(selected, problems)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0


def _truth(problem: str) -> str:
    from sr_dist.data import feynman_equation

    return feynman_equation(problem).formula


def _record(o: Outcome, outcomes: list[Outcome], have: set[tuple[str, str, str, float, int]],
            path: Path, runs: list[dict[str, Any]]) -> None:
    """Store a finished cell at once (an interrupted run resumes after it) and print it."""
    outcomes.append(o)
    have.add(o.key())
    save_outcomes(path, outcomes, runs)
    print(f"{o.item:10s} {o.setting:18s} {o.tool:9s} {o.status:9s} "
          f"exact={'yes' if o.exact else 'no '} nmse={fmt(o.test_nmse, '.2e')} "
          f"wall={fmt(o.wall_s, '.1f')}s {short(o.answer, 70)} {o.error or ''}"[:240], flush=True)


if __name__ == "__main__":
    sys.exit(main())
