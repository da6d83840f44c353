"""Shared pieces of ``bench/synthetic.py`` and ``bench/feynman_full.py``: run sr-dist the way a
user does, take *the answer it hands the user*, and judge that answer against the truth.

Why one module: both benchmarks must score the same thing the same way (issue 15, deliverable
5). The answer is ``sr_dist.results.select_candidate(rule="parsimony")`` over the run's ``ok``
candidates, the documented selection rule (``docs/results.md``), as ``bench/peers.py`` does;
never the lowest test NMSE found anywhere in the search.

Exact means: the answer, its fitted constants snapped to closed forms, is symbolically equal to
the truth (``sr_dist.results.recovery.recovery_verdict``, tried only when the answer's test
NMSE is below :func:`near_nmse`, as in ``bench/peers.py``), or, where sympy cannot decide (it
can neither prove nor refute the equality, or runs out of :data:`CHECK_S` seconds), the
answer's NMSE on fresh noise-free points of the problem's domain is below
:data:`FRESH_EXACT_NMSE`. Why the domain decides there: ``sqrt((c + v)/(c - v))`` equals
``(1 + v/c)/sqrt(1 - v**2/c**2)`` only where ``v < c``, which the data has and sympy is not told.

Every run goes into a worker process (:func:`run_worker`) with a hard time limit; results are
:class:`Outcome` values kept in a JSON file that a later invocation resumes from.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # peers_lib, as a script would find it
from peers_lib import json_safe, recovery_rel_tol  # noqa: E402 - one tolerance for every tool

ROOT = Path(__file__).resolve().parents[1]

#: sr-dist's answer: ``select_candidate`` with this rule (PySR's score on the validation front).
SELECT_RULE = "parsimony"
#: Seconds sympy may spend deciding one answer before the fresh-points rule takes over.
CHECK_S = 8.0
#: Fresh-points NMSE under which an answer sympy could not decide counts as exact. A law
#: fitted in float64 (the evaluator refines near-exact fits so by default, ``refine_float64``)
#: lands near 1e-31 on fresh points (every such AI Feynman answer since: 5e-32 to 1e-31); long
#: formulas that only approximate the law on its domain, which sympy cannot refute in
#: :data:`CHECK_S`, land at 2e-13 to 9e-11 (nonlinear family development runs). 1e-10, the
#: gate of the symbolic check, had let those through.
FRESH_EXACT_NMSE = 1e-20
#: Fresh noise-free points drawn for that rule.
FRESH_ROWS = 2000
#: Seconds a timed-out worker gets between SIGTERM and SIGKILL.
TERM_WAIT_S = 15.0
#: Columns of the candidates table the answer is chosen from.
ANSWER_COLUMNS = ("candidate_id", "status", "expression", "canonical", "complexity",
                  "constants", "val_nmse", "created_at")


def near_nmse(noise: float) -> float:
    """Test NMSE below which the symbolic check is tried (a worse fit cannot be the truth, and
    sympy can take minutes on a long wrong formula); ``bench/peers.py``'s gate."""
    return max(1e-10, 10.0 * noise * noise)


# --- values -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    """The candidate sr-dist hands the user: its formula text and fitted constants."""

    candidate_id: str
    expression: str
    constants: dict[str, float]
    complexity: int
    val_nmse: float


@dataclass(frozen=True)
class Verdict:
    """How an answer scores: ``exact`` and which rule decided it (``how``)."""

    exact: bool
    how: str
    test_nmse: float | None
    fresh_nmse: float | None


@dataclass(frozen=True)
class Outcome:
    """One benchmark cell: an item (formula or problem) under a setting, run by one tool.

    ``status``: ``ok`` (ran and answered), ``no_answer`` (ran, no ok candidate), ``timeout``
    (killed at the hard limit), ``failed`` (crashed; ``error`` says why) or ``not_run``.
    """

    item: str
    setting: str
    tool: str
    budget_s: float
    n: int
    status: str
    truth: str = ""
    answer: str | None = None
    constants: dict[str, float] = field(default_factory=dict)
    exact: bool = False
    how: str = ""
    test_nmse: float | None = None
    fresh_nmse: float | None = None
    wall_s: float | None = None
    candidates: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def key(self) -> tuple[str, str, str, float, int]:
        """What makes two cells the same measurement (a resumed run skips keys it has)."""
        return (self.item, self.setting, self.tool, float(self.budget_s), int(self.n))

    def to_json(self) -> dict[str, Any]:
        return {k: json_safe(v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


# --- the answer -------------------------------------------------------------------------------

def _constants(text: str | None) -> dict[str, float]:
    return {k: float(v) for k, v in json.loads(text or "{}").items() if v is not None}


def answer_from_table(table: Any) -> Answer | None:
    """The answer of a candidates table (pyarrow Table, Dataset or results path) by the
    selection rule, or None when it has no ok candidate with a validation NMSE."""
    from sr_dist.results import select_candidate

    row = select_candidate(table, rule=SELECT_RULE)
    if row is None:
        return None
    return Answer(candidate_id=str(row["candidate_id"]), expression=str(row["expression"]),
                  constants=_constants(row.get("constants")),
                  complexity=int(row["complexity"]), val_nmse=float(row["val_nmse"]))


@dataclass(frozen=True)
class SearchRun:
    """What one ``run_search`` left: its answer and the summary's counts."""

    answer: Answer | None
    candidates: int
    search_s: float
    stop_reason: str
    run_wall_s: float


def run_srdist(overrides: Sequence[str], budget: float, agents: int = 2) -> SearchRun:
    """One sr-dist search as a user runs it (``model=evolve``, ``agents`` agents, ``budget``
    seconds of ``search.max_seconds``) on a new local Ray cluster; the dataset comes from
    ``overrides`` (``dataset.*=...``). Results go to a temporary folder, deleted after."""
    import pyarrow.dataset as pads
    from hydra import compose, initialize_config_module

    from sr_dist.results import open_results
    from sr_dist.search import run_search

    with tempfile.TemporaryDirectory(prefix="bench-srdist-") as out:
        cfg_overrides = [*overrides, "model=evolve", f"search.agents={agents}",
                         f"search.max_seconds={budget}", f"results.path={out}",
                         "search.progress_interval_s=3600"]
        with initialize_config_module("sr_dist.conf", version_base="1.3"):
            cfg = compose("config", overrides=cfg_overrides)
        summary = run_search(cfg, stream=io.StringIO(), handle_signals=False)
        table = open_results(out).candidates.to_table(
            filter=(pads.field("run_id") == summary.run_id) & (pads.field("status") == "ok"),
            columns=list(ANSWER_COLUMNS))
        answer = answer_from_table(table)
    return SearchRun(answer=answer, candidates=int(summary.candidates),
                     search_s=float(summary.search_s), stop_reason=str(summary.stop_reason),
                     run_wall_s=float(summary.wall_s))


# --- judging ----------------------------------------------------------------------------------

class _CheckTimeout(BaseException):
    """Raised by SIGALRM inside sympy; a BaseException so no ``except Exception`` eats it."""


def exact_within(seconds: float, formula: str, constants: Mapping[str, float], truth: str,
                 variables: Sequence[str], rel_tol: float) -> bool | None:
    """``recovery_verdict`` with a deadline: True/False, or None when sympy did not decide in
    time or cannot decide at all (it can neither prove nor refute the equality). Uses SIGALRM,
    so it must run in the main thread (each worker judges one cell)."""
    from sr_dist.results.recovery import recovery_verdict

    def _expire(signum: int, frame: Any) -> None:
        raise _CheckTimeout

    previous = signal.signal(signal.SIGALRM, _expire)
    try:  # the timer starts inside the try: a very short deadline must still be caught
        signal.setitimer(signal.ITIMER_REAL, seconds)
        return recovery_verdict(formula, dict(constants), truth, tuple(variables),
                                rel_tol=rel_tol)
    except _CheckTimeout:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def nmse(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean squared error over the variance of ``y`` (inf for a non-finite prediction)."""
    y = np.asarray(y, dtype=np.float64)
    pred = np.asarray(pred, dtype=np.float64)
    if pred.shape != y.shape or not np.all(np.isfinite(pred)):
        return math.inf
    var = float(np.var(y))
    return float(np.mean((y - pred) ** 2)) / (var if var > 0 else 1.0)


def _predict(formula: str, constants: Mapping[str, float], X: np.ndarray,
             variables: Sequence[str]) -> np.ndarray:
    from sr_dist.formula import evaluate_numpy, parse_formula

    parsed = parse_formula(formula, tuple(variables))
    with np.errstate(all="ignore"):
        return np.asarray(evaluate_numpy(parsed, X, tuple(variables), dict(constants)),
                          dtype=np.float64)


def judge(formula: str, constants: Mapping[str, float], truth: str, variables: Sequence[str],
          test: tuple[np.ndarray, np.ndarray], fresh: tuple[np.ndarray, np.ndarray],
          noise: float = 0.0, check_s: float = CHECK_S) -> Verdict:
    """Score one answer: test NMSE; the symbolic check when the fit is near; where sympy runs
    out of time, the NMSE on ``fresh`` noise-free points decides."""
    test_nmse = nmse(test[1], _predict(formula, constants, test[0], variables))
    if not test_nmse < near_nmse(noise):
        return Verdict(False, f"not exact (test NMSE >= {near_nmse(noise):g}: no symbolic check)",
                       test_nmse, None)
    decided = exact_within(check_s, formula, constants, truth, variables,
                           recovery_rel_tol(noise))
    if decided is not None:
        return Verdict(decided, "symbolic" if decided else "not exact (symbolic)", test_nmse,
                       None)
    fresh_nmse = nmse(fresh[1], _predict(formula, constants, fresh[0], variables))
    exact = fresh_nmse < FRESH_EXACT_NMSE
    return Verdict(exact, f"sympy undecided (or out of its {check_s:g} s); fresh-points NMSE "
                          f"{fresh_nmse:.2e} {'<' if exact else '>='} {FRESH_EXACT_NMSE:g}",
                   test_nmse, fresh_nmse)


# --- worker processes and the results file ----------------------------------------------------

def run_worker(argv: Sequence[str], limit_s: float) -> tuple[dict[str, Any] | None, str]:
    """Run ``python *argv`` with a hard time limit; its last stdout line that is a JSON object
    is the result. Returns (result, "") or (None, why there is none).

    The worker runs in its own session; past the limit its process group gets SIGTERM (the
    worker turns that into SystemExit, so Ray's exit hook stops the local cluster it started),
    then SIGKILL after :data:`TERM_WAIT_S`.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT),
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=TERM_WAIT_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        tail = " ".join(stderr.strip().splitlines()[-3:])[-300:]
        return None, f"killed after {limit_s:.0f} s; last stderr: {tail}"
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return dict(json.loads(line)), ""
            except ValueError:
                break
    return None, f"worker exited {proc.returncode} without a result: {stderr.strip()[-400:]}"


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def exit_on_sigterm() -> None:
    """In a worker: SIGTERM raises SystemExit, so exit hooks (``ray.shutdown``) run."""
    def _exit(signum: int, frame: Any) -> None:
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, _exit)


def load_outcomes(path: Path) -> tuple[list[Outcome], list[dict[str, Any]]]:
    """The cells stored so far and one metadata record per earlier invocation."""
    if not path.is_file():
        return [], []
    data = json.loads(path.read_text())
    return ([Outcome.from_json(r) for r in data.get("results", [])],
            list(data.get("runs", [])))


def save_outcomes(path: Path, outcomes: Sequence[Outcome],
                  runs: Sequence[Mapping[str, Any]]) -> None:
    """Write atomically (a kill mid-write leaves the previous file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"runs": list(runs), "results": [o.to_json() for o in outcomes]},
                              indent=1))
    os.replace(tmp, path)


def median(values: Sequence[float]) -> float | None:
    """The median, or None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def fmt(value: float | None, spec: str) -> str:
    """A number for a table cell ("-" for none or non-finite)."""
    if value is None or not math.isfinite(value):
        return "-"
    return format(value, spec)


def short(text: str | None, width: int = 70) -> str:
    """Formula text for a markdown cell: pipes escaped, long text cut."""
    if not text:
        return "-"
    text = text.replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


__all__ = [
    "Answer", "CHECK_S", "FRESH_EXACT_NMSE", "FRESH_ROWS", "Outcome", "SELECT_RULE",
    "SearchRun", "TERM_WAIT_S", "Verdict", "answer_from_table",
    "exact_within", "exit_on_sigterm", "fmt",
    "judge", "load_outcomes", "median", "near_nmse", "nmse", "recovery_rel_tol", "run_srdist",
    "run_worker", "save_outcomes", "short",
]
