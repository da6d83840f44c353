"""Keeping an agent's conversation bounded: summaries of old tool results, then dropping turns.

Pure functions over frozen values. The loop logs each turn as a :class:`TurnLog` (its messages
as sent, plus a short summary for each message worth compacting) and re-renders the
conversation with :func:`render_conversation` before every model call:

1. the head (the messages the run started with: the task) is always kept verbatim;
2. the last ``keep_turns`` turns are kept verbatim;
3. older turns are compacted: tool results become their one-line summaries, the assistant's
   prose is clipped, long tool-call arguments are replaced by a short (valid JSON) stub;
4. while the total is still over ``max_context_chars``, the oldest turns are dropped whole
   (an assistant message and its tool answers go together, so native tool-call pairing holds)
   and one note says how many were dropped; then, if needed, fewer turns stay verbatim. The
   last turn is never compacted.

The structured results stay whole in ``context.tool_history`` (see :func:`history_result`),
so nothing the proposer or the recorder needs is lost.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sr_dist.tools.types import ToolCall, ToolCallResult

__all__ = [
    "COMPACTED",
    "CompactionPolicy",
    "TurnLog",
    "compact_message",
    "conversation_chars",
    "history_result",
    "message_chars",
    "render_conversation",
    "summarize_result",
    "summarize_results",
]

#: Prefix of every compacted text, so the model (and a reader) can tell a summary from a result.
COMPACTED = "[compacted]"

#: meta_data keys kept in ``tool_history`` (timings and tracebacks are dropped: they differ
#: between a run and its replay and can be large).
_STABLE_META = (
    "tool",
    "call_id",
    "truncated",
    "error_kind",
    "model_visible",
    "exception",
    "output_invalid",
    "post_condition",  # a BuiltinTool's hidden check: recorded, never shown to the model
)


@dataclass(frozen=True)
class CompactionPolicy:
    """How much of the conversation stays verbatim, and the bound on its total size."""

    keep_turns: int = 4
    max_context_chars: int = 60_000
    #: Old assistant prose is clipped to this many characters.
    assistant_chars: int = 400
    #: Old tool-call arguments longer than this are replaced by a stub.
    argument_chars: int = 200
    #: ``tool_history`` keeps at most this many characters of each ``result_str``.
    history_result_chars: int = 1000

    def __post_init__(self) -> None:
        if self.keep_turns < 1:
            raise ValueError(f"keep_turns must be at least 1 (the last turn is always verbatim), got {self.keep_turns}")
        if self.max_context_chars < 1000:
            raise ValueError(f"max_context_chars must be at least 1000, got {self.max_context_chars}")
        for name in ("assistant_chars", "argument_chars", "history_result_chars"):
            if getattr(self, name) < 20:
                raise ValueError(f"{name} must be at least 20, got {getattr(self, name)}")


@dataclass(frozen=True)
class TurnLog:
    """One turn's messages as sent, and per message its summary (None: nothing to compact)."""

    messages: tuple[Mapping[str, Any], ...]
    summaries: tuple[str | None, ...]

    def __post_init__(self) -> None:
        if len(self.messages) != len(self.summaries):
            raise ValueError("a TurnLog needs one summary slot per message")


# --------------------------------------------------------------------------- sizes


def message_chars(message: Mapping[str, Any]) -> int:
    """Characters a message contributes: its text plus its tool calls' names and arguments."""
    content = message.get("content")
    size = len(content) if isinstance(content, str) else len(json.dumps(content, default=str)) if content else 0
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            size += len(str(fn.get("name") or "")) + len(str(fn.get("arguments") or ""))
    return size


def conversation_chars(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(message_chars(m) for m in messages)


# --------------------------------------------------------------------------- summaries


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _nmse_text(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    return format(number, ".3g") if math.isfinite(number) else str(number)


def summarize_result(call: ToolCall, result: ToolCallResult) -> str:
    """One line that stands in for an old tool result (without the ``[compacted]`` prefix)."""
    name = call.name
    if not result.ok:
        kind = result.meta_data.get("error_kind") or "tool_error"
        return f"{name} failed ({kind}): {_one_line(result.result_str)}"
    payload = result.result if isinstance(result.result, Mapping) else {}
    records = payload.get("results")
    if name == "evaluate_formulas" and isinstance(records, list):
        counts: dict[str, int] = {}
        for record in records:
            status = str(record.get("status")) if isinstance(record, Mapping) else "?"
            counts[status] = counts.get(status, 0) + 1
        tally = ", ".join(f"{n} {s}" for s, n in counts.items())
        best = payload.get("best")
        shown = (
            f", best val_nmse {_nmse_text(best.get('val_nmse'))} `{_one_line(str(best.get('expression')), 80)}`"
            if isinstance(best, Mapping)
            else ", none fitted"
        )
        return f"{name}: {len(records)} results ({tally}){shown}"
    if name == "submit_formula" and payload.get("submitted"):
        return f"{name}: submitted `{_one_line(str(payload.get('expression')), 80)}` (val_nmse {_nmse_text(payload.get('val_nmse'))})"
    if name == "best_formulas" and isinstance(payload.get("front"), list):
        front = payload["front"]
        best = min(front, key=lambda c: float(c.get("val_nmse") or math.inf), default=None)
        shown = f", best `{_one_line(str(best.get('expression')), 80)}` val_nmse {_nmse_text(best.get('val_nmse'))}" if best else ""
        return f"{name}: {len(front)} formulas on the front{shown}"
    if name == "data_summary":
        return f"{name}: shown earlier (the data is also described in the system prompt)"
    return f"{name}: {_one_line(result.result_str)}"


def summarize_results(calls: Sequence[ToolCall], results: Sequence[ToolCallResult], errors: Sequence[str] = ()) -> str:
    """The summary of a whole turn's results (prompted formats answer with one message)."""
    parts = [summarize_result(c, r) for c, r in zip(calls, results)]
    if errors:
        parts.append(f"{len(errors)} unreadable tool call(s): {_one_line(errors[0], 120)}")
    return f"{COMPACTED} " + "; ".join(parts) if parts else f"{COMPACTED} (no results)"


# --------------------------------------------------------------------------- compaction


def _stub_arguments(arguments: str, limit: int) -> str:
    if len(arguments) <= limit:
        return arguments
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        value = None
    if isinstance(value, Mapping) and isinstance(value.get("expressions"), list):
        n = len(value["expressions"])
        return json.dumps({"expressions": [f"{COMPACTED} {n} formulas, see the result"]})
    return json.dumps({"_compacted": arguments[: max(limit - 40, 10)] + "…"})


def compact_message(message: Mapping[str, Any], summary: str | None, policy: CompactionPolicy) -> dict[str, Any]:
    """The compacted form of one old message (a new dict; the original is not changed)."""
    out = dict(message)
    if summary is not None:
        out["content"] = summary
        return out
    if out.get("role") == "assistant":
        content = out.get("content")
        if isinstance(content, str) and len(content) > policy.assistant_chars:
            out["content"] = content[: policy.assistant_chars] + f" {COMPACTED} (+{len(content) - policy.assistant_chars} chars)"
        calls = out.get("tool_calls")
        if calls:
            compacted = []
            for call in calls:
                call = dict(call)
                fn = call.get("function")
                if isinstance(fn, Mapping) and isinstance(fn.get("arguments"), str):
                    call["function"] = {**fn, "arguments": _stub_arguments(fn["arguments"], policy.argument_chars)}
                compacted.append(call)
            out["tool_calls"] = compacted
    return out


def _compacted(turn: TurnLog, policy: CompactionPolicy) -> list[dict[str, Any]]:
    return [compact_message(m, s, policy) for m, s in zip(turn.messages, turn.summaries)]


def _dropped_note(count: int) -> dict[str, Any]:
    return {
        "role": "user",
        "content": f"{COMPACTED} {count} earlier turn(s) were removed to keep the conversation short; "
        "their candidates are still counted (best_formulas lists the best so far).",
    }


def render_conversation(
    head: Sequence[Mapping[str, Any]],
    turns: Sequence[TurnLog],
    policy: CompactionPolicy,
    dropped_before: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """The messages to send, and how many of ``turns`` (the oldest) were dropped to fit.

    ``dropped_before`` counts turns dropped by earlier renders, so the note stays accurate.
    """
    head_msgs = [dict(m) for m in head]
    n = len(turns)
    keep = min(policy.keep_turns, n)
    compacted = [_compacted(t, policy) for t in turns[: n - keep]]
    verbatim = [[dict(m) for m in t.messages] for t in turns[n - keep :]]
    sizes = [conversation_chars(c) for c in compacted] + [conversation_chars(v) for v in verbatim]
    bodies = compacted + verbatim
    base = conversation_chars(head_msgs)
    drop = 0

    def total(drop: int) -> int:
        note = message_chars(_dropped_note(drop + dropped_before)) if drop + dropped_before else 0
        return base + note + sum(sizes[drop:])

    while total(drop) > policy.max_context_chars and drop < n - 1:
        verbatim_start = n - keep
        if drop < verbatim_start:
            drop += 1
        elif keep > 1:  # everything older is gone: compact the oldest verbatim turn instead
            index = n - keep
            bodies[index] = _compacted(turns[index], policy)
            sizes[index] = conversation_chars(bodies[index])
            keep -= 1
        else:
            drop += 1
    # The last turn is never dropped; if even it and the head overflow, it is sent anyway
    # (its tool results are already bounded by each tool's max_result_chars).
    messages = list(head_msgs)
    if drop + dropped_before:
        messages.append(_dropped_note(drop + dropped_before))
    for body in bodies[drop:]:
        messages.extend(body)
    return messages, drop


def history_result(result: ToolCallResult, policy: CompactionPolicy | None = None) -> ToolCallResult:
    """The copy of a result kept in ``tool_history``: whole ``result``, bounded text, stable meta."""
    limit = (policy or CompactionPolicy()).history_result_chars
    text = result.result_str if len(result.result_str) <= limit else result.result_str[:limit] + "…"
    meta = {k: result.meta_data[k] for k in _STABLE_META if k in result.meta_data}
    return replace(result, result_str=text, meta_data=meta)
