"""The ``openai`` format: the provider's native function calling.

Tools go to the provider as JSON Schemas (see :func:`openai_tools`), so ``format_tools`` adds no
prompt text. Calls arrive structured (``native_calls``) and results go back as ``role: tool``
messages answering each ``tool_call_id``.

Text fallback (off by default): some OpenAI-compatible servers run without a tool-call parser
and hand the model's calls back as text. ``OpenAIParser(text_fallback=True)`` then reads JSON
calls and ``<tool_call>`` blocks from the text when the reply has no native calls. It is off by
default because prose that quotes a JSON example would otherwise run a tool.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from sr_dist.parsers._support import Problems
from sr_dist.parsers.base import (
    BaseParser,
    SpecLike,
    call_ids,
    check_pairs,
    failure_text,
    normalize_spec,
)
from sr_dist.parsers.json_calls import scan_json_calls
from sr_dist.parsers.native_calls import read_native_calls
from sr_dist.parsers.outcomes import CallOutcome, ParseResult, UnreadableCall
from sr_dist.tools.types import ToolCall, ToolCallResult

__all__ = ["OpenAIParser", "openai_tools"]


def openai_tools(specs: Iterable[SpecLike]) -> list[dict[str, Any]]:
    """Specs in the chat-completions ``tools=[...]`` format."""
    out = []
    for spec in specs:
        tool = normalize_spec(spec)
        out.append(
            {
                "type": "function",
                "function": {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)},
            }
        )
    return out


class OpenAIParser(BaseParser):
    """Native tool calls in, ``role: tool`` messages out."""

    name = "openai"
    answers_each_call: ClassVar[bool] = True

    def __init__(self, *, text_fallback: bool = False) -> None:
        self.text_fallback = text_fallback

    def format_tools(self, specs: Iterable[SpecLike]) -> str:
        for spec in specs:
            normalize_spec(spec)  # still reject a malformed spec early, as the other formats do
        return ""

    def _parse(self, text: str, native_calls: Sequence[Any] | None) -> ParseResult:
        problems = Problems()
        outcomes = read_native_calls(native_calls, problems)
        if self.text_fallback and not outcomes and not problems.any:
            outcomes = [outcome for _, outcome in scan_json_calls(text, problems)]
        return ParseResult(outcomes=tuple(outcomes), problems=problems.result())

    def assistant_message(
        self,
        text: str | None,
        calls: Sequence[CallOutcome],
        *,
        native_calls: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The assistant turn with its ``tool_calls``, ids matching what ``result_messages`` answers.

        ``native_calls`` given, they are kept as the provider sent them (unreadable arguments
        included, so the history shows what the model really wrote); their ids must be the ones
        ``parse`` returned. Otherwise (calls read from text) each call is rendered, an unreadable
        one under its name (or ``unknown``) with empty arguments.
        """
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if native_calls:
            message["tool_calls"] = [dict(c) for c in native_calls]
        elif calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": _function(call)}
                for call_id, call in zip(call_ids(calls), calls)
            ]
        else:
            message["content"] = text or ""  # a turn without calls always keeps its text
        return message

    def result_messages(
        self,
        calls: Sequence[ToolCall],
        results: Sequence[ToolCallResult],
        *,
        errors: Sequence[str] = (),
    ) -> list[dict[str, Any]]:
        check_pairs(calls, results)
        messages: list[dict[str, Any]] = [
            {
                "role": "tool",
                "tool_call_id": call_id,
                "content": result.result_str if result.ok else failure_text(result),
            }
            for call_id, result in zip(call_ids(calls), results)
        ]
        error_message = self.errors_message(errors)
        if error_message is not None:
            messages.append(error_message)
        return messages


def _function(call: CallOutcome) -> dict[str, str]:
    if isinstance(call, UnreadableCall):
        return {"name": call.name or "unknown", "arguments": "{}"}
    return {"name": call.name, "arguments": json.dumps(dict(call.arguments))}
