"""What one agent episode knows besides its conversation: every candidate, the best, its answer.

The formula tools write here and the agent loop reads from here (through the episode context,
:class:`sr_dist.sr.episode.EpisodeContext`), so neither has to parse the other's text.
:class:`Submission` is a frozen value; :class:`CandidateArchive` and :class:`EpisodeState` are
the thin, thread-safe shells (tools run in worker threads). The candidate value and its
ordering and Pareto rules live in :mod:`sr_dist.candidate`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sr_dist.candidate import Candidate, candidate_front, fitness, rank_key

__all__ = ["CandidateArchive", "EpisodeState", "Submission", "with_run_front"]

log = logging.getLogger(__name__)


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
        added = tuple(Candidate.from_fit(f, step=step, tool_call_id=tool_call_id) for f in fits)
        with self._lock:
            for cand in added:
                self._count += 1
                self._status_counts[cand.status] = self._status_counts.get(cand.status, 0) + 1
                if not math.isfinite(fitness(cand)):
                    continue
                key = cand.key
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
        return candidate_front(kept)

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


def with_run_front(own: tuple[Candidate, ...], read: Callable[[], Sequence[Any]] | None,
                   ) -> tuple[tuple[Candidate, ...], bool]:
    """An episode's own front merged with the run's (every agent's, from ``read``), and
    whether the run's was read: a run front that cannot be read leaves the episode's own, so
    a lost result writer never fails the tool call."""
    if read is None:
        return own, False
    try:
        others = tuple(c for c in read() if isinstance(c, Candidate))
    except Exception as exc:  # noqa: BLE001 - the agent's own front still answers
        log.warning("the run's front could not be read (%s); the agent's own front answers", exc)
        return own, False
    return candidate_front((*own, *others)), True


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
        #: Fits under way (fitted, not yet recorded): a tool call the loop stopped waiting for
        #: at the deadline still records its fits when they return, and whoever counts the
        #: episode's rows waits for them (:meth:`wait_for_fits`).
        self._fitting = 0
        self._settled = threading.Condition(self._lock)

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

    @contextlib.contextmanager
    def fitting(self) -> Iterator[None]:
        """Mark a fit-and-record under way for the duration of the block."""
        with self._lock:
            self._fitting += 1
        try:
            yield
        finally:
            with self._lock:
                self._fitting -= 1
                self._settled.notify_all()

    @property
    def fits_in_progress(self) -> int:
        with self._lock:
            return self._fitting

    def wait_for_fits(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until no fit is under way; ``True`` when none is."""
        with self._lock:
            return self._settled.wait_for(lambda: self._fitting == 0, timeout=timeout_s)

    def __repr__(self) -> str:
        return f"EpisodeState(agent_id={self.agent_id}, step={self.step}, submitted={self.submission is not None})"

