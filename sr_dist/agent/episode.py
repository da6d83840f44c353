"""The seam between the generic agent loop and the task it works on.

The loop knows turns, calls, limits and the conversation; it does not know what a formula or a
candidate is. What it needs from the task (whose turn and call it is, whether the task has its
answer, how good the best attempt is, what to report at the end) it asks an :class:`Episode`.
The symbolic-regression domain's episode context (:class:`sr_dist.sr.EpisodeContext`) is one;
:class:`NoEpisode` is the default for an agent with only general-purpose tools.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["Episode", "EpisodeReport", "NoEpisode"]


@dataclass(frozen=True)
class EpisodeReport:
    """What an episode says about itself when the loop ends (copied into ``AgentResult``)."""

    #: The task's best attempt and its answer, in the task's own value type (or None).
    best: Any = None
    submitted: Any = None
    #: Attempts made (for symbolic regression: candidates evaluated).
    candidates: int = 0
    #: Attempts whose recording failed (they were not lost for the model, only for the table).
    recording_errors: int = 0


@runtime_checkable
class Episode(Protocol):
    """The task side of one agent episode, as the loop sees it."""

    @property
    def agent_id(self) -> int: ...

    @property
    def cancel_event(self) -> Any:
        """Set when the run is cancelled (any object with ``is_set()``)."""
        ...

    def begin_turn(self, step: int) -> None:
        """A new turn starts (tools record the step their results came from)."""

    def begin_call(self, call_id: str | None) -> None:
        """The call ``call_id`` runs next (None: several calls run together)."""

    def finished(self) -> bool:
        """The task has its answer: the loop stops after this turn (``submitted``)."""
        ...

    def score(self) -> float:
        """The best attempt's loss, lower is better (``inf`` before any); the loop compares it
        with ``AgentLimits.target_nmse``."""
        ...

    def report(self) -> EpisodeReport: ...


class NoEpisode:
    """An episode with no task state: never finished, no score, nothing to report."""

    def __init__(self, agent_id: int = 0, cancel_event: Any = None) -> None:
        self._agent_id = int(agent_id)
        self._cancel_event = cancel_event if cancel_event is not None else threading.Event()

    @property
    def agent_id(self) -> int:
        return self._agent_id

    @property
    def cancel_event(self) -> Any:
        return self._cancel_event

    def begin_turn(self, step: int) -> None:
        del step

    def begin_call(self, call_id: str | None) -> None:
        del call_id

    def finished(self) -> bool:
        return False

    def score(self) -> float:
        return math.inf

    def report(self) -> EpisodeReport:
        return EpisodeReport()
