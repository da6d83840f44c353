"""The tool-call parser contract: tools out to the model, calls in, results back.

A parser is the only part of the agent loop that knows how a model writes tool calls (native
function calling, JSON, or text). It turns a reply into one outcome per call the model made (a
normalized :class:`ToolCall`, or an :class:`UnreadableCall` saying why it cannot run) and turns
:class:`ToolCallResult` values into the next turn's messages, so the loop, the tools and the
recorder never see the wire format.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from sr_dist.parsers._support import MAX_TEXT_CHARS, assign_ids
from sr_dist.parsers.outcomes import CallOutcome, ParseResult, UnreadableCall
from sr_dist.tools.types import ToolCall, ToolCallResult, ToolSpec

__all__ = [
    "BaseParser",
    "PromptedParser",
    "ParseResult",
    "UnreadableCall",
    "CallOutcome",
    "SpecLike",
    "normalize_spec",
    "call_ids",
    "failure_text",
]

#: What ``format_tools`` accepts: a ``ToolSpec``, or a dict with ``name``/``description``/``parameters``
#: (OpenAI's ``{"type": "function", "function": {...}}`` wrapper is unwrapped too).
SpecLike = ToolSpec | Mapping[str, Any]


def normalize_spec(spec: SpecLike) -> ToolSpec:
    """Accept a ``ToolSpec`` or a plain dict and return a ``ToolSpec``; raise ``ValueError`` if unusable."""
    if isinstance(spec, ToolSpec):
        return spec
    if isinstance(spec, Mapping):
        body: Mapping[str, Any] = spec
        if isinstance(spec.get("function"), Mapping) and "name" not in spec:
            body = spec["function"]
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"tool spec needs a non-empty string 'name': {dict(body)!r:.200}")
        description = body.get("description") or ""
        parameters = body.get("parameters")
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        if not isinstance(description, str) or not isinstance(parameters, Mapping):
            raise ValueError(f"tool spec {name!r}: 'description' must be a string and 'parameters' an object")
        return ToolSpec(name=name, description=description, parameters=parameters)
    raise TypeError(f"expected a ToolSpec or a dict, got {type(spec).__name__}")


def call_ids(calls: Sequence[CallOutcome]) -> list[str]:
    """The id each call is answered under: its own, or ``call_<position>`` (what ``parse`` assigns)."""
    return [c.id or "" for c in assign_ids(calls)]


def failure_text(result: ToolCallResult) -> str:
    """``ERROR (<error_kind>): <reason>`` for a failed result, so the model cannot mistake it for data."""
    kind = result.meta_data.get("error_kind") or "tool_error"
    reason = result.result_str.strip() or "the tool failed without giving a reason"
    return f"ERROR ({kind}): {reason}"


class BaseParser(ABC):
    """One wire format for tool calls. Subclasses implement :meth:`_parse` and :meth:`format_tools`.

    Parsers hold no state between calls, so one instance may serve many agents and threads,
    and they pickle cleanly into Ray actors.
    """

    #: The name ``get_parser`` knows this parser by.
    name: ClassVar[str]
    #: Whether ``result_messages`` answers each call in a message of its own (``role: tool``),
    #: rather than all of a turn's results in one message; history compaction summarizes accordingly.
    answers_each_call: ClassVar[bool] = False

    @abstractmethod
    def format_tools(self, specs: Iterable[SpecLike]) -> str:
        """Prompt text telling the model which tools exist and how to call them."""

    @abstractmethod
    def _parse(self, text: str, native_calls: Sequence[Any] | None) -> ParseResult:
        """Read one reply. May raise on a bug; :meth:`parse` turns that into an error."""

    @abstractmethod
    def result_messages(
        self,
        calls: Sequence[ToolCall],
        results: Sequence[ToolCallResult],
        *,
        errors: Sequence[str] = (),
    ) -> list[dict[str, Any]]:
        """Chat messages that report each call's result (and any parse ``errors``) to the model."""

    def parse(self, text: Any, native_calls: Sequence[Any] | None = None) -> ParseResult:
        """Read the tool calls in a model reply. Never raises, whatever ``text`` holds.

        ``native_calls`` are the provider's structured tool calls, if any (OpenAI chat format
        dicts or SDK objects). The result holds one outcome per call, in order; calls without
        an id get ``call_<position>`` (``call_0``, ``call_1``, ...), readable or not. Every
        native call gets an outcome even when the text is refused, so each can be answered.
        """
        try:
            refused: str | None = None
            if text is None:
                text = ""
            elif isinstance(text, (bytes, bytearray)):
                text = bytes(text).decode("utf-8", errors="replace")
            elif not isinstance(text, str):
                refused = f"Internal error: the reply text has type {type(text).__name__}, not str; it was not read."
            if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
                refused = (
                    f"Your reply was {len(text)} characters long, over the limit of {MAX_TEXT_CHARS}; "
                    "it was not read. Send shorter replies with one or a few tool calls."
                )
            if refused is not None:
                if native_calls is None:
                    return ParseResult(problems=(refused,))
                text = ""
            result = self._parse(text, native_calls)
            problems = (refused, *result.problems) if refused is not None else tuple(result.problems)
            return ParseResult(outcomes=assign_ids(result.outcomes), problems=problems)
        except Exception as exc:  # the last line of defence: parse must never raise
            reason = (
                "Your reply could not be read because of an internal parser error "
                f"({type(exc).__name__}); please send the tool call again, simply formatted."
            )
            unread = assign_ids(_unread_native(native_calls, reason))
            return ParseResult(outcomes=unread, problems=() if unread else (reason,))

    def assistant_message(
        self,
        text: str | None,
        calls: Sequence[CallOutcome],
        *,
        native_calls: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The assistant turn to keep in history. Prompted formats keep the text as written.

        ``calls`` are the turn's outcomes as ``parse`` returned them; ``native_calls`` are the
        provider's calls as sent (formats that send calls natively keep them verbatim).
        """
        return {"role": "assistant", "content": text or ""}

    def errors_message(self, errors: Sequence[str]) -> dict[str, Any] | None:
        """A user message listing parse problems, or ``None`` when there are none."""
        if not errors:
            return None
        return {"role": "user", "content": _render_errors(errors)}


class PromptedParser(BaseParser):
    """Base for formats whose tools live in the prompt: results return as one user message."""

    def result_messages(
        self,
        calls: Sequence[ToolCall],
        results: Sequence[ToolCallResult],
        *,
        errors: Sequence[str] = (),
    ) -> list[dict[str, Any]]:
        content = render_results_text(calls, results, errors)
        return [{"role": "user", "content": content}] if content else []


def check_pairs(calls: Sequence[ToolCall], results: Sequence[ToolCallResult]) -> None:
    """``result_messages`` needs exactly one result per call; anything else is a caller bug."""
    if len(calls) != len(results):
        raise ValueError(f"got {len(calls)} calls but {len(results)} results; they must pair up one to one")


def render_results_text(
    calls: Sequence[ToolCall], results: Sequence[ToolCallResult], errors: Sequence[str]
) -> str:
    """One plain-text report of every call's outcome, for formats without native tool messages."""
    check_pairs(calls, results)
    parts: list[str] = []
    if calls:
        parts.append("Tool results:")
        for call_id, call, result in zip(call_ids(calls), calls, results):
            status = "ok" if result.ok else "failed"
            body = result.result_str if result.ok else failure_text(result)
            parts.append(f"[{call_id}] {call.name}: {status}\n{body}")
    if errors:
        parts.append(_render_errors(errors))
    return "\n\n".join(parts)


def _render_errors(errors: Sequence[str]) -> str:
    lines = ["Some tool calls in your last reply could not be read:"]
    lines.extend(f"- {e}" for e in errors)
    return "\n".join(lines)


def _unread_native(native_calls: Any, reason: str) -> list[UnreadableCall]:
    """One unreadable call per native call, keeping any id: the provider expects each answered.

    Only reached after a parser bug, so it reads defensively and gives up quietly on odd input.
    """
    out: list[UnreadableCall] = []
    try:
        if isinstance(native_calls, Mapping) or hasattr(native_calls, "function"):
            native_calls = [native_calls]
        if native_calls is None or isinstance(native_calls, (str, bytes)) or not isinstance(native_calls, Iterable):
            return out
        for item in native_calls:
            raw = item.get("id") if isinstance(item, Mapping) else getattr(item, "id", None)
            call_id = raw if isinstance(raw, str) and raw.strip() else None
            out.append(UnreadableCall(id=call_id, name=None, reason=reason))
    except Exception:  # iterating misbehaved too: the calls seen so far still get their answer
        return out
    return out


def render_tool_list(specs: Iterable[SpecLike]) -> tuple[list[ToolSpec], str]:
    """The normalized specs and a text section listing each tool with its JSON Schema."""
    tools = [normalize_spec(s) for s in specs]
    blocks = []
    for tool in tools:
        schema = json.dumps(dict(tool.parameters), default=str)
        description = tool.description.strip() or "(no description)"
        blocks.append(f"### {tool.name}\n{description}\nParameters (JSON Schema): {schema}")
    return tools, "\n\n".join(blocks)


def example_arguments(spec: ToolSpec) -> dict[str, Any]:
    """Placeholder arguments for the required parameters of ``spec``, to show the call syntax."""
    params = spec.parameters
    props = params.get("properties") if isinstance(params, Mapping) else None
    if not isinstance(props, Mapping):
        return {}
    required = params.get("required")
    names = [n for n in required if n in props] if isinstance(required, list) else []
    if not names:
        names = list(props)[:1]
    return {name: _placeholder(props[name]) for name in names[:3]}


def _placeholder(schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return "..."
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if not isinstance(kind, str):
        return "..."
    return {
        "string": "...",
        "number": 1.0,
        "integer": 1,
        "boolean": True,
        "array": [],
        "object": {},
    }.get(kind, "...")
