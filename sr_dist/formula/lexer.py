"""The lexer: formula text -> tokens, rejecting every character the language has no use for.

Each rejection names the construct a model most likely meant (subscripts, strings, comparisons,
...), so the message says what to change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import NamedTuple

from .errors import FormulaError

__all__ = ["Token", "lex"]

_NUM_RE = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: ASCII only: ``str.isdigit`` also accepts digits such as "²" that no number literal may hold.
_DIGITS = frozenset("0123456789")


class Token(NamedTuple):
    """One token; ``value`` is the float of a ``num`` token (a named tuple: a parse makes one
    per token, and a tuple is the cheapest frozen value to build)."""

    kind: str  # "num", "name", "op", "(", ")", ",", "end"
    text: str
    offset: int
    value: float = 0.0


_SINGLE_CHAR_ERRORS = {
    "[": "subscripts are not allowed",
    "]": "subscripts are not allowed",
    "{": "braces (sets and dicts) are not allowed",
    "}": "braces (sets and dicts) are not allowed",
    "'": "strings are not allowed",
    '"': "strings are not allowed",
    "`": "strings are not allowed",
    ";": "';' is not allowed: a formula is a single expression",
    ":": "':' is not allowed (slices, lambdas and annotations are not supported)",
    "&": "bitwise operators are not allowed",
    "|": "bitwise operators are not allowed",
    "~": "bitwise operators are not allowed",
    "%": "'%' (modulo) is not allowed",
    "@": "'@' is not allowed",
    "#": "comments are not allowed",
    "\\": "'\\' is not allowed",
    "$": "'$' is not allowed",
    "?": "'?' is not allowed",
}


def lex(text: str) -> Iterator[Token]:
    """Yield tokens lazily, so that a parse error stops the scan early."""
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if ord(ch) > 127:
            raise FormulaError(
                f"non-ASCII character {ch!r} (U+{ord(ch):04X}) is not allowed; "
                "use ASCII names and operators",
                i, text,
            )
        if ch in _DIGITS or (ch == "." and i + 1 < n and text[i + 1] in _DIGITS):
            match = _NUM_RE.match(text, i)
            assert match is not None
            literal = match.group()
            end = match.end()
            if literal.endswith(".") and end < n and (text[end].isalpha() or text[end] == "_"):
                raise FormulaError("attribute access is not allowed", end - 1, text)
            value = float(literal)
            if not math.isfinite(value):
                raise FormulaError(f"number {literal!r} is too large", i, text)
            yield Token("num", literal, i, value)
            i = end
            continue
        if ch.isalpha() or ch == "_":
            match = _NAME_RE.match(text, i)
            assert match is not None
            yield Token("name", match.group(), i)
            i = match.end()
            continue
        nxt = text[i + 1] if i + 1 < n else ""
        if ch == "*":
            if nxt == "*":
                yield Token("op", "**", i)
                i += 2
            else:
                yield Token("op", "*", i)
                i += 1
            continue
        if ch == "/":
            if nxt == "/":
                raise FormulaError("'//' (floor division) is not allowed; use '/'", i, text)
            yield Token("op", "/", i)
            i += 1
            continue
        if ch in "+-":
            yield Token("op", ch, i)
            i += 1
            continue
        if ch == "^":
            yield Token("op", "**", i)
            i += 1
            continue
        if ch in "(),":
            yield Token(ch, ch, i)
            i += 1
            continue
        if ch == ".":
            if nxt.isalpha() or nxt == "_":
                raise FormulaError("attribute access is not allowed", i, text)
            raise FormulaError("unexpected '.'", i, text)
        if ch == "=":
            if nxt == "=":
                raise FormulaError("comparisons are not allowed", i, text)
            raise FormulaError(
                "'=' is not allowed (keyword arguments and assignments are not supported)",
                i, text,
            )
        if ch in "<>":
            if nxt == ch:
                raise FormulaError("bit shifts are not allowed", i, text)
            raise FormulaError("comparisons are not allowed", i, text)
        if ch == "!":
            if nxt == "=":
                raise FormulaError("comparisons are not allowed", i, text)
            raise FormulaError("unexpected '!'", i, text)
        message = _SINGLE_CHAR_ERRORS.get(ch)
        if message is None:
            message = f"unexpected character {ch!r}"
        raise FormulaError(message, i, text)
    yield Token("end", "", n)

