"""The conversation an agent keeps with its model.

``messages`` are OpenAI chat-format dicts (the lingua franca every adapter translates from);
``tool_history`` keeps the structured ``(ToolCall, ToolCallResult)`` pairs, which are never sent
to a provider but let an offline proposer (``evolve``) and the recorder read what the tools
returned without parsing text. The loop keeps all of it unless the model says it reads less
(``history_calls``, see :func:`sr_dist.agent.loop.history_limit`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sr_dist.tools.types import ToolCall, ToolCallResult

__all__ = ["Context"]


@dataclass
class Context:
    system: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_history: list[tuple[ToolCall, ToolCallResult]] = field(default_factory=list)
    #: Free-form facts for proposers and adapters (dataset variables, seed, ...); never sent.
    info: dict[str, Any] = field(default_factory=dict)

    def messages_for_model(self) -> list[dict[str, Any]]:
        """The system prompt followed by the conversation, in OpenAI chat format."""
        head = [{"role": "system", "content": self.system}] if self.system else []
        return head + list(self.messages)
