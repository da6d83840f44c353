"""The search state, rebuilt from the structured results of earlier ``evaluate_formulas`` calls.

Nothing here remembers anything between turns: :func:`read_history` turns the context's
``tool_history`` into a :class:`History` (what was proposed, what it scored), so a fresh
proposer given the same context reaches the same state. Parsing is memoised by text only.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from sr_dist.candidate import pareto_front as front_of
from sr_dist.candidate import record_fitness
from sr_dist.formula import Node
from sr_dist.formula.memo import parse_cached
from sr_dist.sr.evolve.tree import with_constant_values

__all__ = [
    "EVALUATE_TOOL",
    "FRONT_TOOL",
    "SUBMIT_TOOL",
    "SUMMARY_TOOL",
    "Individual",
    "History",
    "read_history",
    "HistoryReader",
    "score",
    "pareto_front",
    "Standing",
    "Standings",
    "tournament",
    "proposed_keys",
]

EVALUATE_TOOL = "evaluate_formulas"
SUBMIT_TOOL = "submit_formula"
#: The run's Pareto front over every agent (migration: its members join the breeding pool).
FRONT_TOOL = "best_formulas"
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
    #: The tree as parsed (constants without values); :attr:`tree` is what the search breeds.
    parsed_tree: Node
    nmse: float
    complexity: int
    #: Which ``evaluate_formulas`` call (0-based) produced it.
    generation: int
    #: The dimensional check's verdict (None: the dataset has no units).
    consistent: bool | None = None
    #: Fitted only by a local search from inherited constants (``starts``), never in full:
    #: the search asks for a full fit once such a candidate reaches the Pareto front.
    local: bool = False
    #: Fitted constant values as (name, value) pairs, for offspring to inherit (empty: none
    #: carried).
    fitted: tuple[tuple[str, float], ...] = field(default=(), repr=False)

    @cached_property
    def tree(self) -> Node:
        """``parsed_tree`` with each constant carrying its ``fitted`` value
        (:func:`~sr_dist.sr.evolve.tree.with_constant_values`), built when first bred from:
        most individuals never are."""
        if not self.fitted:
            return self.parsed_tree
        return with_constant_values(self.parsed_tree, dict(self.fitted))


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
    #: The leaders as :class:`HistoryReader` kept them up to date (None: computed on demand);
    #: derived from ``individuals``, so it takes no part in equality.
    standing: Standing | None = field(default=None, compare=False, repr=False)

    @property
    def best(self) -> Individual | None:
        """Lowest NMSE, dimensionally consistent ones (where checked) first."""
        if self.standing is not None:
            return self.standing.best
        return min(self.individuals, key=_best_order, default=None)

    def pareto(self) -> tuple[Individual, ...]:
        """:func:`pareto_front` of the individuals."""
        if self.standing is not None:
            return self.standing.front
        return tuple(pareto_front(self.individuals))

    def ranked(self, parsimony: float) -> tuple[Individual, ...]:
        """The individuals best first by ``(score(i, parsimony), canonical)``."""
        if self.standing is not None and self.standing.parsimony == parsimony:
            return self.standing.ranked
        return tuple(sorted(self.individuals, key=lambda i: (score(i, parsimony), i.canonical)))

    @property
    def has_units(self) -> bool:
        """Whether the candidates were checked against units (some carry a verdict)."""
        if self.standing is not None:
            return self.standing.units
        return any(i.consistent is not None for i in self.individuals)

    def solutions(self, target_nmse: float) -> list[Individual]:
        """Candidates under ``target_nmse``; with units, only the consistent ones count."""
        if self.standing is not None and self.standing.min_nmse >= target_nmse:
            return []  # nothing under the target: no need to look through them all
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


def proposed_keys(expressions: Iterable[Any], variables: Sequence[str]) -> frozenset[str]:
    """The keys an ``evaluate_formulas`` call's ``expressions`` count as tried by (what
    :class:`HistoryReader` adds to :attr:`History.seen` for them): each text's canonical form,
    or the text itself where it does not parse; entries that are not text count for nothing."""
    names = tuple(variables)
    return frozenset(_tried_key(text, names) for text in expressions if isinstance(text, str))


def _tried_key(text: str, names: tuple[str, ...]) -> str:
    parsed = parse_cached(text, names)
    return parsed.canonical if parsed is not None else text


def _best_order(ind: Individual) -> tuple[bool, float, int, str]:
    return ind.consistent is False, ind.nmse, ind.complexity, ind.canonical


@dataclass(frozen=True)
class Standing:
    """A snapshot of :class:`Standings`: what :meth:`History.best`, :meth:`History.pareto` and
    :meth:`History.ranked` return for ``parsimony``."""

    parsimony: float
    best: Individual | None
    front: tuple[Individual, ...]
    ranked: tuple[Individual, ...]
    #: Whether any individual carries a dimensional verdict (:attr:`History.has_units`).
    units: bool = False
    #: No individual's NMSE is below this (a lower bound: an individual replaced by its full
    #: fit may leave it lower than the current minimum).
    min_nmse: float = math.inf


class Standings:
    """The best individual, the Pareto front and the ranking by :func:`score`, kept up to date
    as individuals arrive, so a turn's cost does not grow with the population (re-sorting every
    candidate each turn was a third of ``evolve``'s proposing time late in a 30-s run).

    Each view equals its from-scratch value over the same individuals: the front of the old
    front and the newcomers is the front of all (a dropped item stays dominated), and the
    ranking is a sorted insert. Replacing an individual that is the best or on the front
    recomputes that view from all of them (rare: a local fit replaced by its full fit)."""

    def __init__(self, parsimony: float) -> None:
        self.parsimony = float(parsimony)
        self._keys: list[tuple[float, str]] = []
        self._ranked: list[Individual] = []
        self._front: list[Individual] = []
        self._pending: list[Individual] = []
        self._best: Individual | None = None
        self._stale = False
        self._units = False
        self._min_nmse = math.inf

    def _key(self, ind: Individual) -> tuple[float, str]:
        return score(ind, self.parsimony), ind.canonical

    def add(self, ind: Individual, replaces: Individual | None = None) -> None:
        """``ind`` joins; ``replaces``: the individual of the same canonical form it replaces."""
        if replaces is not None:
            key = self._key(replaces)
            at = bisect.bisect_left(self._keys, key)
            while self._ranked[at] is not replaces:
                at += 1
            del self._keys[at], self._ranked[at]
            if replaces is self._best or any(m is replaces for m in self._front):
                self._stale = True
        self._units = self._units or ind.consistent is not None
        self._min_nmse = min(self._min_nmse, ind.nmse)
        key = self._key(ind)
        at = bisect.bisect_right(self._keys, key)
        self._keys.insert(at, key)
        self._ranked.insert(at, ind)
        if not self._stale and (self._best is None or _best_order(ind) < _best_order(self._best)):
            self._best = ind
        self._pending.append(ind)

    def snapshot(self) -> Standing:
        if self._stale:
            self._front = pareto_front(self._ranked)
            self._best = min(self._ranked, key=_best_order, default=None)
            self._stale = False
        elif self._pending:
            self._front = pareto_front(self._front + self._pending)
        self._pending = []
        return Standing(self.parsimony, self._best, tuple(self._front), tuple(self._ranked),
                        self._units, self._min_nmse)


class HistoryReader:
    """:func:`read_history`, incrementally: a conversation's ``tool_history`` only grows
    between turns, so each :meth:`read` processes the pairs added since the last one instead
    of the whole history (which made a long run's turns cost more and more). A history that is
    not an extension of the last one read (another conversation, a trimmed or rebuilt list) is
    read from the start. Either way the :class:`History` equals ``read_history``'s.
    Not thread-safe: one reader per conversation."""

    def __init__(self, variables: Sequence[str], with_constants: bool = False,
                 parsimony: float | None = None) -> None:
        self.names = tuple(variables)
        self.with_constants = with_constants
        #: The parsimony whose ranking the reader keeps (None: no :class:`Standings`).
        self.parsimony = parsimony
        self._reset()

    def _reset(self) -> None:
        self._pairs: list[tuple[Any, Any]] = []
        self._unique: dict[str, Individual] = {}
        self._seen: set[str] = set()
        self._best = math.inf
        self._best_by_generation: list[float] = []
        self._submitted: list[str] = []
        self._summary: Mapping[str, Any] | None = None
        self._standings = Standings(self.parsimony) if self.parsimony is not None else None

    def _extends(self, pairs: Sequence[tuple[Any, Any]]) -> bool:
        done = self._pairs
        if len(pairs) < len(done):
            return False
        # The same objects at the ends of what was read (pairs are never copied in place).
        return not done or (pairs[0] is done[0] and pairs[len(done) - 1] is done[-1])

    def read(self, tool_history: Sequence[tuple[Any, Any]],
             held: Sequence[Any] | None = None) -> History:
        """The state after ``tool_history``. ``held``: the expressions of one more
        ``evaluate_formulas`` call whose results are not read yet (a proposal bred ahead):
        they count as tried (:func:`proposed_keys`) and the call counts as a call."""
        if not self._extends(tool_history):
            self._reset()
        for pair in tool_history[len(self._pairs):]:
            self._pairs.append(pair)
            self._take(pair)
        seen = frozenset(self._seen)
        if held is not None:
            seen |= proposed_keys(held, self.names)
        return History(
            individuals=tuple(self._unique.values()),
            seen=seen,
            generations=len(self._best_by_generation),
            best_by_generation=tuple(self._best_by_generation),
            calls=len(self._pairs) + (held is not None),
            submitted=tuple(self._submitted),
            summary=self._summary,
            standing=self._standings.snapshot() if self._standings is not None else None,
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
        if name == FRONT_TOOL and getattr(result, "ok", False) and isinstance(payload, Mapping):
            self._migrate(payload.get("front"))
        if name != EVALUATE_TOOL:
            return
        generation = len(self._best_by_generation)
        proposed = arguments.get("expressions") if isinstance(arguments, Mapping) else None
        starts = arguments.get("starts") if isinstance(arguments, Mapping) else None
        started: set[str] = set()  # texts sent with a start (a local search)
        in_full: set[str] = set()  # structures asked for without one (a full fit)
        for i, text in enumerate(proposed if isinstance(proposed, list) else []):
            if isinstance(text, str):
                key = _tried_key(text, names)
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
            self._keep(key, Individual(
                expression=expression,
                canonical=key,
                parsed_tree=parsed.tree,
                nmse=nmse,
                complexity=parsed.complexity,
                generation=generation,
                consistent=_verdict(record),
                local=local,
                fitted=tuple(_fitted_constants(record).items()) if self.with_constants else (),
            ))
        for key in in_full:  # asked for in full, even if that fit failed: local no more
            known = self._unique.get(key)
            if known is not None and known.local:
                self._keep(key, replace(known, local=False))
        self._best_by_generation.append(self._best)

    def _migrate(self, entries: Any) -> None:
        """Members of the run's front (``best_formulas``: other agents' candidates among them)
        this history does not hold yet join it, with their fitted constants, as full fits."""
        generation = len(self._best_by_generation)
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, Mapping):
                continue
            expression, canonical = entry.get("expression"), entry.get("canonical")
            nmse = record_fitness(entry)
            if not isinstance(expression, str):
                continue
            parsed = parse_cached(expression, self.names)
            if parsed is None or not math.isfinite(nmse):
                continue
            key = canonical if isinstance(canonical, str) else parsed.canonical
            self._seen.add(key)
            if key in self._unique:
                continue
            self._best = min(self._best, nmse)
            if self._best_by_generation:  # the generation it arrived in knows it
                self._best_by_generation[-1] = min(self._best_by_generation[-1], nmse)
            self._keep(key, Individual(
                expression=expression, canonical=key, parsed_tree=parsed.tree, nmse=nmse,
                complexity=parsed.complexity, generation=generation, consistent=_verdict(entry),
                fitted=tuple(_fitted_constants(entry).items()) if self.with_constants else ()))

    def _keep(self, key: str, ind: Individual) -> None:
        replaces = self._unique.get(key)
        self._unique[key] = ind
        if self._standings is not None:
            self._standings.add(ind, replaces)


def score(ind: Individual, parsimony: float) -> float:
    """Lower is better: ``log10(NMSE)`` plus a parsimony pressure per node (and
    :data:`INCONSISTENT_PENALTY` for a dimensionally inconsistent candidate)."""
    penalty = INCONSISTENT_PENALTY if ind.consistent is False else 0.0
    return math.log10(max(ind.nmse, NMSE_FLOOR)) + parsimony * ind.complexity + penalty


def pareto_front(individuals: Sequence[Individual]) -> list[Individual]:
    """The candidates no other candidate beats on both NMSE and complexity (raw NMSE: the
    search keeps the more exact of two near-exact fits as breeding stock)."""
    return front_of(individuals, loss=lambda i: i.nmse, complexity=lambda i: i.complexity, key=lambda i: i.canonical)


def tournament(pool: Sequence[Individual], rng: np.random.Generator, size: int, parsimony: float,
               keys: Sequence[tuple[float, str]] | None = None) -> Individual:
    """The best (by :func:`score`, then canonical form) of ``size`` candidates drawn from
    ``pool``. ``keys``: each member's ``(score(member, parsimony), member.canonical)``, computed
    once for the many tournaments of a batch (the same winner, without scoring every draw)."""
    picks = rng.integers(len(pool), size=max(1, size))
    if keys is None:
        return min((pool[int(i)] for i in picks), key=lambda i: (score(i, parsimony), i.canonical))
    return pool[min(picks.tolist(), key=keys.__getitem__)]
