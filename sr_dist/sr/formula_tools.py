"""The tools an sr-dist agent searches with: evaluate, inspect the data, review, submit.

The model passes only formulas and small options; the dataset, the evaluator (the in-process
:class:`~sr_dist.evaluator.Evaluator` or an adapter around the Ray actor), the recorder, the
episode's :class:`~sr_dist.sr.state.CandidateArchive` and its
:class:`~sr_dist.sr.state.EpisodeState` come from the tool context, a frozen
:class:`~sr_dist.sr.episode.EpisodeContext`. Every candidate any tool fits is recorded
(recorder and archive).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sr_dist.candidate import RECORD_FIELDS as RESULT_FIELDS
from sr_dist.candidate import Candidate, best_of, fitness, nmse_fitness, rank_key
from sr_dist.results.simplified import simplify_entries
from sr_dist.sr.dimensional import with_dimensions
from sr_dist.sr.episode import DEFAULT_MAX_EXPRESSIONS, EpisodeContext, FitRecorder
from sr_dist.sr.fit_notes import check_origins, with_origins
from sr_dist.sr.state import Submission, with_run_front
from sr_dist.tools.base import BaseTool
from sr_dist.tools.formatting import significant
from sr_dist.tools.formula_helpers import evaluate_expressions, formula_text
from sr_dist.tools.metadata import ToolMetadata
from sr_dist.tools.types import ToolCallResult

__all__ = [
    "FORMULA_TOOLS",
    "OPT_IN_TOOLS",
    "DEFAULT_MAX_EXPRESSIONS",
    "BestFormulas",
    "DataSummary",
    "EvaluateFormulas",
    "EvaluatorFailure",
    "FitRecorder",
    "ListRecorder",
    "RESULT_FIELDS",
    "RecordedBatch",
    "SubmitFormula",
    "FormulaTool",
    "fit_record",
    "format_data_summary",
    "format_nmse",
    "formula_tool_context",
    "summarize_data",
]

log = logging.getLogger(__name__)

#: The formula tools, in the order they are shown to the model (the analysis tools, from
#: :mod:`sr_dist.sr.analysis_tools`, between data_summary and best_formulas).
FORMULA_TOOLS: tuple[str, ...] = (
    "evaluate_formulas", "data_summary",
    "data_statistics", "variable_relationships", "separability_test", "dimensional_groups",
    "fit_polynomial", "fit_power_law", "fit_rational", "residual_analysis",
    "best_formulas", "submit_formula",
)
#: Tools a run must name in ``search.tools`` to get (never in the default set): ``run_python``
#: runs model-written code (docs/run-python.md).
OPT_IN_TOOLS: tuple[str, ...] = ("run_python",)
#: Longest rationale kept from ``submit_formula``.
MAX_RATIONALE_CHARS = 2000
#: Seconds ``best_formulas`` may spend on simplified forms per call (entries are cached, so
#: a repeated listing costs nothing; entries past the budget show their raw form).
SIMPLIFY_BUDGET_S = 3.0


@dataclass(frozen=True)
class RecordedBatch:
    """One recorder call: the fits of one tool call and where they came from."""

    fits: tuple[Any, ...]
    agent_id: int
    step: int
    tool_call_id: str | None


class ListRecorder:
    """An in-memory, thread-safe :class:`FitRecorder` for tests and in-process runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: list[RecordedBatch] = []

    def __call__(self, fits: Sequence[Any], *, agent_id: int, step: int, tool_call_id: str | None) -> None:
        with self._lock:
            self._batches.append(RecordedBatch(tuple(fits), int(agent_id), int(step), tool_call_id))

    @property
    def batches(self) -> list[RecordedBatch]:
        with self._lock:
            return list(self._batches)

    @property
    def fits(self) -> list[Any]:
        """Every recorded fit, in recording order."""
        return [fit for batch in self.batches for fit in batch.fits]

    def __len__(self) -> int:
        return len(self.fits)


class EvaluatorFailure(RuntimeError):
    """The evaluator itself failed (not a bad formula): e.g. its actor died."""


# --------------------------------------------------------------------------- pure helpers


def format_nmse(value: Any) -> str:
    """An NMSE for the model: 4 significant digits (enough to rank, short enough to scan)."""
    return significant(value, 4)


def fit_record(fit: Any) -> dict[str, Any]:
    """The structured result of one fit, as ``evaluate_formulas`` returns it."""
    return Candidate.from_fit(fit).record()


def _constants_text(constants: Mapping[str, Any]) -> str:
    if not constants:
        return ""
    return " [" + ", ".join(f"{name}={significant(value, 5)}" for name, value in constants.items()) + "]"


def _indent_rest(text: str) -> str:
    lines = str(text).splitlines() or [""]
    return "\n".join([lines[0], *("      " + line for line in lines[1:])])


def units_note(record: Mapping[str, Any]) -> str:
    """`` -- dimensionally inconsistent: <why>`` for a flagged fit, else nothing."""
    if record.get("dimensionally_consistent") is False:
        return f" -- dimensionally inconsistent: {record.get('units_mismatch') or 'units do not match'}"
    return ""


def _result_line(index: int, record: Mapping[str, Any]) -> str:
    status = record.get("status")
    expression = record.get("expression")
    if status == "ok":
        return (
            f"{index}. ok val_nmse={format_nmse(record.get('val_nmse'))} "
            f"train_nmse={format_nmse(record.get('train_nmse'))} complexity={record.get('complexity')} "
            f"{expression}{_constants_text(record.get('constants') or {})}{units_note(record)}"
        )
    return f"{index}. {status} {expression} :: " + _indent_rest(record.get("error") or "no details")


def _mean_finite(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def _corr(a: np.ndarray, b: np.ndarray) -> float | None:
    keep = np.isfinite(a) & np.isfinite(b)
    if keep.sum() < 3:
        return None
    a, b = a[keep], b[keep]
    if float(np.std(a)) == 0.0 or float(np.std(b)) == 0.0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def _column_stats(values: np.ndarray) -> dict[str, Any]:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return {"min": None, "max": None, "mean": None, "std": None, "positive": False}
    return {
        "min": float(finite.min()),
        "max": float(finite.max()),
        "mean": float(finite.mean()),
        "std": float(finite.std()),
        "positive": bool((finite > 0).all()),
    }


def summarize_data(dataset: Any, rows: int = 5) -> dict[str, Any]:
    """Ranges, means, correlations and a few rows of the training split (never val/test).

    ``correlation`` is Pearson's r with the target; ``log_correlation`` is r between the logs
    (present when a variable and the target are both positive), a hint for power laws.
    """
    names = tuple(dataset.feature_names)
    X = np.asarray(dataset.X_train, dtype=float).reshape(len(dataset.y_train), -1)
    y = np.asarray(dataset.y_train, dtype=float).ravel()
    target = str(getattr(dataset, "target_name", "y") or "y")
    y_stats = _column_stats(y)
    variables: dict[str, Any] = {}
    for j, name in enumerate(names):
        column = X[:, j]
        stats = _column_stats(column)
        stats["correlation"] = _corr(column, y)
        if stats["positive"] and y_stats["positive"]:
            stats["log_correlation"] = _corr(np.log(column), np.log(y))
        variables[name] = stats
    shown = min(max(int(rows), 0), len(y))
    units = getattr(dataset, "units", None)
    extra: dict[str, Any] = {} if units is None else {"units": units.as_text(target)}
    return {
        **extra,
        "target": target,
        "variables": variables,
        "target_stats": y_stats,
        "columns": [*names, target],
        "rows": [[float(v) for v in X[i]] + [float(y[i])] for i in range(shown)],
        "n_train": int(len(y)),
        "n_val": int(len(np.asarray(dataset.y_val))),
        "n_test": int(len(np.asarray(dataset.y_test))),
    }


def format_data_summary(summary: Mapping[str, Any]) -> str:
    """The data summary as a short table (this text also goes into the system prompt)."""
    target = summary["target"]
    lines = [
        f"Training rows: {summary['n_train']} (validation {summary['n_val']}, test {summary['n_test']}). "
        f"Target: {target}.",
        "name: min .. max, mean, std, corr with target (log-log corr)",
    ]
    for name, stats in summary["variables"].items():
        log_corr = stats.get("log_correlation")
        extra = f" ({significant(log_corr, 3)})" if log_corr is not None else ""
        lines.append(
            f"  {name}: {significant(stats['min'], 4)} .. {significant(stats['max'], 4)}, mean {significant(stats['mean'], 4)}, "
            f"std {significant(stats['std'], 4)}, corr {significant(stats['correlation'], 3)}{extra}"
        )
    t = summary["target_stats"]
    lines.append(f"  {target} (target): {significant(t['min'], 4)} .. {significant(t['max'], 4)}, mean {significant(t['mean'], 4)}, std {significant(t['std'], 4)}")
    units = summary.get("units")
    if units:
        lines.append("Units: " + ", ".join(f"{name} [{unit}]" for name, unit in units.items())
                     + f" (the target is {target}). Formulas are checked for dimensional "
                     "consistency; inconsistent ones rank after consistent ones.")
    if summary["rows"]:
        lines.append("First rows (" + ", ".join(summary["columns"]) + "):")
        lines.extend("  " + ", ".join(significant(v, 5) for v in row) for row in summary["rows"])
    return "\n".join(lines)


# --------------------------------------------------------------------------- the tool shell


class FormulaTool(BaseTool[EpisodeContext]):
    """Shared access to the episode context and the one way candidates are fitted and recorded."""

    context: EpisodeContext

    def __init__(self, context: EpisodeContext | None = None) -> None:
        # No context: a tool built to read its metadata or schema; calling it says what is missing.
        if context is not None and not isinstance(context, EpisodeContext):
            raise TypeError(
                f"the {self.metadata.name} tool needs an EpisodeContext, got {type(context).__name__}; "
                "build one with EpisodeContext.create(dataset, evaluator, ...)"
            )
        super().__init__(context)

    def __call__(self, /, **arguments: Any) -> ToolCallResult:
        self._require_context()
        return super().__call__(**arguments)

    async def acall(self, /, **arguments: Any) -> ToolCallResult:
        self._require_context()
        return await super().acall(**arguments)

    def _require_context(self) -> None:
        if not isinstance(self.context, EpisodeContext):
            raise RuntimeError(
                f"the {self.metadata.name} tool was built without an EpisodeContext; build it with "
                f"BaseTool.create({self.metadata.name!r}, context=EpisodeContext.create(dataset, evaluator))"
            )

    def evaluate_many(self, expressions: Iterable[Any]) -> list[Any]:
        """:meth:`BaseTool.evaluate_many`, recorded like every fit a formula tool makes."""
        fits, _ = self._fit([formula_text(e) for e in expressions])
        return fits

    def _fit(self, expressions: list[str], origins: Sequence[str] | None = None,
             starts: Sequence[Mapping[str, float] | None] | None = None,
             ) -> tuple[list[Any], tuple[Candidate, ...]]:
        """Fit, record (archive and recorder) and return the fits and their candidates.

        Under :meth:`EpisodeState.fitting`: the loop may stop waiting for this call at its
        deadline, and the episode's row count waits for the fits it still records."""
        with self.context.episode.fitting():
            try:
                fits = evaluate_expressions(self.context, expressions, starts)
            except Exception as exc:  # the evaluator is down or broken: a tool failure, not a bad formula
                raise EvaluatorFailure(
                    f"the evaluator could not fit the batch ({type(exc).__name__}: {exc}); "
                    "nothing was evaluated, try again"
                ) from exc
            fits = with_dimensions(fits, self.context.dataset,
                                   dimensionless_constants=self.context.dimensionless_constants)
            fits = with_origins(fits, origins)
            return fits, self._record(fits)

    def _record(self, fits: Sequence[Any]) -> tuple[Candidate, ...]:
        episode = self.context.episode
        step, call_id, agent_id = episode.step, episode.tool_call_id, episode.agent_id
        candidates = self.context.archive.add(fits, step=step, tool_call_id=call_id)
        recorder = self.context.recorder
        if recorder is None:
            return candidates
        try:
            recorder(fits, agent_id=agent_id, step=step, tool_call_id=call_id)
        except Exception:  # losing a row must not cost the model its answer; counted and logged
            log.exception("agent %s: recording %d candidates failed", agent_id, len(fits))
            episode.note_recording_error()
        return candidates


@BaseTool.register("evaluate_formulas")
class EvaluateFormulas(FormulaTool):
    metadata = ToolMetadata(name="evaluate_formulas", idempotent=True, max_result_chars=12000)

    def execute(self, expressions: list[str], origins: list[str] | None = None,
                starts: list[dict[str, float] | None] | None = None) -> dict[str, Any]:
        """Fit the free constants of each formula on the training data and score it.

        Formulas use the dataset's variables, numbers, + - * / ** (or ^), parentheses, the
        functions sin cos tan exp log sqrt abs tanh arcsin arccos arctan sinh cosh, and pi and
        e. Any other name is a free constant fitted to the data, e.g. "a*x**b + c". Returns per
        formula its status (ok, invalid, nonfinite, error), fitted constants, training and
        validation NMSE (mean squared error / variance of the target; lower is better) and
        complexity (node count), or the error for a formula that could not be used. When the
        data has units, each result also says whether the formula is dimensionally consistent
        and, if not, why; inconsistent formulas rank after consistent ones.

        Args:
            expressions: The formulas to evaluate, one per string (at most 128 per call).
            origins: Optional, one short label per formula saying where it came from (e.g.
                "hypothesis: damped oscillation" or "from fit_power_law"); kept with each
                candidate in the results table, never used in fitting.
            starts: Optional, one object per formula (or null) giving starting values for
                some of its constants, e.g. {"a": 1.3, "b": 0.2} from an earlier fit of a
                related formula: that formula then gets a quick local fit from there instead of
                a fit from scratch. Constants not named start at 1.
        """
        limit = self.context.limits.max_expressions_per_call
        if not expressions:
            return {"success": False, "reason": "expressions is empty: send at least one formula to evaluate."}
        if len(expressions) > limit:
            return {
                "success": False,
                "reason": f"expressions has {len(expressions)} formulas; at most {limit} are accepted per call. "
                "Send the most promising ones, or split them over several calls.",
            }
        problem = check_origins(origins, len(expressions))
        if problem is None and starts is not None and len(starts) != len(expressions):
            problem = (f"starts has {len(starts)} entries for {len(expressions)} formulas: give "
                       "one per formula (null where a formula has none), or leave it out")
        if problem is not None:
            return {"success": False, "reason": problem}
        _, candidates = self._fit([str(e) for e in expressions], origins, starts)
        records = [c.record() for c in candidates]
        best = best_of(candidates)
        return {"results": records, "best": best.brief() if best is not None else None}

    def format_result_dict(self, result: Any) -> str:
        records = result.get("results") or []
        counts: dict[str, int] = {}
        for record in records:
            counts[str(record.get("status"))] = counts.get(str(record.get("status")), 0) + 1
        tally = ", ".join(f"{n} {status}" for status, n in counts.items())
        head = f"Evaluated {len(records)} formula(s) ({tally})."
        best = result.get("best")
        if best:
            head += (f" Best here: {best['expression']} val_nmse={format_nmse(best.get('val_nmse'))}"
                     f"{units_note(best)}.")
        overall = self.context.archive.best()
        if overall is not None:
            head += (f" Best so far: {overall.expression} "
                     f"val_nmse={format_nmse(nmse_fitness(overall))}.")
        return "\n".join([head, *(_result_line(i, r) for i, r in enumerate(records, 1))])


@BaseTool.register("data_summary")
class DataSummary(FormulaTool):
    metadata = ToolMetadata(name="data_summary", read_only=True, idempotent=True)

    def execute(self) -> dict[str, Any]:
        """Describe the training data: each variable's range, mean, spread and correlation with
        the target, the target's range, and the first few rows."""
        return summarize_data(self.context.dataset)

    def format_result_dict(self, result: Any) -> str:
        return format_data_summary(result)


@BaseTool.register("best_formulas")
class BestFormulas(FormulaTool):
    metadata = ToolMetadata(name="best_formulas", read_only=True, idempotent=True)

    def execute(self, k: int = 5, simplify: bool = True) -> dict[str, Any]:
        """The best formulas evaluated so far, by every agent of the run: the Pareto front of
        complexity against validation NMSE (each formula is more accurate than every simpler
        one), each with its simplified form (constants written in, snapped to closed forms
        where that fits as well).

        Args:
            k: How many formulas to list (1 to 50); the most accurate ones are kept.
            simplify: Also give each formula's simplified form (up to a few seconds).
        """
        if not 1 <= k <= 50:
            return {"success": False, "reason": f"k must be between 1 and 50, got {k}."}
        archive = self.context.archive
        front, run_wide = with_run_front(archive.front(), self.context.run_front)
        kept = sorted(front, key=rank_key)[:k]
        kept.sort(key=lambda c: (c.complexity or 0, fitness(c)))
        entries = [c.brief() for c in kept]
        if simplify:
            simplified = simplify_entries(entries, self.context.dataset, budget_s=SIMPLIFY_BUDGET_S)
            for entry, form in zip(entries, simplified):
                entry["simplified"] = form.expression if math.isfinite(form.raw_nmse) else None
        return {
            "front": entries,
            "front_size": len(front),
            "evaluated": len(archive),
            "run_wide": run_wide,
        }

    def format_result_dict(self, result: Any) -> str:
        front = result["front"]
        if not front:
            return f"No formula has been fitted successfully yet ({result['evaluated']} evaluated)."
        lines = [
            f"Pareto front{' of every agent' if result.get('run_wide') else ''} ({len(front)} of "
            f"{result['front_size']} shown; {result['evaluated']} candidates evaluated here), simplest first:"
        ]
        for cand in front:
            simpler = (f"  simplified: {cand['simplified']}"
                       if cand.get("simplified") not in (None, cand["expression"]) else "")
            lines.append(
                f"  complexity={cand['complexity']} val_nmse={format_nmse(cand['val_nmse'])} "
                f"{cand['expression']}{_constants_text(cand['constants'])}{units_note(cand)}"
                f"{simpler}"
            )
        return "\n".join(lines)


@BaseTool.register("submit_formula")
class SubmitFormula(FormulaTool):
    metadata = ToolMetadata(name="submit_formula")

    def execute(self, expression: str, rationale: str = "") -> dict[str, Any]:
        """Submit your final answer. The formula is fitted and scored like any candidate and the
        search ends after this turn. Submit only a formula that fits (status ok).

        Args:
            expression: The formula you answer with.
            rationale: Why you believe it is the law behind the data (optional, brief).
        """
        _, (cand,) = self._fit([str(expression)])
        if not cand.ok:
            return {
                "success": False,
                "reason": f"not submitted: the formula's status is {cand.status}: "
                f"{cand.error or 'it could not be fitted'}. Fix it and submit again.",
            }
        self.context.episode.submit(Submission(cand, str(rationale)[:MAX_RATIONALE_CHARS]))
        return {
            "submitted": True,
            "expression": cand.expression,
            "constants": dict(cand.constants),
            "train_nmse": cand.train_nmse,
            "val_nmse": cand.val_nmse,
            "complexity": cand.complexity,
            **({} if cand.dimensionally_consistent is None else {
                "dimensionally_consistent": cand.dimensionally_consistent,
                "units_mismatch": cand.units_mismatch}),
        }

    def format_result_dict(self, result: Any) -> str:
        return (
            f"Submitted {result['expression']}{_constants_text(result['constants'])}: "
            f"val_nmse={format_nmse(result['val_nmse'])}, complexity={result['complexity']}"
            f"{units_note(result)}. The search ends after this turn."
        )


# --------------------------------------------------------------------------- wiring


#: The tool context for one episode, by its earlier name (it returned a dict before).
formula_tool_context = EpisodeContext.create
