"""Formulas parsed and lowered where they were proposed, so the shared evaluator does neither.

One evaluator serves many agents, and its host thread is the run's narrowest point: parsing a
formula and lowering it to a register program cost it about as much as the fit itself on a
1,000-row CPU search. An agent has usually parsed its formula already (``evolve`` keys every
offspring by canonical form), so it sends a :class:`PreparedFormula` instead of the text: the
canonical key, the constants' names, the lowered :class:`~sr_dist.evaluator.program.Program` and
the canonical tree as postfix code (rebuilt only when the evaluator needs the tree itself: data
starts, the float64 refit of a near-exact fit). It pickles as its fields (strings, tuples and
the program), never as ``Node`` objects.

The evaluator trusts a prepared formula as it trusts its own parse: both come from this package's
parser and lowering. One prepared against other columns than its dataset's is parsed again from
its text (a name may be a variable there and a constant here). Text that does not parse or
lower is sent as text, so the evaluator reports why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from sr_dist.formula import Formula, Node
from sr_dist.formula.memo import parse_cached
from sr_dist.formula.postfix import PostfixCode, from_postfix, to_postfix

from .program import Program, lower

__all__ = ["PREPARED_MEMO_SIZE", "PreparedFormula", "prepare", "prepare_text"]

#: Texts whose prepared form :func:`prepare_text` keeps (re-proposed texts cost a lookup).
PREPARED_MEMO_SIZE = 4096


@dataclass(frozen=True, eq=False)
class PreparedFormula:
    """What the evaluator needs of a formula, computed by the process that proposed it.

    The fields mirror :class:`~sr_dist.formula.Formula`'s (``text``, ``canonical``,
    ``variables``, ``constants``, ``canonical_constants``, ``complexity``); ``program`` is the
    canonical tree lowered against ``feature_names`` with constants ``c0, c1, ...``, and
    ``canonical_code`` that tree in postfix (:attr:`canonical_tree` rebuilds it).
    """

    text: str
    canonical: str
    variables: tuple[str, ...]
    constants: tuple[str, ...]
    canonical_constants: tuple[str, ...]
    complexity: int
    feature_names: tuple[str, ...]
    program: Program
    canonical_code: PostfixCode

    @cached_property
    def canonical_tree(self) -> Node:
        """The canonical tree (rebuilt from ``canonical_code`` on first use)."""
        return from_postfix(self.canonical_code)

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[Any, ...]:
        # The fields only (a rebuilt canonical_tree stays behind: Nodes pickle slowly).
        return (PreparedFormula, (self.text, self.canonical, self.variables, self.constants,
                                  self.canonical_constants, self.complexity, self.feature_names,
                                  self.program, self.canonical_code))


def prepare(formula: Formula, feature_names: Sequence[str]) -> PreparedFormula:
    """``formula`` prepared for an evaluator whose dataset has ``feature_names`` (in column
    order); :class:`LoweringError` where its tree cannot be lowered."""
    names = tuple(feature_names)
    constants = [f"c{j}" for j in range(len(formula.canonical_constants))]
    program = lower(formula.canonical_tree, names, constants)
    return PreparedFormula(
        text=formula.text, canonical=formula.canonical, variables=formula.variables,
        constants=formula.constants, canonical_constants=formula.canonical_constants,
        complexity=formula.complexity, feature_names=names, program=program,
        canonical_code=to_postfix(formula.canonical_tree))


@lru_cache(maxsize=PREPARED_MEMO_SIZE)
def prepare_text(text: str, feature_names: tuple[str, ...]) -> PreparedFormula | str:
    """``text`` parsed (from the process's memo: :func:`~sr_dist.formula.memo.parse_cached`)
    and prepared, or ``text`` itself where it does not parse or lower: the evaluator then
    reports why, as it does for any text."""
    try:
        formula = parse_cached(text, feature_names)
        return text if formula is None else prepare(formula, feature_names)
    except Exception:  # noqa: BLE001 - whatever went wrong, the evaluator says it for this text
        return text
