"""Walking trees without recursion limits: a post-order fold, a pre-order walk, the AST check."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol, Self, TypeVar

from .errors import FormulaError
from .nodes import BINARY_OPS, IDENT_RE, LEAF_OPS, UNARY_OPS, Node

__all__ = ["Tree", "fold_tree", "iter_nodes", "replace_leaves", "validate_tree"]


class Tree(Protocol):
    """Anything with children in ``args``: the AST and the canonicaliser's n-ary nodes."""

    @property
    def args(self) -> Sequence[Self]: ...


N = TypeVar("N", bound=Tree)
T = TypeVar("T")

#: Trees deeper than this are folded with an explicit stack instead of recursion.
_RECURSION_DEPTH = 150


class _TooDeep(Exception):
    pass


def _fold_recursive(node: N, fn: Callable[[N, tuple[T, ...]], T], depth: int) -> T:
    args = node.args
    if not args:
        return fn(node, ())
    if depth > _RECURSION_DEPTH:
        raise _TooDeep
    if len(args) == 1:
        return fn(node, (_fold_recursive(args[0], fn, depth + 1),))
    return fn(node, tuple([_fold_recursive(a, fn, depth + 1) for a in args]))


def fold_tree(root: N, fn: Callable[[N, tuple[T, ...]], T]) -> T:
    """Post-order fold: ``fn(node, results_of_children)`` for every node, children first.

    Shallow trees (the usual case) recurse, which is fastest; deeper ones use an explicit
    stack, so no tree can raise ``RecursionError``. ``fn`` must be pure (it may run twice).
    """
    try:
        return _fold_recursive(root, fn, 0)
    except _TooDeep:
        pass
    stack: list[tuple[N, bool]] = [(root, False)]
    out: list[T] = []
    while stack:
        node, ready = stack.pop()
        if ready:
            k = len(node.args)
            if k:
                children = tuple(out[-k:])
                del out[-k:]
            else:
                children = ()
            out.append(fn(node, children))
        else:
            stack.append((node, True))
            for child in reversed(node.args):
                stack.append((child, False))
    return out[0]


def replace_leaves(root: Node, op: str, values: Mapping[str, Node]) -> Node:
    """``root`` with each ``op`` leaf (``"const"`` or ``"var"``) named in ``values`` replaced by
    its tree (fitted constants written in, placeholders expanded); other nodes are kept."""

    def step(node: Node, kids: tuple[Node, ...]) -> Node:
        if node.op == op and node.name in values:
            return values[str(node.name)]
        return Node(node.op, kids, node.value, node.name) if kids else node

    return fold_tree(root, step)


def iter_nodes(root: N) -> Iterator[N]:
    """Pre-order traversal without recursion."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.args))


def validate_tree(root: Node, max_nodes: int) -> int:
    """Check a hand-built tree against the contract; returns its node count."""
    count = 0
    for node in iter_nodes(root):
        count += 1
        if count > max_nodes:
            raise FormulaError(f"formula is too large (more than {max_nodes} nodes)")
        if not isinstance(node, Node):
            raise FormulaError(f"not an AST node: {node!r}")
        if node.op in BINARY_OPS:
            arity = 2
        elif node.op in UNARY_OPS:
            arity = 1
        elif node.op in LEAF_OPS:
            arity = 0
        else:
            raise FormulaError(f"unknown AST op {node.op!r}")
        if len(node.args) != arity:
            raise FormulaError(f"AST op {node.op!r} needs {arity} children, got {len(node.args)}")
        if node.op == "num" and (
            not isinstance(node.value, (int, float)) or not math.isfinite(node.value)
        ):
            raise FormulaError(f"num node needs a finite value, got {node.value!r}")
        if node.op in ("var", "const") and not (
            isinstance(node.name, str) and IDENT_RE.match(node.name)
        ):
            raise FormulaError(f"{node.op} node needs an identifier name, got {node.name!r}")
    return count
