"""The canonical form of a tree, whose rendering is the cache key.

Equal for formulas that differ only by commutative order, constant names and foldable literal
arithmetic; semantics-preserving up to floating-point rounding, no algebraic simplification.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .nodes import Node
from .render import render_canonical
from .tree import iter_nodes

__all__ = ["Canonical", "canonicalize"]

_MATH_UNARY: Mapping[str, Callable[[float], float]] = {
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "exp": math.exp, "log": math.log,
    "sqrt": math.sqrt, "abs": math.fabs, "tanh": math.tanh, "sinh": math.sinh,
    "cosh": math.cosh, "arcsin": math.asin, "arccos": math.acos, "arctan": math.atan,
}

# Sort ranks of operand kinds inside a flattened product / sum: products read "2*c0*x*sin(x)",
# sums read "x*y + x + c0 + 2".
_MUL_RANK = {"num": 0, "const": 1, "var": 2}
_ADD_RANK = {"num": 3, "const": 2, "var": 1}


class _C:
    """Internal canonical node: n-ary add/mul, ``key`` ignores constant names."""

    __slots__ = ("args", "key", "name", "op", "pending", "value")

    def __init__(self, op: str, args: tuple[_C, ...], value: float | None, name: str | None,
                 key: str, pending: list[_C] | None = None) -> None:
        self.op = op
        self.args = args
        self.value = value
        self.name = name
        self.key = key
        # operands of a sum/product still being collected along a chain of the same op; the
        # chain is combined and sorted once, by its first ancestor of another kind (_finish)
        self.pending = pending


def _collect(op: str, kids: Sequence[_C]) -> _C:
    first = kids[0]
    if first.pending is not None and first.op == op:
        parts = first.pending  # consumed exactly once: its parent is this node
    else:
        parts = [_finish(first)]
    for kid in kids[1:]:
        if kid.pending is not None and kid.op == op:
            parts.extend(kid.pending)
        else:
            parts.append(_finish(kid))
    return _C(op, (), None, None, "", parts)


def _finish(item: _C) -> _C:
    return item if item.pending is None else _nary(item.op, item.pending)


def _cnum(value: float) -> _C:
    value = value + 0.0  # -0.0 -> 0.0
    return _C("num", (), value, None, "n" + repr(value))


def _safe(fn: Callable[[], float]) -> float | None:
    try:
        value = fn()
    except (ArithmeticError, ValueError):
        return None
    if isinstance(value, complex) or not math.isfinite(value):
        return None
    return float(value)


def _nary(op: str, items: Sequence[_C]) -> _C:
    """Flatten, fold literals, drop identities and sort the operands of add or mul."""
    flat: list[_C] = []
    nums: list[float] = []
    for item in items:
        for sub in (item.args if item.op == op else (item,)):
            if sub.op == "num":
                assert sub.value is not None
                nums.append(sub.value)
            else:
                flat.append(sub)
    identity = 0.0 if op == "add" else 1.0
    if nums:
        if len(nums) == 1:
            combined: float | None = nums[0]
        elif op == "add":
            combined = _safe(lambda: math.fsum(nums))
        else:
            combined = _safe(lambda: math.prod(sorted(nums)))
        if combined is None:
            flat.extend(_cnum(v) for v in nums)
        elif not (combined == identity and flat):
            flat.append(_cnum(combined))
    if len(flat) == 1:
        return flat[0]
    if op == "add":
        flat.sort(key=_term_sort_key)
    else:
        flat.sort(key=lambda c: (_MUL_RANK.get(c.op, 3), c.key))
    return _C(op, tuple(flat), None, None, f"{op}({','.join(c.key for c in flat)})")


def _term_sort_key(item: _C) -> tuple[int, str, bool]:
    """Sort key of a sum term by its magnitude, so ``x - y`` keeps reading ``x - y``."""
    if item.op == "num":
        assert item.value is not None
        return _ADD_RANK["num"], _cnum(abs(item.value)).key, item.value < 0
    if item.op == "mul" and item.args[0].op == "num":
        coeff = item.args[0].value
        assert coeff is not None
        if coeff < 0:
            rest = item.args[1:]
            if coeff == -1.0 and len(rest) == 1:
                return _ADD_RANK.get(rest[0].op, 0), rest[0].key, True
            keys = [c.key for c in rest]
            if coeff != -1.0:
                keys.insert(0, _cnum(-coeff).key)
            return 0, f"mul({','.join(keys)})", True
    return _ADD_RANK.get(item.op, 0), item.key, False


def _negate(item: _C) -> _C:
    if item.op == "num":
        assert item.value is not None
        return _cnum(-item.value)
    return _nary("mul", (_cnum(-1.0), item))


def _item(node: Node, counts: Mapping[str, int]) -> _C:
    """The canonical item of ``node`` (a sum or product may still be collecting operands:
    :func:`_finish` closes it). Recursive: :func:`canonicalize` makes room for deep trees."""
    op = node.op
    if op == "num":
        assert node.value is not None
        return _cnum(float(node.value))
    if op == "var":
        return _C("var", (), None, node.name, "v" + str(node.name))
    if op == "const":
        return _C("const", (), None, node.name, f"c{counts[str(node.name)]}")
    args = node.args
    if op == "add" or op == "mul":
        return _collect(op, (_item(args[0], counts), _item(args[1], counts)))
    if op == "sub":
        return _collect("add", (_item(args[0], counts), _negate(_finish(_item(args[1], counts)))))
    if op == "neg":
        return _negate(_finish(_item(args[0], counts)))
    if op in ("div", "pow"):
        a, b = _finish(_item(args[0], counts)), _finish(_item(args[1], counts))
        if a.op == "num" and b.op == "num":
            x, y = float(a.value or 0.0), float(b.value or 0.0)
            folded = _safe(lambda: x / y if op == "div" else math.pow(x, y))
            if folded is not None:
                return _cnum(folded)
        return _C(op, (a, b), None, None, f"{op}({a.key},{b.key})")
    a = _finish(_item(args[0], counts))
    if a.op == "num":
        arg = float(a.value or 0.0)
        folded = _safe(lambda: _MATH_UNARY[op](arg))
        if folded is not None:
            return _cnum(folded)
    return _C(op, (a,), None, None, f"{op}({a.key})")


def _split_sign(term: Node) -> tuple[bool, Node]:
    """(negative?, magnitude) of an emitted sum term, so ``a + (-b)`` is emitted as ``a - b``.

    Sign flips are exact in floating point, so this rewrite never changes a value.
    """
    if term.op == "num":
        assert term.value is not None
        return (True, Node("num", (), -term.value)) if term.value < 0 else (False, term)
    if term.op == "neg":
        return True, term.args[0]
    if term.op != "mul":
        return False, term
    spine = [term]
    while spine[-1].op == "mul":
        spine.append(spine[-1].args[0])
    leaf = spine.pop()
    if leaf.op != "num" or leaf.value is None or leaf.value >= 0:
        return False, term
    node = Node("num", (), -leaf.value)
    for parent in reversed(spine):
        node = Node("mul", (node, parent.args[1]))
    return True, node


def _chain(op: str, parts: Sequence[Node]) -> Node:
    node = parts[0]
    for part in parts[1:]:
        node = Node(op, (node, part))
    return node


def _emit(item: _C, rename: Mapping[str, str]) -> Node:
    """The contract AST of a canonical item, constants renamed by ``rename`` (recursive)."""
    op = item.op
    if op == "num":
        return Node("num", (), item.value)
    if op == "var":
        return Node("var", (), None, item.name)
    if op == "const":
        return Node("const", (), None, rename[str(item.name)])
    kids = [_emit(a, rename) for a in item.args]
    if op == "mul":
        first = kids[0]
        if first.op == "num" and first.value == -1.0:
            return Node("neg", (_chain("mul", kids[1:]),))
        return _chain("mul", kids)
    if op == "add":
        node = kids[0]
        for term in kids[1:]:
            negative, magnitude = _split_sign(term)
            node = Node("sub" if negative else "add", (node, magnitude))
        return node
    return Node(op, tuple(kids))


def _count_constants(node: Node, counts: dict[str, int]) -> None:
    if node.op == "const":
        counts[str(node.name)] = counts.get(str(node.name), 0) + 1
    for a in node.args:
        _count_constants(a, counts)


def _order_constants(item: _C, order: dict[str, str]) -> None:
    if item.op == "const":
        if item.name not in order:
            order[str(item.name)] = f"c{len(order)}"
    for a in item.args:
        _order_constants(a, order)


@dataclass(frozen=True, slots=True)
class Canonical:
    """The canonical form of a tree: see :class:`~sr_dist.formula.Formula` for the fields."""

    tree: Node
    text: str
    constants: tuple[str, ...]


def canonicalize(tree: Node) -> Canonical:
    """Canonical form: folded literals, flattened and sorted sums/products, renamed constants.

    Semantics-preserving up to floating-point rounding (reassociation of sums and products);
    no algebraic simplification.
    """
    try:
        return _canonicalize(tree)
    except RecursionError:
        pass
    # Deeper than the interpreter's limit allows (a hand-built tree): every pass recurses at
    # most once per node and level, so a limit of a few frames per node is enough.
    nodes = sum(1 for _ in iter_nodes(tree))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * nodes + 200))
    try:
        return _canonicalize(tree)
    finally:
        sys.setrecursionlimit(limit)


def _canonicalize(tree: Node) -> Canonical:
    """:func:`canonicalize` by plain recursion (one call per node and pass: the generic
    ``fold_tree`` costs two, and this runs for every formula a search proposes)."""
    counts: dict[str, int] = {}
    _count_constants(tree, counts)
    root = _finish(_item(tree, counts))
    order: dict[str, str] = {}
    _order_constants(root, order)
    ctree = _emit(root, order)
    return Canonical(ctree, render_canonical(ctree), tuple(order))
