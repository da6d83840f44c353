"""What ``parse`` hands the agent loop: one outcome per call the model made, plus reply-level problems.

A call the model made is either readable (a :class:`~sr_dist.tools.types.ToolCall`) or not (an
:class:`UnreadableCall`, which still carries the call's id and, when it could be read, its name).
Keeping the unreadable ones in line with the readable ones lets the loop answer every call by
its id (native formats must answer every ``tool_call_id``) without matching error text to calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from sr_dist.tools.types import ToolCall

__all__ = ["CallOutcome", "ParseResult", "UnreadableCall"]


@dataclass(frozen=True, slots=True)
class UnreadableCall:
    """A call the model tried to make that cannot be run, and why, in words for the model.

    ``id`` is the provider's or model's id (``parse`` assigns ``call_<position>`` when there is
    none); ``name`` is the tool name when it could be read, else ``None``.
    """

    id: str | None
    name: str | None
    reason: str


#: What one call of a reply turned out to be.
CallOutcome: TypeAlias = ToolCall | UnreadableCall


# No ``slots``: on Python 3.11 a frozen, slotted dataclass raises TypeError, not
# FrozenInstanceError, when one assigns to a property such as ``calls``.
@dataclass(frozen=True)
class ParseResult:
    """Everything read from one model reply.

    ``outcomes`` holds one entry per call the model made, in the order it made them: a
    ``ToolCall`` to run, or an ``UnreadableCall`` to answer with its reason. ``problems`` are
    complete sentences about the reply as a whole that belong to no single call (a broken
    ```` ```json ```` block, a reply too long to read, a count of problems not listed). An
    empty result (no outcomes, no problems) means the reply was prose.
    """

    outcomes: tuple[CallOutcome, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The readable calls, in order."""
        return tuple(o for o in self.outcomes if isinstance(o, ToolCall))

    @property
    def unreadable(self) -> tuple[UnreadableCall, ...]:
        """The calls that cannot be run, in order."""
        return tuple(o for o in self.outcomes if isinstance(o, UnreadableCall))

    @property
    def errors(self) -> tuple[str, ...]:
        """Every problem as one sentence for the model: each unreadable call's reason, then ``problems``."""
        return (*(u.reason for u in self.unreadable), *self.problems)

    @property
    def ok(self) -> bool:
        """True when nothing in the reply needs reporting back."""
        return not self.unreadable and not self.problems
