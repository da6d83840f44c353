"""Restricted formula language (contract header; the parser is being written).

The AST below is the contract between the parser, the canonicaliser and the evaluator's
lowering step; keep it stable.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    - ``op == "num"``: a literal; ``value`` holds the float (``pi`` and ``e`` become nums too).
    - ``op == "var"``: a dataset variable; ``name`` holds its name.
    - ``op == "const"``: a free constant to fit; ``name`` holds its name.
    - ``op`` in :data:`BINARY_OPS`: ``args == (left, right)``.
    - ``op`` in :data:`UNARY_OPS`: ``args == (operand,)``.
    """

    op: str
    args: tuple["Node", ...] = ()
    value: float | None = None
    name: str | None = None
