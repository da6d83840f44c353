"""Building ``ToolCallResult`` values: successes, the two kinds of failure, and their metadata.

Two kinds of failure matter downstream. An *implementation failure* (an exception, a timeout, an
output that breaks the declared schema or the envelope rules) is the tool's fault: retries and
circuit breakers react to it. A *model-visible failure* (the tool returned ``{"success": False,
"reason": ...}``) is a normal answer the model should read and act on; it is marked
``meta_data["model_visible"]``.

Thea's envelope rules (:func:`protocol_violation`) hold for every value a tool returns: a
``{"success": True, ...}`` needs a value field beyond ``success``, a ``{"success": False, ...}``
needs a non-empty ``reason``, and a tool declared ``evaluated`` must return a non-empty
``run_id`` when it succeeds. A result that breaks them is ``tool_protocol_violation``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sr_dist.tools.formatting import format_result_dict, strip_ansi, truncate
from sr_dist.tools.types import ERROR_KINDS, ErrorKind, ToolCallResult

__all__ = [
    "success_result",
    "failure_result",
    "value_result",
    "exception_reason",
    "is_envelope_failure",
    "is_implementation_failure",
    "protocol_violation",
    "with_meta",
    "IMPLEMENTATION_ERROR_KINDS",
]

#: Failure kinds that say "the implementation misbehaved" (when not model-visible).
IMPLEMENTATION_ERROR_KINDS = frozenset({ErrorKind.TOOL_ERROR, ErrorKind.TIMEOUT, ErrorKind.TOOL_PROTOCOL_VIOLATION})


def _bounded(text: str, max_chars: int) -> tuple[str, int]:
    return truncate(strip_ansi(text), max_chars)


def success_result(
    tool: str,
    value: Any,
    *,
    elapsed_s: float,
    max_chars: int,
    formatter: Callable[[Any], str] = format_result_dict,
    **meta: Any,
) -> ToolCallResult:
    """``ok=True``: ``result`` keeps ``value`` whole, ``result_str`` is the bounded text."""
    text, cut = _bounded(formatter(value), max_chars)
    return ToolCallResult(
        ok=True,
        result=value,
        result_str=text,
        meta_data={
            "tool": tool,
            "elapsed_s": elapsed_s,
            "truncated": cut > 0,
            **({"cut_chars": cut} if cut else {}),
            **meta,
        },
    )


def failure_result(
    tool: str,
    error_kind: ErrorKind | str,
    reason: str,
    *,
    elapsed_s: float,
    max_chars: int,
    model_visible: bool = False,
    result: Any = None,
    **meta: Any,
) -> ToolCallResult:
    """``ok=False`` with a non-empty, bounded reason; ``result`` defaults to the failure envelope."""
    if error_kind not in ERROR_KINDS:
        raise ValueError(f"unknown error_kind {error_kind!r}; expected one of {sorted(ERROR_KINDS)}")
    error_kind = ErrorKind(error_kind).value  # the plain string: results and Parquet keep str values
    reason = strip_ansi(str(reason)).strip() or f"tool {tool!r} failed ({error_kind})"
    text, cut = truncate(reason, max_chars)
    return ToolCallResult(
        ok=False,
        result=result if result is not None else {"success": False, "reason": reason},
        result_str=text,
        meta_data={
            "tool": tool,
            "elapsed_s": elapsed_s,
            "truncated": cut > 0,
            **({"cut_chars": cut} if cut else {}),
            "error_kind": error_kind,
            "model_visible": model_visible,
            **meta,
        },
    )


def is_envelope_failure(value: Any) -> bool:
    """True for Thea's failure envelope: a mapping whose ``success`` is ``False``."""
    return isinstance(value, Mapping) and value.get("success") is False


def _reason_text(reason: Any) -> str:
    """The failure envelope's reason as text; empty when there is none to speak of."""
    if reason is None:
        return ""
    if isinstance(reason, str):
        return reason.strip()
    if isinstance(reason, (Mapping, list, tuple, set, frozenset)) and not reason:
        return ""
    return format_result_dict(reason).strip()


def _envelope_reason(value: Mapping[str, Any], formatter: Callable[[Any], str]) -> str:
    rest = {k: v for k, v in value.items() if k not in ("success", "reason")}
    return _reason_text(value.get("reason")) + ("\n" + formatter(rest) if rest else "")


def _has_run_id(value: Any) -> bool:
    run_id = value.get("run_id") if isinstance(value, Mapping) else None
    if isinstance(run_id, str):
        return bool(run_id.strip())
    return isinstance(run_id, int) and not isinstance(run_id, bool)


def protocol_violation(value: Any, *, evaluated: bool = False) -> str | None:
    """Which of Thea's envelope rules ``value`` breaks, or ``None`` when it keeps them all.

    A mapping without a ``success`` key is not an envelope and only meets the ``evaluated``
    rule. ``None`` as a field's value does not count as a value.
    """
    if (
        isinstance(value, Mapping)
        and value.get("success") is True
        and not any(v is not None for k, v in value.items() if k != "success")
    ):
        return "a success needs at least one value field beyond 'success' (e.g. 'observation' or 'run_id')"
    if is_envelope_failure(value):
        if not _reason_text(value.get("reason")):
            return "a failure needs a non-empty 'reason' that says what went wrong"
        return None
    if evaluated and not _has_run_id(value):
        return "the tool is declared evaluated, so a success must return a non-empty 'run_id'"
    return None


def _shown(value: Any) -> str:
    text = format_result_dict(value)
    return text if len(text) <= 200 else text[:199] + "…"


def value_result(
    tool: str,
    value: Any,
    *,
    elapsed_s: float,
    max_chars: int,
    formatter: Callable[[Any], str] = format_result_dict,
    evaluated: bool = False,
    **meta: Any,
) -> ToolCallResult:
    """The result for a value ``execute`` returned: a failure envelope fails, a value that breaks
    the envelope rules is ``tool_protocol_violation``, anything else succeeds."""
    why = protocol_violation(value, evaluated=evaluated)
    if why is not None:
        return failure_result(
            tool,
            ErrorKind.TOOL_PROTOCOL_VIOLATION,
            f"tool {tool!r} broke the tool result protocol: {why}; it returned {_shown(value)}",
            elapsed_s=elapsed_s,
            max_chars=max_chars,
            result=value,
            **meta,
        )
    if is_envelope_failure(value):
        return failure_result(
            tool,
            "tool_error",
            _envelope_reason(value, formatter),
            elapsed_s=elapsed_s,
            max_chars=max_chars,
            model_visible=True,
            result=value,
            **meta,
        )
    return success_result(tool, value, elapsed_s=elapsed_s, max_chars=max_chars, formatter=formatter, **meta)


def exception_reason(exc: BaseException) -> str:
    """``Type: message`` (never empty), what the model needs to adjust its next call."""
    message = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {message}" if message else f"{name} raised with no message"


def is_implementation_failure(result: ToolCallResult) -> bool:
    """The tool itself misbehaved (raised, timed out, broke its output schema): retry/count it."""
    return (
        not result.ok
        and result.meta_data.get("error_kind") in IMPLEMENTATION_ERROR_KINDS
        and not result.meta_data.get("model_visible", False)
    )


def with_meta(result: ToolCallResult, **meta: Any) -> ToolCallResult:
    """A copy of ``result`` with extra ``meta_data`` keys (results are frozen)."""
    return replace(result, meta_data={**result.meta_data, **meta})
