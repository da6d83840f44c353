"""The loop's own notes to the model: after a reply with no tool call, after a cut-off reply.

A task may word them for its tools (the symbolic-regression domain adds when to submit); the
defaults here name no task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["LoopMessages", "default_nudge", "default_truncated"]


def default_nudge(tool_names: Sequence[str]) -> str:
    """What the model is told after a reply with no tool call."""
    return f"Your reply contained no tool call. Continue by calling a tool ({', '.join(tool_names)})."


def default_truncated() -> str:
    """What the model is told after a reply cut off at the token limit."""
    return (
        "Your last reply was cut off at the output token limit, so any tool call in it may be "
        "incomplete. Keep replies shorter: less reasoning and fewer calls per reply."
    )


@dataclass(frozen=True)
class LoopMessages:
    """How the loop words its notes: ``nudge(tool_names)`` and ``truncated()``."""

    nudge: Callable[[Sequence[str]], str] = default_nudge
    truncated: Callable[[], str] = default_truncated
