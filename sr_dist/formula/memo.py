"""One process-wide memo of parsed formulas.

A proposer parses every formula it breeds (to key it by canonical form) and the code that sends
those formulas to the evaluator needs the same parse; both ask this memo, so a formula is parsed
once per process.
"""

from __future__ import annotations

from functools import lru_cache

from .core import Formula, parse_formula
from .errors import FormulaError

__all__ = ["PARSE_MEMO_SIZE", "parse_cached"]

#: Formulas the memo keeps (least recently used dropped first); about 2.5 KiB each.
PARSE_MEMO_SIZE = 65536


@lru_cache(maxsize=PARSE_MEMO_SIZE)
def parse_cached(text: str, variables: tuple[str, ...]) -> Formula | None:
    """``parse_formula(text, variables)`` memoised; None for text that does not parse (the
    caller that needs the reason parses it itself)."""
    try:
        return parse_formula(text, variables)
    except FormulaError:
        return None
