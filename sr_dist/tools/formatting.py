"""Turning a tool's structured result into bounded, model-readable text.

Pure functions only. ``result`` keeps the full value for the recorder; the model sees the text
made here, so it must be short, deterministic (same value, same text, so prompts cache and runs
replay) and free of terminal escape codes that would only waste tokens.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["format_result_dict", "strip_ansi", "truncate", "FLOAT_DIGITS", "render_value", "significant"]

#: Significant digits for floats in model-facing text; ``result`` keeps full precision.
FLOAT_DIGITS = 8

# CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks) and the remaining
# two-character escapes. Matched in that order so a CSI is never half-eaten by the last branch.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)


def strip_ansi(text: str) -> str:
    """Remove ANSI/VT100 escape sequences (tools that shell out often print coloured text)."""
    return _ANSI.sub("", text)


def truncation_marker(cut: int) -> str:
    return f"… [truncated {cut} chars]"


def truncate(text: str, max_chars: int) -> tuple[str, int]:
    """Cut ``text`` to at most ``max_chars`` characters, marker included.

    Returns the text and how many characters of the original were dropped (0 when it fit). The
    marker says how many were cut so the model knows the view is partial. When ``max_chars`` is
    smaller than the marker itself, the marker alone is returned (the bound then cannot hold).
    """
    if max_chars < 0:
        raise ValueError(f"max_chars must be >= 0, got {max_chars}")
    if len(text) <= max_chars:
        return text, 0
    keep = max(0, max_chars - len(truncation_marker(len(text))))
    cut = len(text) - keep
    return text[:keep] + truncation_marker(cut), cut


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = format(value, f".{FLOAT_DIGITS}g")
    # Keep a visible decimal point or exponent so 2.0 does not read as the integer 2.
    if not any(ch in text for ch in ".en"):
        text += ".0"
    return text


def _plain(value: Any) -> Any:
    """Reduce exotic values (numpy scalars and arrays, dataclasses, sets, tuples) to JSON-ish ones."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars, without importing numpy
    if callable(tolist):
        try:
            return _plain(tolist())
        except Exception:  # noqa: BLE001 - a broken tolist() just falls back to str()
            pass
    return str(value)


def significant(value: Any, digits: int) -> str:
    """A number with ``digits`` significant digits for a model to read: ``-`` for a missing one,
    ``nan``/``inf``/``-inf`` spelled out, anything that is not a number as its text."""
    if value is None or isinstance(value, bool):
        return "-"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return "nan"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return format(number, f".{digits}g")


def render_value(value: Any) -> str:
    """Compact JSON-like text for one value, with readable floats; deterministic."""
    value = _plain(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, (int, str)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {render_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    return "[" + ", ".join(render_value(v) for v in value) + "]"


def format_result_dict(result: Any) -> str:
    """Model-readable text for a tool result.

    A mapping becomes one ``key: value`` line per top-level key, in the tool's own key order
    (tool authors order keys on purpose); top-level strings are shown raw so multi-line messages
    stay readable, nested values as compact JSON with floats at :data:`FLOAT_DIGITS` significant
    digits. A bare string is returned as is; anything else is rendered as one compact value.
    ANSI escape codes are removed. No truncation here: see :func:`truncate`.
    """
    if isinstance(result, str):
        return strip_ansi(result)
    plain = _plain(result)
    if not isinstance(plain, dict):
        return strip_ansi(render_value(plain))
    lines = []
    for key, value in plain.items():
        shown = value if isinstance(value, str) else render_value(value)
        lines.append(f"{key}: {shown}")
    return strip_ansi("\n".join(lines))
