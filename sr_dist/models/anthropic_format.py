"""Translation between OpenAI chat format and the Anthropic Messages API (pure functions).

The agent speaks OpenAI chat format; Anthropic differs in four ways handled here: the system
prompt is a separate field, assistant tool calls are ``tool_use`` content blocks, tool results
are ``tool_result`` blocks inside a *user* turn, and turns must alternate (adjacent turns of one
role are merged). Kept apart from the adapter so it is tested without the ``anthropic`` package.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sr_dist.models.base import ModelError, ModelErrorKind, ModelResponse, Usage

__all__ = ["STOP_REASONS", "from_anthropic_response", "to_anthropic_messages", "to_anthropic_tools"]

#: Anthropic ``stop_reason`` → OpenAI ``finish_reason``.
STOP_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return "" if content is None else str(content)


def _tool_input(arguments: Any) -> dict[str, Any]:
    """``tool_use.input`` must be an object; arguments the model mangled are kept, not dropped."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else {}
    except json.JSONDecodeError:
        return {"_unparsed_arguments": arguments}
    return value if isinstance(value, dict) else {"_unparsed_arguments": arguments}


def _blocks(message: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    role = message.get("role")
    if role == "tool":
        return "user", [
            {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
                "content": _text_of(message.get("content")),
            }
        ]
    if role == "assistant":
        blocks: list[dict[str, Any]] = []
        text = _text_of(message.get("content"))
        if text.strip():
            blocks.append({"type": "text", "text": text})
        for call in message.get("tool_calls") or ():
            if not isinstance(call, Mapping):
                continue
            fn: Mapping[str, Any] = call["function"] if isinstance(call.get("function"), Mapping) else {}
            blocks.append(
                {"type": "tool_use", "id": str(call.get("id") or ""), "name": str(fn.get("name") or ""), "input": _tool_input(fn.get("arguments"))}
            )
        return "assistant", blocks
    if role == "user":
        text = _text_of(message.get("content"))
        return "user", [{"type": "text", "text": text}] if text.strip() else []
    raise ModelError(f"anthropic: cannot translate a message with role {role!r}", kind=ModelErrorKind.BAD_REQUEST)


def to_anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` for the Messages API from OpenAI chat-format ``messages``.

    System messages are joined into ``system``; tool messages become ``tool_result`` blocks in a
    user turn; adjacent turns of one role are merged; empty turns are dropped. Within a merged
    user turn the ``tool_result`` blocks come first, as the API requires.
    """
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") in ("system", "developer"):
            text = _text_of(message.get("content"))
            if text.strip():
                system_parts.append(text)
            continue
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")  # stable: order kept otherwise
    return "\n\n".join(system_parts), turns


def to_anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function tools (``{"type": "function", "function": {...}}``) as Anthropic tools."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        fn = tool.get("function", tool)
        if not isinstance(fn, Mapping) or not fn.get("name"):
            raise ModelError(f"anthropic: a tool without a name cannot be sent: {tool!r}"[:300], kind=ModelErrorKind.BAD_REQUEST)
        out.append(
            {
                "name": str(fn["name"]),
                "description": str(fn.get("description") or ""),
                "input_schema": dict(fn.get("parameters") or {"type": "object", "properties": {}}),
            }
        )
    return out


def from_anthropic_response(body: Any) -> ModelResponse:
    """A Messages API reply as a :class:`ModelResponse` with OpenAI-format tool calls."""
    if not isinstance(body, Mapping) or not isinstance(body.get("content"), list):
        raise ModelError(f"anthropic: the reply is not a message: {str(body)[:200]!r}", kind=ModelErrorKind.BAD_RESPONSE)
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in body["content"]:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": str(block.get("id") or f"toolu_{len(calls)}"),
                    "type": "function",
                    "function": {"name": str(block.get("name") or ""), "arguments": json.dumps(block.get("input") or {})},
                }
            )
    stop = body.get("stop_reason")
    usage: Mapping[str, Any] = body["usage"] if isinstance(body.get("usage"), Mapping) else {}
    prompt = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return ModelResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage.of(prompt, usage.get("output_tokens")),
        finish_reason=STOP_REASONS.get(stop, stop) if isinstance(stop, str) else None,
        raw=dict(body),
    )
