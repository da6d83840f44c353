"""Tool-call parsers: model output ⇄ normalized :class:`~sr_dist.tools.types.ToolCall` values.

``get_parser("openai" | "json" | "text")`` returns a :class:`BaseParser` with
``format_tools(specs)``, ``parse(text, native_calls=None) -> ParseResult`` (never raises; one
outcome per model call, a ``ToolCall`` or an ``UnreadableCall``, plus reply-level problems) and
``result_messages(calls, results)``. See ``docs/parsers.md`` for the formats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sr_dist.parsers.base import BaseParser, PromptedParser, SpecLike, normalize_spec
from sr_dist.parsers.json_calls import JsonParser
from sr_dist.parsers.openai_native import OpenAIParser, openai_tools
from sr_dist.parsers.outcomes import CallOutcome, ParseResult, UnreadableCall
from sr_dist.parsers.text_calls import TextParser

__all__ = [
    "BaseParser",
    "CallOutcome",
    "ParseResult",
    "UnreadableCall",
    "PromptedParser",
    "SpecLike",
    "JsonParser",
    "OpenAIParser",
    "TextParser",
    "PARSER_NAMES",
    "get_parser",
    "normalize_spec",
    "openai_tools",
]

_FACTORIES: dict[str, Callable[..., BaseParser]] = {
    OpenAIParser.name: OpenAIParser,
    JsonParser.name: JsonParser,
    TextParser.name: TextParser,
}

#: The names ``get_parser`` accepts.
PARSER_NAMES: tuple[str, ...] = tuple(_FACTORIES)


def get_parser(name: str, **options: Any) -> BaseParser:
    """A new parser for the format ``name``; ``options`` go to its constructor.

    Only ``openai`` takes an option today (``text_fallback=True``). Raises ``ValueError`` for an
    unknown name or option, naming what is accepted.
    """
    factory = _FACTORIES.get(name) if isinstance(name, str) else None
    if factory is None:
        raise ValueError(f"unknown parser {name!r}; choose one of {', '.join(PARSER_NAMES)}")
    try:
        return factory(**options)
    except TypeError as exc:
        raise ValueError(f"parser {name!r} does not accept options {sorted(options)}: {exc}") from None
