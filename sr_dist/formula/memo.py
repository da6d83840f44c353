"""One process-wide memo of parsed formulas.

A proposer parses every formula it breeds (to key it by canonical form) and the code that sends
those formulas to the evaluator needs the same parse; both ask this memo, so a formula is parsed
once per process. A proposer that builds a formula without parsing its text (the evolve search,
from the tree it bred) hands it to :func:`remember`, so that the later lookups of the text find it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .core import Formula, parse_formula
from .errors import FormulaError

__all__ = ["PARSE_MEMO_SIZE", "clear_memo", "parse_cached", "recall", "remember"]

#: Formulas the memo keeps (least recently used dropped first); about 2.5 KiB each.
PARSE_MEMO_SIZE = 65536

_Key = tuple[str, tuple[str, ...]]
_memo: OrderedDict[_Key, Formula | None] = OrderedDict()
# A proposer breeds in a background thread while its tool call runs in another.
_lock = threading.Lock()


def parse_cached(text: str, variables: tuple[str, ...]) -> Formula | None:
    """``parse_formula(text, variables)`` memoised; None for text that does not parse (the
    caller that needs the reason parses it itself)."""
    key = (text, variables)
    with _lock:
        if key in _memo:
            _memo.move_to_end(key)
            return _memo[key]
    try:
        formula: Formula | None = parse_formula(text, variables)
    except FormulaError:
        formula = None
    _store(key, formula)
    return formula


def recall(text: str, variables: tuple[str, ...]) -> Formula | None:
    """The formula the memo holds for ``text``, without parsing: None when it holds none (or
    holds that the text does not parse). A proposer that built a text's tree itself asks here
    before it canonicalizes: a bred formula is often one it bred before."""
    key = (text, variables)
    with _lock:
        formula = _memo.get(key)
        if formula is not None:
            _memo.move_to_end(key)
        return formula


def remember(formula: Formula, variables: tuple[str, ...]) -> None:
    """Keep ``formula`` as the parse of its text with ``variables``: it must be what
    ``parse_formula(formula.text, variables)`` returns."""
    _store((formula.text, variables), formula)


def clear_memo() -> None:
    """Forget every formula (a benchmark timing a new process's parses)."""
    with _lock:
        _memo.clear()


def _store(key: _Key, formula: Formula | None) -> None:
    with _lock:
        _memo[key] = formula
        _memo.move_to_end(key)
        if len(_memo) > PARSE_MEMO_SIZE:
            _memo.popitem(last=False)
