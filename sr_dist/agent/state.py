"""What one agent episode knows besides its conversation: every candidate, the best, its answer.

The formula tools write here and the agent loop reads from here, both through the tool context,
so neither has to parse the other's text. :class:`Candidate` and :class:`Submission` are frozen
values; :class:`CandidateArchive` and :class:`EpisodeState` are the thin, thread-safe shells
(tools run in worker threads). The ordering and Pareto logic are plain functions.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

__all__ = [
    "Candidate",
    "CandidateArchive",
    "NMSE_RESOLUTION",
    "EpisodeState",
    "Submission",
    "best_of",
    "candidate_from_fit",
    "fitness",
    "pareto_front",
    "rank_key",
    "ranked_nmse",
]


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _get(fit: Any, name: str) -> Any:
    if isinstance(fit, Mapping):
        return fit.get(name)
    return getattr(fit, name, None)


@dataclass(frozen=True)
class Candidate:
    """One evaluated formula, as the episode remembers it (test NMSE included, never shown)."""

    expression: str
    canonical: str | None
    status: str
    error: str | None = None
    constants: Mapping[str, float] = field(default_factory=dict)
    complexity: int | None = None
    train_nmse: float | None = None
    val_nmse: float | None = None
    test_nmse: float | None = None
    step: int = 0
    tool_call_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "canonical": self.canonical,
            "status": self.status,
            "error": self.error,
            "constants": dict(self.constants),
            "complexity": self.complexity,
            "train_nmse": self.train_nmse,
            "val_nmse": self.val_nmse,
            "test_nmse": self.test_nmse,
            "step": self.step,
            "tool_call_id": self.tool_call_id,
        }


def candidate_from_fit(fit: Any, *, step: int = 0, tool_call_id: str | None = None) -> Candidate:
    """A :class:`Candidate` from a ``FitResult`` (or any object/mapping with its field names)."""
    constants = _get(fit, "constants")
    complexity = _get(fit, "complexity")
    return Candidate(
        expression=str(_get(fit, "expression") or ""),
        canonical=_get(fit, "canonical"),
        status=str(_get(fit, "status") or "error"),
        error=_get(fit, "error"),
        constants={str(k): float(v) for k, v in constants.items()} if isinstance(constants, Mapping) else {},
        complexity=int(complexity) if isinstance(complexity, int) and not isinstance(complexity, bool) else None,
        train_nmse=_number(_get(fit, "train_nmse")),
        val_nmse=_number(_get(fit, "val_nmse")),
        test_nmse=_number(_get(fit, "test_nmse")),
        step=step,
        tool_call_id=tool_call_id,
    )


def fitness(candidate: Candidate) -> float:
    """Validation NMSE (train NMSE when there is no validation split); ``inf`` when unusable."""
    if not candidate.ok:
        return math.inf
    for value in (candidate.val_nmse, candidate.train_nmse):
        if value is not None and not math.isnan(value):
            return value
    return math.inf


def record_fitness(record: Mapping[str, Any]) -> float:
    """:func:`fitness` of a plain result row (an ``evaluate_formulas`` result, a Parquet row):
    validation NMSE, else train NMSE; ``inf`` when neither is a finite number."""
    for key in ("val_nmse", "train_nmse"):
        try:
            value = float(record.get(key))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            return value
    return math.inf


#: NMSE differences below this are rounding noise (float32 fits of an exact formula land
#: anywhere in 1e-15..1e-12), so for ranking every NMSE under it counts as equal: among
#: essentially perfect fits the simplest wins, not the one with the luckiest rounding.
NMSE_RESOLUTION = 1e-12


def ranked_nmse(candidate: Candidate) -> float:
    """:func:`fitness` clamped at :data:`NMSE_RESOLUTION`, the value orderings compare."""
    return max(fitness(candidate), NMSE_RESOLUTION)


def rank_key(candidate: Candidate) -> tuple[float, int, str]:
    """Total order "better first": lower NMSE (to :data:`NMSE_RESOLUTION`), then simpler, then
    canonical text (deterministic)."""
    return (ranked_nmse(candidate), candidate.complexity or 0, candidate.canonical or candidate.expression)


def pareto_front(candidates: Iterable[Candidate]) -> tuple[Candidate, ...]:
    """The candidates no other beats on both complexity and NMSE, simplest first.

    Only fitted (``ok``, finite NMSE) candidates take part; one per canonical form.
    """
    usable = [c for c in candidates if math.isfinite(fitness(c))]
    ordered = sorted(usable, key=lambda c: (c.complexity or 0, ranked_nmse(c), c.canonical or c.expression))
    front: list[Candidate] = []
    seen: set[str] = set()
    for cand in ordered:
        key = cand.canonical or cand.expression
        if key in seen:
            continue
        seen.add(key)
        if not front or ranked_nmse(cand) < ranked_nmse(front[-1]):
            front.append(cand)
    return tuple(front)


class CandidateArchive:
    """Every candidate an episode evaluated: counts, best so far, and the Pareto front.

    Thread-safe (tools run on worker threads). Memory stays small: per canonical form only the
    best fit is kept (fits of one form are equal up to restarts), plus counters.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, Candidate] = {}
        self._best: Candidate | None = None
        self._count = 0
        self._status_counts: dict[str, int] = {}

    def add(self, fits: Iterable[Any], *, step: int = 0, tool_call_id: str | None = None) -> tuple[Candidate, ...]:
        """Record fit results (``FitResult``-like); returns them as candidates, in order."""
        added = tuple(candidate_from_fit(f, step=step, tool_call_id=tool_call_id) for f in fits)
        with self._lock:
            for cand in added:
                self._count += 1
                self._status_counts[cand.status] = self._status_counts.get(cand.status, 0) + 1
                if not math.isfinite(fitness(cand)):
                    continue
                key = cand.canonical or cand.expression
                known = self._by_key.get(key)
                if known is None or rank_key(cand) < rank_key(known):
                    self._by_key[key] = cand
                if self._best is None or rank_key(cand) < rank_key(self._best):
                    self._best = cand
        return added

    def best(self) -> Candidate | None:
        """The best fitted candidate so far (lowest NMSE, then simplest), or None."""
        with self._lock:
            return self._best

    def front(self) -> tuple[Candidate, ...]:
        """The Pareto front (complexity vs NMSE) of everything fitted so far."""
        with self._lock:
            kept = list(self._by_key.values())
        return pareto_front(kept)

    def status_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._status_counts)

    @property
    def fitted(self) -> int:
        """Distinct canonical forms fitted successfully."""
        with self._lock:
            return len(self._by_key)

    def __len__(self) -> int:
        with self._lock:
            return self._count

    def __repr__(self) -> str:
        best = self.best()
        shown = f", best={best.expression!r} ({fitness(best):.3g})" if best is not None else ""
        return f"CandidateArchive(candidates={len(self)}{shown})"


@dataclass(frozen=True)
class Submission:
    """The answer an agent submitted: the fitted candidate and the model's rationale."""

    candidate: Candidate
    rationale: str = ""


class EpisodeState:
    """The small mutable state the loop and the tools share during one episode.

    The loop sets ``step`` (the turn number) and ``tool_call_id`` (the call being run, for
    serial calls) so tools can record where a candidate came from; ``submit_formula`` sets
    ``submission``, which ends the episode after the current turn.
    """

    def __init__(self, agent_id: int = 0) -> None:
        self._lock = threading.Lock()
        self.agent_id = int(agent_id)
        self._step = 0
        self._tool_call_id: str | None = None
        self._submission: Submission | None = None
        self._recording_errors = 0

    @property
    def step(self) -> int:
        with self._lock:
            return self._step

    @property
    def tool_call_id(self) -> str | None:
        with self._lock:
            return self._tool_call_id

    def begin_turn(self, step: int) -> None:
        with self._lock:
            self._step = int(step)
            self._tool_call_id = None

    def begin_call(self, tool_call_id: str | None) -> None:
        with self._lock:
            self._tool_call_id = tool_call_id

    @property
    def submission(self) -> Submission | None:
        with self._lock:
            return self._submission

    def submit(self, submission: Submission) -> None:
        """Record the answer; a later submission in the same turn replaces an earlier one."""
        with self._lock:
            self._submission = submission

    def note_recording_error(self) -> None:
        with self._lock:
            self._recording_errors += 1

    @property
    def recording_errors(self) -> int:
        with self._lock:
            return self._recording_errors

    def __repr__(self) -> str:
        return f"EpisodeState(agent_id={self.agent_id}, step={self.step}, submitted={self.submission is not None})"


def best_of(candidates: Sequence[Candidate]) -> Candidate | None:
    """The best of ``candidates`` by :func:`rank_key`, or None when none was fitted."""
    usable = [c for c in candidates if math.isfinite(fitness(c))]
    return min(usable, key=rank_key) if usable else None
