"""The AST (:class:`Node`), its op tables and the language's names and limits.

The AST is the contract between the parser, the canonicaliser and the evaluator's lowering
step; keep it stable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "free_constant_prefix",
    "BINARY_OPS",
    "CALLABLE",
    "FUNCTION_ALIASES",
    "FUNCTION_NAMES",
    "IDENT_RE",
    "LEAF_OPS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_NODES",
    "NAMED_NUMBERS",
    "UNARY_OPS",
    "Node",
    "is_identifier",
]

#: Binary operators in the AST (always exactly two children).
BINARY_OPS = ("add", "sub", "mul", "div", "pow")
#: Unary operators and functions in the AST (exactly one child).
UNARY_OPS = (
    "neg", "sin", "cos", "tan", "exp", "log", "sqrt", "abs",
    "tanh", "sinh", "cosh", "arcsin", "arccos", "arctan",
)
#: Leaf kinds.
LEAF_OPS = ("num", "var", "const")


@dataclass(frozen=True, slots=True)
class Node:
    """One AST node.

    - ``op == "num"``: a literal; ``value`` holds the float (``pi`` and ``e`` become nums too;
      those two carry ``name == "pi"`` / ``"e"`` so they print back by name — evaluators use
      ``value`` only).
    - ``op == "var"``: a dataset variable; ``name`` holds its name.
    - ``op == "const"``: a free constant to fit; ``name`` holds its name.
    - ``op`` in :data:`BINARY_OPS`: ``args == (left, right)``.
    - ``op`` in :data:`UNARY_OPS`: ``args == (operand,)``.
    """

    op: str
    args: tuple[Node, ...] = ()
    value: float | None = None
    name: str | None = None


#: Functions callable in formulas (each is also an AST op of the same name).
FUNCTION_NAMES: tuple[str, ...] = tuple(op for op in UNARY_OPS if op != "neg")
#: Extra spellings accepted for functions; they parse to the op on the right.
FUNCTION_ALIASES: Mapping[str, str] = {
    "ln": "log",
    "asin": "arcsin",
    "acos": "arccos",
    "atan": "arctan",
}
#: Named numeric constants (parsed as ``num`` nodes unless a variable has the same name).
NAMED_NUMBERS: Mapping[str, float] = {"pi": math.pi, "e": math.e}

#: Default limit on the formula text length (characters).
MAX_LENGTH = 2000
#: Default limit on the AST node count.
MAX_NODES = 200
#: Default limit on the parser's nesting depth (parentheses, calls, unary minus, powers).
MAX_DEPTH = 64

#: Every name that may be called, spelling -> AST op (package-internal: the parser, the
#: variable-name checks).
CALLABLE: Mapping[str, str] = {**{name: name for name in FUNCTION_NAMES}, **FUNCTION_ALIASES}
#: What a variable or constant name looks like (package-internal).
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def free_constant_prefix(variables: Iterable[str], preferred: Sequence[str] = ("c", "k", "a", "w", "cst")) -> str:
    """A prefix ``p`` for generated constant names ``p0, p1, ...`` that no variable in
    ``variables`` can be mistaken for: the first of ``preferred`` no ``<p><digits>`` variable
    takes, else the last one repeated until free (a constant named like a variable would parse
    as that variable)."""
    taken = [v for v in variables if isinstance(v, str)]
    candidates = list(preferred) or ["c"]
    prefix = candidates[0]
    for prefix in candidates:
        if not any(re.fullmatch(re.escape(prefix) + "[0-9]+", v) for v in taken):
            return prefix
    while any(re.fullmatch(re.escape(prefix) + "[0-9]+", v) for v in taken):
        prefix += candidates[-1]
    return prefix


def is_identifier(name: str) -> bool:
    """True when ``name`` can be a variable of a formula (ASCII identifier, not a function)."""
    return (
        isinstance(name, str)
        and IDENT_RE.match(name) is not None
        and name not in CALLABLE
    )
