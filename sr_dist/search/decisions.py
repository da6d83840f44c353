"""The run's pure decisions: its id, when to stop, and what its status is.

No Ray, no clock: the driver feeds them what it polled, tests call them directly.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import UTC, datetime

from sr_dist.agent import StopReason
from sr_dist.results import RUN_OUTCOMES, status_of
from sr_dist.search.settings import SearchSettings

__all__ = [
    "FAILURE_REASONS",
    "RUN_OUTCOMES",
    "decide_stop",
    "final_outcome",
    "final_status",
    "is_failure_reason",
    "new_run_id",
]

#: Agent stop reasons that mean the agent could not go on (not a budget or a finished search).
FAILURE_REASONS = ("error", StopReason.INTERNAL_ERROR.value, "lost")


def new_run_id(now: datetime | None = None, token: str | None = None) -> str:
    """``YYYYmmdd-HHMMSS-xxxxxx`` in UTC: sortable by start time, unique by the random tail."""
    now = now or datetime.now(UTC)
    return f"{now.astimezone(UTC):%Y%m%d-%H%M%S}-{token or secrets.token_hex(3)}"


def is_failure_reason(reason: str) -> bool:
    """An agent stop reason that means it could not go on (its model or episode broke)."""
    return reason in FAILURE_REASONS or StopReason.of(reason) is StopReason.MODEL_ERROR


def decide_stop(
    budget: SearchSettings,
    *,
    elapsed_s: float,
    candidates: int,
    best_val_nmse: float | None,
    agents_running: int,
    agent_reasons: Sequence[str] = (),
    target_reached_s: float | None = None,
) -> str | None:
    """Why the run should stop now, or ``None`` to keep going (first match wins).

    ``target_reached_s``: the elapsed seconds at which a candidate first reached
    ``target_nmse`` (None: not yet, or unknown, taken as now); the run stops on the target
    ``polish_s`` seconds after that, or sooner once no agent is running or a budget is spent
    (the reason is then still ``target_nmse``)."""
    if (budget.target_nmse is not None and best_val_nmse is not None
            and best_val_nmse <= budget.target_nmse):
        reached = elapsed_s if target_reached_s is None else target_reached_s
        polished = elapsed_s - reached >= budget.polish_s
        if polished or agents_running == 0 or elapsed_s >= budget.max_seconds \
                or candidates >= budget.max_candidates:
            return "target_nmse"
        return None
    if candidates >= budget.max_candidates:
        return "max_candidates"
    if agents_running == 0:
        reasons = set(agent_reasons)
        if reasons and all(is_failure_reason(r) for r in reasons):
            return "agents_failed"
        if len(reasons) == 1:
            (only,) = reasons
            if status_of(only) == "completed":  # every agent hit the same budget
                return only
        return "agents_done"
    if elapsed_s >= budget.max_seconds:
        return "max_seconds"
    return None


def final_outcome(stop_reason: str, *, signal_number: int | None,
                  error: str | None) -> tuple[str, str]:
    """``(status, stop_reason)`` of how a run ended, always a pair of ``RUN_OUTCOMES``.

    A signal wins (``interrupted``); a run that raised is ``failed`` with ``error`` (or the
    more precise ``write_failed``); a reason outside the table is a bug reported as ``error``.
    """
    if signal_number is not None:
        return "interrupted", "interrupted"
    status = status_of(stop_reason)
    if error is not None and status != "failed":
        return "failed", "error"
    if status not in ("completed", "failed"):  # unknown, or interrupted without a signal
        return "failed", "error"
    return status, stop_reason


def final_status(stop_reason: str, *, signal_number: int | None, error: str | None) -> str:
    """The ``runs.status`` for how a run ended (see :func:`final_outcome`)."""
    return final_outcome(stop_reason, signal_number=signal_number, error=error)[0]
