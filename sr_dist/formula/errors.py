"""The one error type of the formula language, with a caret snippet that shows where."""

from __future__ import annotations

from typing import Any

__all__ = ["FormulaError"]


class FormulaError(ValueError):
    """A formula that cannot be accepted; says what is wrong and where.

    ``message`` is the bare reason, ``offset`` the 0-based character offset in ``text`` (or
    ``None`` when the problem has no position, e.g. empty input); ``str()`` adds a caret snippet.
    """

    def __init__(self, message: str, offset: int | None = None, text: str | None = None) -> None:
        self.message = message
        self.offset = offset
        self.text = text
        super().__init__(self._render())

    def _render(self) -> str:
        if self.offset is None or self.text is None:
            return self.message
        start = max(0, self.offset - 30)
        end = min(len(self.text), self.offset + 30)
        window = self.text[start:end]
        prefix = "..." if start > 0 else ""
        suffix = "..." if end < len(self.text) else ""
        shown = "".join(ch if ch.isprintable() else " " for ch in window)
        caret = " " * (len(prefix) + self.offset - start) + "^"
        return (
            f"{self.message} at offset {self.offset}: {self.text[start:end]!r}\n"
            f"    {prefix}{shown}{suffix}\n    {caret}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.offset, self.text))
