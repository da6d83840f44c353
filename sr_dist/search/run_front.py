"""The run's Pareto front over every agent's candidates: what agents share (migration).

Each agent keeps its own archive; the result writer sees every agent's rows. It keeps this
front (complexity against validation NMSE, :func:`~sr_dist.candidate.candidate_front`'s rules)
as rows arrive, and ``best_formulas`` reads it, so one agent's best formulas reach the others:
an ``evolve`` agent breeds from them, an LLM agent reads them (docs/evolve.md, "Migration").

Memory stays the size of the front: a row another member beats on both complexity and NMSE is
dropped at once (most rows, read off three numbers, no candidate built), and the front of the
old front and the newcomers is the front of all rows.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from sr_dist.candidate import NMSE_RESOLUTION, Candidate, candidate_front, ranked_nmse, record_fitness

__all__ = ["RunFront"]


class RunFront:
    """The Pareto front of the candidate rows given to :meth:`add` (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._members: tuple[Candidate, ...] = ()
        #: (complexity, clamped NMSE, consistent-or-unchecked, key) of each member, for the
        #: fast rejection of dominated rows.
        self._marks: tuple[tuple[int, float, bool, str], ...] = ()
        self._offered = 0

    def add(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Consider candidate rows (``CANDIDATE_SCHEMA`` dicts or tool records); returns how
        many joined the front."""
        fresh: list[Candidate] = []
        with self._lock:
            marks = self._marks
            for row in rows:
                self._offered += 1
                if row.get("status") != "ok":
                    continue
                loss = max(record_fitness(row), NMSE_RESOLUTION)
                complexity = row.get("complexity")
                if not math.isfinite(loss) or not isinstance(complexity, int):
                    continue
                sound = row.get("dimensionally_consistent") is not False
                key = str(row.get("canonical") or row.get("expression") or "")
                if any(_beats(mark, complexity, loss, key) and (mark[2] or not sound) for mark in marks):
                    continue
                fresh.append(Candidate.from_fit(row))
            if not fresh:
                return 0
            members = candidate_front((*self._members, *fresh))
            self._members = members
            self._marks = tuple((c.complexity or 0, ranked_nmse(c), c.dimensionally_consistent is not False,
                                 c.key) for c in members)
            known = {id(c) for c in members}
            return sum(1 for c in fresh if id(c) in known)

    def front(self) -> tuple[Candidate, ...]:
        """The front, simplest first."""
        with self._lock:
            return self._members

    @property
    def offered(self) -> int:
        """Rows considered so far."""
        with self._lock:
            return self._offered


def _beats(mark: tuple[int, float, bool, str], complexity: int, loss: float, key: str) -> bool:
    """Whether a member (its mark) keeps a row off the front: as simple and at least as
    accurate, ties going to the first key (:func:`~sr_dist.candidate.pareto_front`'s order)."""
    size, best, _, known = mark
    if size != complexity:
        return size < complexity and best <= loss
    return best < loss or (best == loss and known <= key)
