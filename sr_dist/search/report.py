"""What a run prints at its end: tallies, agents, the Pareto front, the best formula.

Pure formatting over the run's summary and rows; the only reads are the Pareto front (through
the function passed in) and the ground-truth check of the best formula.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import pyarrow as pa

from sr_dist.agent import StopReason
from sr_dist.candidate import Candidate
from sr_dist.formula import Simplified, call_within
from sr_dist.results import constants_json, select_candidate
from sr_dist.results.recovery import recovery_verdict
from sr_dist.results.simplified import simplify_entries, simplify_entry
from sr_dist.search.progress import format_constants, format_pareto

__all__ = ["RECOVERY_CHECK_S", "RECOVERY_NMSE", "REPORT_IMPORTS", "best_candidate", "parsimony_lines",
           "preload_report_imports", "print_report", "simplified_line"]

log = logging.getLogger(__name__)

#: Validation NMSE at or below which the best formula is checked against the ground truth.
RECOVERY_NMSE = 1e-8
#: Seconds the ground-truth check of the best formula may take (it took 1-80 ms on three AI
#: Feynman laws); past it the report says "not checked". sympy's simplify ran for minutes on
#: an exact fit that carried a junk term, and the run's wrap-up never ended.
RECOVERY_CHECK_S = 5.0


#: Modules the end-of-run report needs and the search does not: sympy (for the simplified
#: forms) took 0.52 s of a run's 2-s import time on the 2-core machine, all at the wrap-up.
REPORT_IMPORTS = ("sympy",)


def preload_report_imports() -> threading.Thread:
    """Import :data:`REPORT_IMPORTS` in a daemon thread (the driver does it while the search
    runs and it only waits on Ray), so the wrap-up does not pay for them. A module that fails
    to import here is imported, and fails, where the report needs it."""

    def load() -> None:
        for name in REPORT_IMPORTS:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - the report imports it again and says why
                log.debug("preloading %s failed: %s", name, exc)

    thread = threading.Thread(target=load, name="sr-dist-report-imports", daemon=True)
    thread.start()
    return thread


def best_candidate(row: Mapping[str, Any] | None, dataset: Any) -> Candidate | None:
    """The run's best candidate from its best results row, with ``recovered`` checked against
    the dataset's ground truth (when it has one and the fit is essentially exact): None when
    the check ran out of :data:`RECOVERY_CHECK_S`."""
    if row is None:
        return None
    cand = Candidate.from_fit(row)
    recovered: bool | None = None
    truth = getattr(dataset, "ground_truth", None)
    val = cand.val_nmse
    # The symbolic check (sympy) is only worth running, and only reliably quick, for a
    # candidate that fits essentially exactly; anything else is not a recovery anyway.
    if truth and (val is None or val > RECOVERY_NMSE):
        recovered = False
    elif truth:
        try:
            finite = {k: v for k, v in cand.constants.items() if not math.isnan(v)}
            finished, verdict = call_within(RECOVERY_CHECK_S, recovery_verdict, cand.expression,
                                            finite, truth, list(dataset.feature_names))
            recovered = verdict is True if finished else None
            if not finished:
                log.info("the ground-truth check of %s ran out of %.0f s", cand.expression,
                         RECOVERY_CHECK_S)
        except Exception:  # noqa: BLE001 - a check for the report, never a reason to fail
            log.debug("recovery check failed", exc_info=True)
    return cand.with_recovered(recovered)


def simplified_line(form: Simplified | None) -> list[str]:
    """``   simplified: q*(Ef + B*v*sin(theta))  (val NMSE 0; c0=1 -> 1, dropped c2=6.2e-08)``
    when the simplified form says more than the fitted one; nothing otherwise."""
    if form is None or not form.changed:
        return []
    return [f"   simplified: {form.expression}  (val NMSE {form.nmse:.4g}; {', '.join(form.steps)})"]


#: Seconds the end-of-run report spends simplifying the front, all entries together (sympy:
#: up to a second an entry; the listing's own budget, ten seconds, was most of a 30-s run's
#: wrap-up). The lowest-error entries go first, so the best formula's form is never the one
#: cut short; ``sr-dist-query PATH --run ID`` simplifies the whole front with the listing's budget.
REPORT_SIMPLIFY_S = 3.0


def _with_simplified(rows: list[dict[str, Any]], dataset: Any,
                     budget_s: float = REPORT_SIMPLIFY_S
                     ) -> tuple[list[dict[str, Any]], dict[str, Simplified]]:
    """The front rows with their ``simplified`` text (checked on the validation split), and
    the simplified forms by candidate id; lowest validation NMSE first within ``budget_s``."""
    if dataset is None or not rows:
        return rows, {}
    order = sorted(range(len(rows)), key=lambda i: _nmse_order(rows[i].get("val_nmse")))
    try:
        done = simplify_entries([rows[i] for i in order], dataset, budget_s=budget_s)
    except Exception:  # noqa: BLE001 - a nicety of the report, never a reason to fail
        log.debug("simplifying the front failed", exc_info=True)
        return rows, {}
    found: list[Simplified] = [done[0]] * len(rows)
    for k, i in enumerate(order):  # back to the front's order
        found[i] = done[k]
    shown = [{**row, "simplified": form.expression if math.isfinite(form.raw_nmse) else None}
             for row, form in zip(rows, found)]
    forms = {str(row["candidate_id"]): form for row, form in zip(rows, found)
             if row.get("candidate_id")}
    return shown, forms


def _nmse_order(value: Any) -> tuple[bool, float]:
    """Sort key: rows with a finite validation NMSE first, lowest first."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return True, math.inf
    return (not math.isfinite(number)), number


def _form_of(forms: Mapping[str, Simplified], cand: Any, dataset: Any) -> Simplified | None:
    """The simplified form of ``cand`` (a front row's if it is on the front)."""
    if dataset is None or cand is None:
        return None
    row = cand if isinstance(cand, Mapping) else cand.to_dict()
    if row.get("candidate_id") in forms:
        return forms[row["candidate_id"]]
    try:
        return simplify_entry(str(row.get("expression")), row.get("constants"), dataset)
    except Exception:  # noqa: BLE001 - a nicety of the report, never a reason to fail
        log.debug("simplifying %s failed", row.get("expression"), exc_info=True)
        return None


def parsimony_lines(front: list[dict[str, Any]], best: Candidate | None, dataset: Any = None,
                    forms: Mapping[str, Simplified] | None = None) -> list[str]:
    """The ``parsimony`` pick when it is not the lowest-NMSE formula (on noisy data it is
    usually the law, and the best is a longer formula fitting the noise)."""
    if not front or best is None:
        return []
    try:
        pick = select_candidate(pa.Table.from_pylist(front), rule="parsimony")
    except (ValueError, TypeError, KeyError, pa.ArrowException):
        return []
    if pick is None or pick.get("candidate_id") == best.candidate_id:
        return []
    val = pick.get("val_nmse")
    shown = "-" if val is None else f"{val:.4g}"
    lines = ["", f"parsimony pick: {pick.get('expression')}  (val NMSE {shown}, complexity "
                 f"{pick.get('complexity')}; the simplest formula at the best formula's error "
                 "level, `sr-dist-query --score --select parsimony`)"]
    if pick.get("constants"):
        lines.append(f"   constants: {format_constants(pick['constants'])}")
    return lines + simplified_line(_form_of(forms or {}, pick, dataset))


def _ms(seconds: Any) -> str:
    return "-" if seconds is None else f"{float(seconds) * 1000:.0f} ms"


def pool_lines(ev: Mapping[str, Any]) -> list[str]:
    """The evaluator queue's waits and, for a pool, one line per replica."""
    lines = []
    wait = dict(ev.get("queue_wait", {}))
    if wait.get("count"):
        held = dict(ev.get("held_back", {}))
        extra = (f"; {held['requests']:,} requests waited for room"
                 if held.get("requests") else "")
        lines.append(f"evaluator queue wait: p50 {_ms(wait.get('p50_s'))}, p95 "
                     f"{_ms(wait.get('p95_s'))}, p99 {_ms(wait.get('p99_s'))}{extra}")
    replicas = list(ev.get("per_replica", []))
    if len(replicas) > 1:
        for r in replicas:
            rate = f", {r['fits_per_s']:.1f} fits/s" if "fits_per_s" in r else ""
            node = str(r.get("node_id") or "?")[:8]
            lines.append(f"  replica {r['replica']} (node {node}): {r['search_fits']:,} fits"
                         f"{rate}, {r['cache_hits']:,} cache hits, {r['batches']:,} batches, "
                         f"queue p99 {_ms(dict(r.get('queue_wait', {})).get('p99_s'))}")
    return lines


@dataclass(frozen=True)
class FrontReport:
    """The report's Pareto front, read and simplified (the slow part of the report: sympy),
    so it can be made while Ray shuts down (:func:`front_report`)."""

    rows: list[dict[str, Any]]
    forms: dict[str, Simplified]
    error: str | None = None


def front_report(path: Any, run_id: str, dataset: Any, front_fn: Any) -> FrontReport:
    """Read run ``run_id``'s Pareto front with ``front_fn`` and simplify it; never raises."""
    try:
        rows = front_fn(path, run_id=run_id).to_pylist()
    except Exception as exc:  # noqa: BLE001
        return FrontReport([], {}, f"(could not read the Pareto front: {exc})")
    rows, forms = _with_simplified(rows, dataset)
    return FrontReport(rows, forms)


def print_report(out: TextIO, summary: Any, dataset: Any, front_fn: Any,
                 front: FrontReport | None = None) -> None:
    """The end-of-run report: tallies, agents, the Pareto front, the best formula, the query.
    ``front``: the front already read (:func:`front_report`), else ``front_fn`` reads it."""
    lines = ["", f"sr-dist: run {summary.run_id} {summary.status} ({summary.stop_reason}) after "
             f"{summary.wall_s:.1f} s: {summary.candidates:,} candidates"]
    if summary.resumed:
        lines.append(f"resumed: {summary.candidates_before:,} candidates came from earlier "
                     f"sessions, {summary.candidates - summary.candidates_before:,} from this one")
    model_errors = [a for a in summary.agents if StopReason.of(a.stop_reason) is StopReason.MODEL_ERROR]
    if summary.stop_reason == "agents_failed" and model_errors:
        first = model_errors[0]
        lines.append(f"every agent lost its model ({len(model_errors)} of {len(summary.agents)} "
                     f"stopped on a model error); first: {first.stop_reason}: {first.error}")
    ev = summary.evaluator
    if ev:
        batching = ev.get("batching", {})
        lines.append(
            f"evaluator: {ev.get('search_fits', 0):,} fits, {ev.get('cache_hits', 0):,} cache hits, "
            f"{batching.get('batches', 0):,} batches (mean {batching.get('mean_batch_size', 0.0):.1f} "
            f"formulas, {batching.get('mixed_agent_batches', 0):,} mixing agents)"
        )
        lines += pool_lines(ev)
    for outcome in summary.agents:
        best = "" if outcome.best_val_nmse is None else f", best val NMSE {outcome.best_val_nmse:.3g}"
        extra = f": {outcome.error}" if outcome.error else ""
        lines.append(f"agent {outcome.agent_id}: {outcome.stop_reason} after {outcome.turns} turns, "
                     f"{outcome.candidates} candidates{best}{extra}")
    if summary.lost_agents:
        lines.append(f"lost agents: {', '.join(map(str, summary.lost_agents))}")
    restarts = int(ev.get("restarts", 0) or 0) if ev else 0
    if restarts:
        lines.append(f"evaluator restarts: {restarts} (in-flight fits were resent)")
    if front is None and front_fn is not None:
        front = front_report(summary.results_path, summary.run_id, dataset, front_fn)
    if front is not None:
        rows, forms = front.rows, front.forms
        if front.error:
            lines.append(front.error)
        lines += ["", "Pareto front (complexity vs validation NMSE):", format_pareto(rows)]
        lines += parsimony_lines(rows, summary.best, dataset, forms)
    else:
        forms = {}
    lines.append("")
    top = summary.best
    if top is None:
        lines.append("best formula: none (no candidate was fitted successfully)")
    else:
        lines.append(f"best formula: {top.expression}")
        if top.constants:
            lines.append(f"   constants: {format_constants(constants_json(top.constants))}")
        lines += simplified_line(_form_of(forms, top, dataset))
        val = "-" if top.val_nmse is None else f"{top.val_nmse:.4g}"
        test = "-" if top.test_nmse is None else f"{top.test_nmse:.4g}"
        lines.append(f"   val NMSE {val}, test NMSE {test}, complexity {top.complexity}")
        truth = getattr(dataset, "ground_truth", None)
        if truth:
            verdict = ("not checked" if top.recovered is None
                       else "recovered" if top.recovered else "not recovered")
            lines.append(f"   ground truth: {truth} ({verdict})")
    lines += ["", f"results: {summary.results_path}", f"query:   {summary.query_command}", ""]
    out.write("\n".join(lines))
    out.flush()
