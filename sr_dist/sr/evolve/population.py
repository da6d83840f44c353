"""The search state, rebuilt from the structured results of earlier ``evaluate_formulas`` calls.

Nothing here remembers anything between turns: :func:`read_history` turns the context's
``tool_history`` into a :class:`History` (what was proposed, what it scored), so a fresh
proposer given the same context reaches the same state. Parsing is memoised by text only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from sr_dist.candidate import pareto_front as front_of
from sr_dist.candidate import record_fitness
from sr_dist.formula import Formula, FormulaError, Node, parse_formula
from sr_dist.sr.evolve.tree import with_constant_values

__all__ = [
    "EVALUATE_TOOL",
    "SUBMIT_TOOL",
    "SUMMARY_TOOL",
    "Individual",
    "History",
    "read_history",
    "HistoryReader",
    "parse_cached",
    "score",
    "pareto_front",
    "tournament",
]

EVALUATE_TOOL = "evaluate_formulas"
SUBMIT_TOOL = "submit_formula"
SUMMARY_TOOL = "data_summary"

#: NMSE below this counts as zero when scoring (float32 evaluation floor).
NMSE_FLOOR = 1e-15
#: Score penalty (decades of NMSE) of a dimensionally inconsistent candidate: it still breeds,
#: but a consistent one of similar accuracy is preferred by far.
INCONSISTENT_PENALTY = 3.0


@dataclass(frozen=True)
class Individual:
    """One successfully fitted candidate."""

    expression: str
    canonical: str
    tree: Node
    nmse: float
    complexity: int
    #: Which ``evaluate_formulas`` call (0-based) produced it.
    generation: int
    #: The dimensional check's verdict (None: the dataset has no units).
    consistent: bool | None = None
    #: Fitted only by a local search from inherited constants (``starts``), never in full:
    #: the search asks for a full fit once such a candidate reaches the Pareto front.
    local: bool = False


@dataclass(frozen=True)
class History:
    """What the proposer knows: fitted candidates, every key already tried, and progress."""

    individuals: tuple[Individual, ...]
    seen: frozenset[str]
    #: Number of ``evaluate_formulas`` calls so far.
    generations: int
    #: Best NMSE after each generation (running minimum; inf before any fit).
    best_by_generation: tuple[float, ...]
    #: Number of tool calls of any kind so far (the turn counter for seeding the RNG).
    calls: int
    #: Whether a ``submit_formula`` call has already been made (and evidently not ended the run).
    submitted: tuple[str, ...]
    #: The structured result of a ``data_summary`` call, if one was made.
    summary: Mapping[str, Any] | None

    @property
    def best(self) -> Individual | None:
        """Lowest NMSE, dimensionally consistent ones (where checked) first."""
        return min(self.individuals, key=lambda i: (i.consistent is False, i.nmse, i.complexity, i.canonical),
                   default=None)

    @property
    def has_units(self) -> bool:
        """Whether the candidates were checked against units (some carry a verdict)."""
        return any(i.consistent is not None for i in self.individuals)

    def solutions(self, target_nmse: float) -> list[Individual]:
        """Candidates under ``target_nmse``; with units, only the consistent ones count."""
        solved = [i for i in self.individuals if i.nmse < target_nmse]
        return [i for i in solved if i.consistent is not False] if self.has_units else solved

    def stagnant_for(self, tolerance: float = 1e-3) -> int:
        """Generations since the best NMSE last improved by more than ``tolerance`` (relative)."""
        best = self.best_by_generation
        if not best:
            return 0
        last = 0
        for g in range(1, len(best)):
            if best[g] < best[last] * (1 - tolerance) or (math.isinf(best[last]) and math.isfinite(best[g])):
                last = g
        return len(best) - 1 - last


@lru_cache(maxsize=65536)
def parse_cached(text: str, variables: tuple[str, ...]) -> Formula | None:
    """``parse_formula`` memoised; None for text that does not parse."""
    try:
        return parse_formula(text, variables)
    except FormulaError:
        return None


def _verdict(record: Mapping[str, Any]) -> bool | None:
    value = record.get("dimensionally_consistent")
    return value if isinstance(value, bool) else None


def _fitted_constants(record: Mapping[str, Any]) -> dict[str, float]:
    values = record.get("constants")
    if not isinstance(values, Mapping):
        return {}
    return {str(k): float(v) for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))}


def read_history(tool_history: Iterable[tuple[Any, Any]], variables: Sequence[str],
                 with_constants: bool = False) -> History:
    """Rebuild the search state from ``(ToolCall, ToolCallResult)`` pairs; tolerant of junk.

    ``with_constants``: each individual's tree carries its fitted constant values
    (:func:`~sr_dist.sr.evolve.tree.with_constant_values`), for offspring to inherit."""
    return HistoryReader(variables, with_constants).read(list(tool_history))


class HistoryReader:
    """:func:`read_history`, incrementally: a conversation's ``tool_history`` only grows
    between turns, so each :meth:`read` processes the pairs added since the last one instead
    of the whole history (which made a long run's turns cost more and more). A history that is
    not an extension of the last one read (another conversation, a trimmed or rebuilt list) is
    read from the start. Either way the :class:`History` equals ``read_history``'s.
    Not thread-safe: one reader per conversation."""

    def __init__(self, variables: Sequence[str], with_constants: bool = False) -> None:
        self.names = tuple(variables)
        self.with_constants = with_constants
        self._reset()

    def _reset(self) -> None:
        self._pairs: list[tuple[Any, Any]] = []
        self._unique: dict[str, Individual] = {}
        self._seen: set[str] = set()
        self._best = math.inf
        self._best_by_generation: list[float] = []
        self._submitted: list[str] = []
        self._summary: Mapping[str, Any] | None = None

    def _extends(self, pairs: Sequence[tuple[Any, Any]]) -> bool:
        done = self._pairs
        if len(pairs) < len(done):
            return False
        # The same objects at the ends of what was read (pairs are never copied in place).
        return not done or (pairs[0] is done[0] and pairs[len(done) - 1] is done[-1])

    def read(self, tool_history: Sequence[tuple[Any, Any]]) -> History:
        if not self._extends(tool_history):
            self._reset()
        for pair in tool_history[len(self._pairs):]:
            self._pairs.append(pair)
            self._take(pair)
        return History(
            individuals=tuple(self._unique.values()),
            seen=frozenset(self._seen),
            generations=len(self._best_by_generation),
            best_by_generation=tuple(self._best_by_generation),
            calls=len(self._pairs),
            submitted=tuple(self._submitted),
            summary=self._summary,
        )

    def _take(self, pair: tuple[Any, Any]) -> None:
        call, result = pair
        names, seen = self.names, self._seen
        name = getattr(call, "name", None)
        arguments = getattr(call, "arguments", None) or {}
        payload = getattr(result, "result", None)
        if name == SUMMARY_TOOL and getattr(result, "ok", False) and isinstance(payload, Mapping):
            self._summary = payload
        if name == SUBMIT_TOOL:
            self._submitted.append(str(arguments.get("expression", "")))
        if name != EVALUATE_TOOL:
            return
        generation = len(self._best_by_generation)
        proposed = arguments.get("expressions") if isinstance(arguments, Mapping) else None
        starts = arguments.get("starts") if isinstance(arguments, Mapping) else None
        started: set[str] = set()  # texts sent with a start (a local search)
        in_full: set[str] = set()  # structures asked for without one (a full fit)
        for i, text in enumerate(proposed if isinstance(proposed, list) else []):
            if isinstance(text, str):
                parsed = parse_cached(text, names)
                key = parsed.canonical if parsed is not None else text
                seen.add(key)
                if isinstance(starts, list) and i < len(starts) and starts[i] is not None:
                    started.add(text)
                else:
                    in_full.add(key)
        records = payload.get("results") if getattr(result, "ok", False) and isinstance(payload, Mapping) else None
        for record in records if isinstance(records, list) else []:
            if not isinstance(record, Mapping):
                continue
            expression = record.get("expression")
            canonical = record.get("canonical")
            if isinstance(canonical, str):
                seen.add(canonical)
            if record.get("status") != "ok" or not isinstance(expression, str):
                continue
            nmse = record_fitness(record)
            parsed = parse_cached(expression, names)
            if parsed is None or not math.isfinite(nmse):
                continue
            key = canonical if isinstance(canonical, str) else parsed.canonical
            self._best = min(self._best, nmse)
            local = expression in started
            known = self._unique.get(key)
            # One individual per canonical form: the first one fitted, unless that was a local
            # search and this is the full fit asked for since.
            if known is not None and (local or not known.local):
                continue
            self._unique[key] = Individual(
                expression=expression,
                canonical=key,
                tree=(with_constant_values(parsed.tree, _fitted_constants(record))
                      if self.with_constants else parsed.tree),
                nmse=nmse,
                complexity=parsed.complexity,
                generation=generation,
                consistent=_verdict(record),
                local=local,
            )
        for key in in_full:  # asked for in full, even if that fit failed: local no more
            known = self._unique.get(key)
            if known is not None and known.local:
                self._unique[key] = replace(known, local=False)
        self._best_by_generation.append(self._best)


def score(ind: Individual, parsimony: float) -> float:
    """Lower is better: ``log10(NMSE)`` plus a parsimony pressure per node (and
    :data:`INCONSISTENT_PENALTY` for a dimensionally inconsistent candidate)."""
    penalty = INCONSISTENT_PENALTY if ind.consistent is False else 0.0
    return math.log10(max(ind.nmse, NMSE_FLOOR)) + parsimony * ind.complexity + penalty


def pareto_front(individuals: Sequence[Individual]) -> list[Individual]:
    """The candidates no other candidate beats on both NMSE and complexity (raw NMSE: the
    search keeps the more exact of two near-exact fits as breeding stock)."""
    return front_of(individuals, loss=lambda i: i.nmse, complexity=lambda i: i.complexity, key=lambda i: i.canonical)


def tournament(pool: Sequence[Individual], rng: np.random.Generator, size: int, parsimony: float) -> Individual:
    """The best (by :func:`score`) of ``size`` candidates drawn from ``pool``."""
    picks = rng.integers(len(pool), size=max(1, size))
    return min((pool[int(i)] for i in picks), key=lambda i: (score(i, parsimony), i.canonical))
