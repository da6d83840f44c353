"""A tree as flat postfix code: cheap to pickle, rebuilt without parsing text.

A process that has parsed a formula can hand its tree to another process as this code instead
of the text, which the receiver would have to parse again (``Node`` objects themselves pickle
slowly: a frozen slotted dataclass is restored attribute by attribute in Python). Operators are
their op names (the op tables give their arity); a leaf is an ``(op, value, name)`` triple.
Both directions walk the tree without recursion, so any tree the language allows round-trips.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import FormulaError
from .nodes import BINARY_OPS, LEAF_OPS, UNARY_OPS, Node

__all__ = ["Leaf", "PostfixCode", "from_postfix", "to_postfix"]

#: A leaf's op, value (``num`` only) and name (``var``, ``const``, and ``pi``/``e`` nums).
Leaf = tuple[str, float | None, str | None]
PostfixCode = tuple[str | Leaf, ...]

_UNARY = frozenset(UNARY_OPS)
_BINARY = frozenset(BINARY_OPS)
_LEAVES = frozenset(LEAF_OPS)


def to_postfix(tree: Node) -> PostfixCode:
    """``tree`` in post-order: each operator after its operands."""
    out: list[str | Leaf] = []
    stack: list[tuple[Node, bool]] = [(tree, False)]
    while stack:
        node, expanded = stack.pop()
        if not node.args:
            out.append((node.op, node.value, node.name))
        elif expanded:
            out.append(node.op)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.args))
    return tuple(out)


def from_postfix(code: Sequence[str | Leaf]) -> Node:
    """The tree :func:`to_postfix` encoded; :class:`FormulaError` for code that is not one."""
    stack: list[Node] = []
    try:
        for item in code:
            if item.__class__ is tuple:
                op, value, name = item
                if op not in _LEAVES:
                    raise FormulaError(f"postfix code: {op!r} is not a leaf")
                stack.append(Node(op, (), value, name))
            elif item in _UNARY:
                stack.append(Node(item, (stack.pop(),)))
            elif item in _BINARY:
                right = stack.pop()
                stack.append(Node(item, (stack.pop(), right)))
            else:
                raise FormulaError(f"postfix code: unknown item {item!r}")
    except (IndexError, ValueError, TypeError) as exc:
        raise FormulaError(f"postfix code is malformed ({exc})") from exc
    if len(stack) != 1:
        raise FormulaError(f"postfix code leaves {len(stack)} trees, not one")
    return stack[0]
