"""One symbolic-regression episode's context: what the formula tools and the loop share.

:class:`EpisodeContext` is a frozen value (its parts are the episode's thread-safe shells: the
archive and the episode state). The formula tools read the dataset, the evaluator and the
recorder from it; the agent loop sees it as its :class:`~sr_dist.agent.episode.Episode` (turn and
call bookkeeping, the submission, the best NMSE). It replaces the string-keyed dict that
``formula_tool_context`` returned before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sr_dist.agent.episode import EpisodeReport
from sr_dist.candidate import nmse_fitness
from sr_dist.sr.sandbox import RunPythonLimits
from sr_dist.sr.state import CandidateArchive, EpisodeState

__all__ = ["DEFAULT_MAX_EXPRESSIONS", "EpisodeContext", "EpisodeLimits", "FitEvaluator", "FitRecorder"]

#: Default cap on expressions per ``evaluate_formulas`` call (more is a model-visible error).
DEFAULT_MAX_EXPRESSIONS = 128


class FitEvaluator(Protocol):
    """What fits formulas: the in-process ``Evaluator`` or a client of the Ray evaluator actor.
    ``fit_many`` may return the list or an awaitable of it."""

    def fit_many(self, expressions: list[str]) -> Any: ...


class FitRecorder(Protocol):
    """Where fitted candidates go for the results table (the Ray run sends them to the writer)."""

    def __call__(self, fits: Sequence[Any], *, agent_id: int, step: int, tool_call_id: str | None) -> None: ...


@dataclass(frozen=True)
class EpisodeLimits:
    """Bounds the formula tools enforce within one call."""

    max_expressions_per_call: int = DEFAULT_MAX_EXPRESSIONS

    def __post_init__(self) -> None:
        value = self.max_expressions_per_call
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"max_expressions_per_call must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class EpisodeContext:
    """The dataset, evaluator, recorder, archive, episode state, cancel event and limits of one
    episode. Build it with :meth:`create` (fresh archive and state) or directly."""

    dataset: Any
    evaluator: FitEvaluator
    archive: CandidateArchive = field(default_factory=CandidateArchive)
    episode: EpisodeState = field(default_factory=EpisodeState)
    cancel_event: Any = field(default_factory=threading.Event)
    recorder: FitRecorder | Callable[..., None] | None = None
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    #: With dataset units: constants are dimensionless (``True``) or may carry any unit
    #: (``search.dimensionless_constants_only``).
    dimensionless_constants: bool = True
    #: What one ``run_python`` call may use (``search.run_python_*``).
    run_python: RunPythonLimits = field(default_factory=RunPythonLimits)
    #: The run's Pareto front over every agent's candidates (a callable returning
    #: ``Candidate``s; the Ray run reads it from the result writer), which ``best_formulas``
    #: merges with this episode's own; None: the episode's own front only.
    run_front: Callable[[], Sequence[Any]] | None = None

    def __post_init__(self) -> None:
        if not callable(getattr(self.evaluator, "fit_many", None)):
            raise TypeError(f"evaluator must have fit_many(list[str]); got {type(self.evaluator).__name__}")

    @classmethod
    def create(
        cls,
        dataset: Any,
        evaluator: FitEvaluator,
        *,
        recorder: FitRecorder | Callable[..., None] | None = None,
        agent_id: int = 0,
        archive: CandidateArchive | None = None,
        episode: EpisodeState | None = None,
        cancel_event: Any = None,
        max_expressions_per_call: int = DEFAULT_MAX_EXPRESSIONS,
        dimensionless_constants: bool = True,
        run_python: RunPythonLimits | None = None,
        run_front: Callable[[], Sequence[Any]] | None = None,
    ) -> EpisodeContext:
        """A context with a fresh archive and episode state unless given; ``cancel_event`` (a
        ``threading.Event`` by default) stops tool calls and the agent loop when set."""
        return cls(
            dataset=dataset,
            evaluator=evaluator,
            archive=archive if archive is not None else CandidateArchive(),
            episode=episode if episode is not None else EpisodeState(agent_id),
            cancel_event=cancel_event if cancel_event is not None else threading.Event(),
            recorder=recorder,
            limits=EpisodeLimits(max_expressions_per_call),
            dimensionless_constants=bool(dimensionless_constants),
            run_python=run_python if run_python is not None else RunPythonLimits(),
            run_front=run_front,
        )

    # -- the loop's view (sr_dist.agent.episode.Episode) -------------------------------------

    @property
    def agent_id(self) -> int:
        return self.episode.agent_id

    def begin_turn(self, step: int) -> None:
        self.episode.begin_turn(step)

    def begin_call(self, call_id: str | None) -> None:
        self.episode.begin_call(call_id)

    def finished(self) -> bool:
        return self.episode.submission is not None

    def score(self) -> float:
        best = self.archive.best()
        # The best by search.rank_by, judged by its NMSE (what target_nmse means).
        return nmse_fitness(best) if best is not None else float("inf")

    def report(self) -> EpisodeReport:
        submission = self.episode.submission
        return EpisodeReport(
            best=self.archive.best(),
            submitted=submission.candidate if submission is not None else None,
            candidates=len(self.archive),
            recording_errors=self.episode.recording_errors,
        )
