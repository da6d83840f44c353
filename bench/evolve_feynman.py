"""Search quality of the ``evolve`` proposer on AI Feynman problems.

For each problem: sample ``--n`` noise-free rows, build an in-process :class:`Evaluator`, compile
its shape buckets (``warm_up``, not timed), then let :class:`EvolveModel` search until it submits
or the wall-clock budget runs out. Reports per problem: exact recovery (test NMSE < 1e-10 *and*
sympy-equivalent to the ground truth up to constant values, see
:func:`sr_dist.results.recovery.exact_recovery`) of the final answer (the submission, else the
best candidate), time to the first exactly recovering candidate, the final answer's test NMSE,
candidates evaluated; then a summary.

``--loop agent`` (default) runs the in-process agent loop: ``sr_dist.agent.build_agent`` with the
formula tools and ``AgentLimits(deadline_s=budget)``; the tools' recorder hook timestamps every
fit. ``--loop direct`` runs an inline loop that does the same without the agent: call the
model, fit its batch with ``Evaluator.fit_many``, append the structured results to
``context.tool_history``.

Usage:
    .venv/bin/python bench/evolve_feynman.py                       # all problems, 60 s each
    .venv/bin/python bench/evolve_feynman.py --budget 20 --problems I.12.11 II.6.15b
    .venv/bin/python bench/evolve_feynman.py --json results.json --markdown table.md

Times are wall-clock seconds after the warm-up; any compile still needed during the search
counts against the budget (``compile_s`` in the JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sr_dist.conversation import Context  # noqa: E402
from sr_dist.data import load_dataset  # noqa: E402
from sr_dist.evaluator import Evaluator, FitResult  # noqa: E402
from sr_dist.results.recovery import exact_recovery  # noqa: E402
from sr_dist.sr.evolve.model import EvolveModel  # noqa: E402
from sr_dist.tools.types import ToolCall, ToolCallResult  # noqa: E402

#: The fixed problem list: every 4th equation of the AI Feynman table in file order (rows 1, 5,
#: 9, ..., 97: 25 problems, II.6.15b among them), plus I.12.11, which the acceptance names.
PROBLEMS: tuple[str, ...] = (
    "I.6.2a", "I.9.18", "I.12.2", "I.13.4", "I.15.3x", "I.18.4", "I.25.13", "I.29.16",
    "I.32.17", "I.34.27", "I.39.11", "I.43.16", "I.47.23", "II.3.24", "II.6.15b", "II.11.3",
    "II.11.28", "II.15.4", "II.27.16", "II.34.11", "II.35.21", "II.38.14", "III.8.54",
    "III.13.18", "III.15.27", "I.12.11",
)

EXACT_NMSE = 1e-10
TOOLS = [
    {"type": "function", "function": {"name": "evaluate_formulas", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "submit_formula", "parameters": {"type": "object"}}},
]


@dataclass(frozen=True)
class ProblemResult:
    problem: str
    truth: str
    variables: int
    loop: str
    final: str
    final_constants: dict[str, float]
    final_test_nmse: float
    final_val_nmse: float
    recovered: bool
    time_to_solution_s: float | None
    elapsed_s: float
    warmup_compile_s: float
    compile_s: float
    candidates: int
    generations: int
    submitted: bool
    stop_reason: str


@dataclass(frozen=True)
class _Final:
    expression: str
    constants: dict[str, float]
    val_nmse: float
    test_nmse: float


def _record(fit: FitResult) -> dict[str, Any]:
    """What the ``evaluate_formulas`` tool shows the model for one candidate (no test metrics)."""
    return {
        "expression": fit.expression, "canonical": fit.canonical, "status": fit.status,
        "constants": dict(fit.constants), "train_nmse": fit.train_nmse, "val_nmse": fit.val_nmse,
        "complexity": fit.complexity, "error": fit.error,
    }


def _finite(x: float | None) -> float:
    return float(x) if x is not None and math.isfinite(x) else math.inf


def warm_up(evaluator: Evaluator, variables: Sequence[str]) -> None:
    """Compile the evaluator's shape buckets (1-8 constants, small and large programs) before the
    clock starts, then forget the warm-up fits."""
    x = variables[0]
    small = [f"c0*{x}", f"c0*{x} + c1*{x}**2 + c2",
             f"c0*{x} + c1*{x}**2 + c2*{x}**3 + c3*sin({x}) + c4*cos({x}) + c5*exp(-{x}) + c6*sqrt({x}) + c7"]
    literals = " + ".join(f"{i + 1.5}*sin({x} + {i + 0.25})" for i in range(12))
    large = [f"c0*({literals})", f"c0*({literals}) + c1*{x} + c2",
             f"c0*({literals}) + c1*{x} + c2*{x}**2 + c3*{x}**3 + c4*sin({x}) + c5*cos({x}) + c6*sqrt({x}) + c7"]
    evaluator.fit_many(small + large)
    evaluator.clear_cache()


def _compile_s(evaluator: Evaluator) -> float:
    return float(evaluator.stats().get("compile_s", 0.0))


def _direct_loop(model: EvolveModel, evaluator: Evaluator, info: dict[str, Any], budget_s: float,
                 log: list[tuple[float, FitResult]], start: float) -> tuple[_Final | None, int, str]:
    """What the agent does, inline: call the model, fit its batch, record the structured result."""
    context = Context(info=info)
    generations = 0
    while time.perf_counter() - start < budget_s:
        response = model.call(context, TOOLS)
        if not response.tool_calls:
            return None, generations, "no_calls"
        call = response.tool_calls[0]
        tool = call["function"]["name"]
        args = json.loads(call["function"]["arguments"])
        if tool == "submit_formula":
            fit = next((f for _, f in log if f.expression == args["expression"]), None)
            if fit is None:
                return None, generations, "submitted_unknown"
            return _Final(fit.expression, dict(fit.constants), _finite(fit.val_nmse), _finite(fit.test_nmse)), generations, "submitted"
        fits = evaluator.fit_many(args["expressions"])
        now = time.perf_counter() - start
        log.extend((now, f) for f in fits)
        generations += 1
        result = ToolCallResult(True, {"results": [_record(f) for f in fits]}, "", {"tool": tool})
        context.tool_history.append((ToolCall(tool, args, call["id"]), result))
    return None, generations, "deadline"


def _agent_loop(model: EvolveModel, evaluator: Evaluator, ds: Any, seed: int, budget_s: float,
                log: list[tuple[float, FitResult]], start_box: list[float], sample_rows: int) -> tuple[_Final | None, int, str]:
    """The in-process agent loop with the formula tools; the recorder timestamps every fit."""
    from sr_dist.agent import AgentLimits
    from sr_dist.sr import build_agent

    def recorder(fits: Sequence[FitResult], **_: Any) -> None:
        now = time.perf_counter() - start_box[0]
        log.extend((now, f) for f in fits)

    limits = AgentLimits(max_turns=None, deadline_s=budget_s, failure_budget=5)
    agent = build_agent(model, ds, evaluator, limits=limits, recorder=recorder, seed=seed, sample_rows=sample_rows)
    start_box[0] = time.perf_counter()
    result = agent.run()
    answer = result.submitted if result.submitted is not None else result.best
    final = None if answer is None else _Final(
        answer.expression, dict(answer.constants), _finite(answer.val_nmse), _finite(answer.test_nmse))
    return final, result.turns, result.stop_reason + ("" if result.submitted is not None else " (best)")


def run_problem(
    name: str, budget_s: float, n: int, seed: int, batch_size: int, sample_rows: int,
    evaluator_options: dict[str, Any] | None = None, loop: str = "agent",
) -> ProblemResult:
    ds = load_dataset(f"feynman:{name}", n=n, seed=seed)
    variables = list(ds.feature_names)
    evaluator = Evaluator(ds, **dict(evaluator_options or {}))
    warm_up(evaluator, variables)
    warm_compile = _compile_s(evaluator)
    model = EvolveModel(seed=seed, batch_size=batch_size)
    log: list[tuple[float, FitResult]] = []
    start_box = [time.perf_counter()]
    if loop == "agent":
        final, generations, stop = _agent_loop(model, evaluator, ds, seed, budget_s, log, start_box, sample_rows)
    else:
        rows = np.arange(min(sample_rows, len(ds.y_train)))
        info = {"variables": variables, "seed": seed, "dataset": ds.name,
                "sample": {"X": ds.X_train[rows].tolist(), "y": ds.y_train[rows].tolist()}}
        final, generations, stop = _direct_loop(model, evaluator, info, budget_s, log, start_box[0])
    elapsed = time.perf_counter() - start_box[0]

    ok = [(t, f) for t, f in log if f.status == "ok"]
    if final is None and ok:
        solved = [f for _, f in ok if _finite(f.val_nmse) < model.config.target_nmse]
        best = (min(solved, key=lambda f: (f.complexity or 0, _finite(f.val_nmse))) if solved
                else min((f for _, f in ok), key=lambda f: _finite(f.val_nmse)))
        final = _Final(best.expression, dict(best.constants), _finite(best.val_nmse), _finite(best.test_nmse))

    def recovers(expression: str, constants: dict[str, float], test_nmse: float) -> bool:
        return test_nmse < EXACT_NMSE and exact_recovery(expression, constants, ds.ground_truth or "", variables)

    first: float | None = None
    checked = 0
    for t, f in ok:
        if _finite(f.test_nmse) < EXACT_NMSE and checked < 25:
            checked += 1
            if recovers(f.expression, dict(f.constants), _finite(f.test_nmse)):
                first = t
                break
    return ProblemResult(
        problem=name, truth=ds.ground_truth or "", variables=len(variables), loop=loop,
        final=final.expression if final else "", final_constants=final.constants if final else {},
        final_test_nmse=final.test_nmse if final else math.inf,
        final_val_nmse=final.val_nmse if final else math.inf,
        recovered=bool(final is not None and recovers(final.expression, final.constants, final.test_nmse)),
        time_to_solution_s=first, elapsed_s=elapsed, warmup_compile_s=warm_compile,
        compile_s=_compile_s(evaluator) - warm_compile, candidates=len(log), generations=generations,
        submitted=stop.startswith("submitted"), stop_reason=stop,
    )


def _fmt_time(t: float | None) -> str:
    return "-" if t is None else f"{t:.1f}"


def table(results: Sequence[ProblemResult]) -> str:
    lines = [
        "| problem | vars | exact | time to solution (s) | test NMSE | candidates | elapsed (s) | stop | final formula |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        final = r.final if len(r.final) <= 70 else r.final[:67] + "..."
        lines.append(
            f"| {r.problem} | {r.variables} | {'yes' if r.recovered else 'no'} | {_fmt_time(r.time_to_solution_s)} "
            f"| {r.final_test_nmse:.2e} | {r.candidates} | {r.elapsed_s:.1f} | {r.stop_reason} | `{final}` |"
        )
    return "\n".join(lines)


def summary(results: Sequence[ProblemResult], budget: float) -> str:
    solved = [r for r in results if r.recovered]
    times = sorted(r.time_to_solution_s for r in solved if r.time_to_solution_s is not None)
    median = times[len(times) // 2] if times else math.nan
    return (
        f"exact recovery: {len(solved)}/{len(results)} ({100 * len(solved) / max(1, len(results)):.0f}%) "
        f"within {budget:.0f} s each; median time to solution {median:.1f} s; "
        f"candidates evaluated: {sum(r.candidates for r in results)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0, help="wall-clock seconds per problem")
    parser.add_argument("--n", type=int, default=2000, help="rows sampled per problem")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sample-rows", type=int, default=500, help="training rows shared with the proposer")
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    parser.add_argument("--loop", choices=("agent", "direct"), default="agent",
                        help="the in-process Agent with the formula tools, or the inline direct loop")
    parser.add_argument("--jax-cache", default="/tmp/sr_dist_jax_cache",
                        help="persistent XLA compilation cache directory ('' to disable)")
    parser.add_argument("--json", type=Path, default=None, help="write per-problem results here")
    parser.add_argument("--markdown", type=Path, default=None, help="write the table and summary here")
    args = parser.parse_args(argv)

    results: list[ProblemResult] = []
    for name in args.problems:
        options = {"compilation_cache_dir": args.jax_cache} if args.jax_cache else {}
        r = run_problem(name, args.budget, args.n, args.seed, args.batch_size, args.sample_rows, options, args.loop)
        results.append(r)
        print(f"{r.problem:10s} exact={'yes' if r.recovered else 'no ':3s} t={_fmt_time(r.time_to_solution_s):>6s} "
              f"test_nmse={r.final_test_nmse:.2e} cands={r.candidates:5d} elapsed={r.elapsed_s:.1f}s  {r.final}",
              flush=True)
    text = table(results) + "\n\n" + summary(results, args.budget)
    print()
    print(text)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1, default=str))
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
