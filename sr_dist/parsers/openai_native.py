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
from typing import Any, Iterable, Sequence

from sr_dist.parsers._support import Problems
from sr_dist.parsers.base import (
    BaseParser,
    ParseResult,
    SpecLike,
    call_ids,
    check_pairs,
    failure_text,
    normalize_spec,
)
from sr_dist.parsers.json_calls import scan_json_calls
from sr_dist.parsers.native_calls import read_native_calls
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

    def __init__(self, *, text_fallback: bool = False) -> None:
        self.text_fallback = text_fallback

    def format_tools(self, specs: Iterable[SpecLike]) -> str:
        for spec in specs:
            normalize_spec(spec)  # still reject a malformed spec early, as the other formats do
        return ""

    def _parse(self, text: str, native_calls: Sequence[Any] | None) -> ParseResult:
        problems = Problems()
        calls = read_native_calls(native_calls, problems)
        if self.text_fallback and not calls and not problems.result():
            calls = [call for _, call in scan_json_calls(text, problems)]
        return ParseResult(calls=tuple(calls), errors=problems.result())

    def assistant_message(self, text: str | None, calls: Sequence[ToolCall]) -> dict[str, Any]:
        """The assistant turn with its ``tool_calls``, ids matching what ``result_messages`` answers."""
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
                }
                for call_id, call in zip(call_ids(calls), calls)
            ]
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
