"""Pure helpers over the formula AST (:class:`sr_dist.formula.Node`) for the evolve search.

The search edits trees, never text: these functions build, walk, rewrite, tidy and render
trees (the rendering itself is :mod:`sr_dist.sr.evolve.rendering`; ``render`` is re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from sr_dist.formula import BINARY_OPS, UNARY_OPS, Node, evaluate_numpy
from sr_dist.formula import free_constant_prefix as constant_prefix  # the one naming rule
from sr_dist.sr.evolve.rendering import render

__all__ = [
    "Path",
    "var",
    "const",
    "num",
    "binary",
    "unary",
    "size",
    "depth",
    "count_constants",
    "has_var",
    "variables_of",
    "walk",
    "subtree",
    "replace",
    "tidy",
    "render",
    "name_constants",
    "with_constant_values",
    "constant_values",
    "values",
    "constant_prefix",
    "product",
    "signed_sum",
    "total",
]

#: A position in a tree: the child indices from the root.
Path = tuple[int, ...]

_CONST = Node("const", name="c")


def var(name: str) -> Node:
    return Node("var", name=name)


def const() -> Node:
    return _CONST


def num(value: float) -> Node:
    return Node("num", value=float(value))


def binary(op: str, left: Node, right: Node) -> Node:
    if op not in BINARY_OPS:
        raise ValueError(f"not a binary operator: {op!r}")
    return Node(op, (left, right))


def unary(op: str, arg: Node) -> Node:
    if op not in UNARY_OPS:
        raise ValueError(f"not a unary operator: {op!r}")
    return Node(op, (arg,))


def product(factors: Sequence[Node]) -> Node:
    """Left-nested product of ``factors`` (``num(1)`` when empty)."""
    if not factors:
        return num(1.0)
    out = factors[0]
    for f in factors[1:]:
        out = Node("mul", (out, f))
    return out


def total(terms: Sequence[Node]) -> Node:
    """Left-nested sum of ``terms`` (``num(0)`` when empty)."""
    if not terms:
        return num(0.0)
    out = terms[0]
    for t in terms[1:]:
        out = Node("add", (out, t))
    return out


def size(node: Node) -> int:
    """Node count: the complexity measure the formula language uses."""
    n = 1
    for a in node.args:
        n += size(a)
    return n


def depth(node: Node) -> int:
    return 1 + max((depth(a) for a in node.args), default=0)


def count_constants(node: Node) -> int:
    if node.op == "const":
        return 1
    n = 0
    for a in node.args:
        n += count_constants(a)
    return n


def has_var(node: Node) -> bool:
    if node.op == "var":
        return True
    for a in node.args:
        if has_var(a):
            return True
    return False


def variables_of(node: Node) -> frozenset[str]:
    if node.op == "var":
        return frozenset({node.name or ""})
    out: frozenset[str] = frozenset()
    for a in node.args:
        out |= variables_of(a)
    return out


def walk(node: Node, path: Path = ()) -> Iterator[tuple[Path, Node]]:
    """Every ``(path, subtree)`` in pre-order (an explicit stack: a recursive generator costs
    a frame per level for every node it passes up)."""
    stack = [(path, node)]
    while stack:
        at, cur = stack.pop()
        yield at, cur
        args = cur.args
        for i in range(len(args) - 1, -1, -1):
            stack.append((at + (i,), args[i]))


def subtree(node: Node, path: Path) -> Node:
    for i in path:
        node = node.args[i]
    return node


def replace(node: Node, path: Path, new: Node) -> Node:
    """A copy of ``node`` with the subtree at ``path`` replaced by ``new``."""
    if not path:
        return new
    i = path[0]
    args = list(node.args)
    args[i] = replace(args[i], path[1:], new)
    return Node(node.op, tuple(args), node.value, node.name)


# --------------------------------------------------------------------------------------------
# Tidying: remove redundancy that only slows the constant fit down.
# --------------------------------------------------------------------------------------------


def _is_leaf_number(node: Node) -> bool:
    return node.op in ("num", "const")


def _factors(node: Node, inverted: bool, out: list[tuple[Node, bool]]) -> None:
    if node.op == "mul":
        _factors(node.args[0], inverted, out)
        _factors(node.args[1], inverted, out)
    elif node.op == "div":
        _factors(node.args[0], inverted, out)
        _factors(node.args[1], not inverted, out)
    else:
        out.append((node, inverted))


def _terms(node: Node, negated: bool, out: list[tuple[Node, bool]]) -> None:
    if node.op == "add":
        _terms(node.args[0], negated, out)
        _terms(node.args[1], negated, out)
    elif node.op == "sub":
        _terms(node.args[0], negated, out)
        _terms(node.args[1], not negated, out)
    else:
        out.append((node, negated))


def _monic(node: Node) -> Node | None:
    """``node`` without the constant of its first scaled term when ``node`` is a sum whose every
    term is a free constant or carries one as a factor (a scale the sum need not have); else
    None."""
    if node.op not in ("add", "sub"):
        return None
    terms: list[tuple[Node, bool]] = []
    _terms(node, False, terms)
    split: list[list[tuple[Node, bool]]] = []
    for t, _ in terms:
        factors: list[tuple[Node, bool]] = []
        _factors(t, False, factors)
        if t.op != "const" and not any(f.op == "const" for f, _ in factors):
            return None
        split.append(factors)
    first = next((i for i, (t, _) in enumerate(terms) if t.op != "const"), None)
    if first is None:
        return None
    factors = split[first]
    at = next(i for i, (f, _) in enumerate(factors) if f.op == "const")
    rest = factors[:at] + factors[at + 1:]
    new = list(terms)
    new[first] = (_rebuild_product(rest), terms[first][1])
    return signed_sum(new)


def _rebuild_product(factors: list[tuple[Node, bool]]) -> Node:
    top = [f for f, inv in factors if not inv]
    bottom = [f for f, inv in factors if inv]
    numerator = product(top) if top else num(1.0)
    return Node("div", (numerator, product(bottom))) if bottom else numerator


def signed_sum(terms: Sequence[tuple[Node, bool]]) -> Node:
    """The sum of ``(term, negated)`` pairs, a positive term first where there is one (so the
    sum does not start with a negation, which tidying would fold into a valueless constant);
    the order is kept otherwise."""
    terms = sorted(terms, key=lambda t: t[1])
    out = terms[0][0] if not terms[0][1] else Node("neg", (terms[0][0],))
    for t, negated in terms[1:]:
        out = Node("sub" if negated else "add", (out, t))
    return out


def tidy(node: Node, exponent: bool = False) -> Node:
    """Fold var-free subtrees into one free constant and merge redundant constants.

    ``c0*(c1*x)`` becomes ``c*x``, ``x + c0 - c1`` becomes ``x + c``, ``sin(c0*c1)`` becomes
    ``c``, ``c0*(c1*x + c2)`` becomes ``c0*(x + c1)`` (the product's constant is the sum's
    scale); literal exponents (``x**2``) stay literal. Bottom-up, so one pass suffices.
    """
    return _tidy(node)[0]


#: Interior subtrees whose tidy form :func:`_tidy` remembers (by identity): offspring share
#: most of their subtrees with their parents, and a parent breeds many offspring, so the same
#: subtree objects come back turn after turn. Emptied when full (a memo of a pure function).
TIDY_MEMO_SIZE = 1 << 16
_tidied: dict[int, tuple[Node, tuple[Node, bool, bool]]] = {}


def _tidy(node: Node) -> tuple[Node, bool, bool]:
    """:func:`tidy`, with whether the result has a variable and (for a result without one)
    whether it has a free constant, so no level walks its subtree again to find out."""
    if not node.args:  # a leaf is its own tidy form: nothing to remember
        return _tidy_node(node)
    kept = _tidied.get(id(node))
    if kept is not None and kept[0] is node:  # the entry keeps the node alive: its id is its own
        return kept[1]
    out = _tidy_node(node)
    if len(_tidied) >= TIDY_MEMO_SIZE:
        _tidied.clear()
    _tidied[id(node)] = (node, out)
    return out


def _tidy_node(node: Node) -> tuple[Node, bool, bool]:
    op = node.op
    if op == "var":
        return node, True, False
    if op == "const":
        return node, False, True
    if op == "num":
        return node, False, False
    if op == "pow":
        base, base_var, base_const = _tidy(node.args[0])
        expo = node.args[1]
        expo_var = expo_const = False
        if expo.op != "num":
            expo, expo_var, expo_const = _tidy(expo)
        if base is not node.args[0] or expo is not node.args[1]:
            node = Node("pow", (base, expo))
        if not base_var and not expo_var:
            return (const(), False, True) if base_const or expo_const else (node, False, False)
        return node, True, False
    kids = [_tidy(a) for a in node.args]
    if any(k[0] is not a for k, a in zip(kids, node.args)):  # else the node is its own tidy form
        node = Node(op, tuple([k[0] for k in kids]), node.value, node.name)
    if not any(k[1] for k in kids):
        # A var-free subtree with a free constant in it is just a free constant.
        return (const(), False, True) if any(k[2] for k in kids) else (node, False, False)
    return _tidy_with_var(node), True, False


def _tidy_with_var(node: Node) -> Node:
    """The merges of :func:`tidy` at a node with a variable whose children are tidy."""
    if node.op == "neg" and node.args[0].op == "neg":
        return node.args[0].args[0]
    if node.op in ("mul", "div"):
        factors: list[tuple[Node, bool]] = []
        _factors(node, False, factors)
        consts = [f for f, _ in factors if f.op == "const"]
        if len(consts) > 1 or (consts and any(f.op == "num" for f, _ in factors)):
            rest = [(f, inv) for f, inv in factors if not _is_leaf_number(f)]
            return _rebuild_product([(const(), False)] + rest)
        # One scale per product: its constant, or else its first sum whose every term has a
        # constant of its own; every other such sum loses one (``c*(c0*x + c1)`` is
        # ``c*(x + c1)``, ``(c0*x + c1)*(c2*y + c3)`` is ``(c0*x + c1)*(y + c2)``).
        monic = [(_monic(f) or f, inv) for f, inv in factors]
        changed = [i for i, ((m, _), (f, _)) in enumerate(zip(monic, factors, strict=True)) if m is not f]
        if changed and not consts:
            monic[changed[0]] = factors[changed[0]]
            changed = changed[1:]
        if changed:
            return _rebuild_product(monic)
        return node
    if node.op in ("add", "sub"):
        terms: list[tuple[Node, bool]] = []
        _terms(node, False, terms)
        consts = [t for t, _ in terms if t.op == "const"]
        if len(consts) > 1 or (consts and any(t.op == "num" for t, _ in terms)):
            rest = [(t, neg) for t, neg in terms if not _is_leaf_number(t)]
            return signed_sum(rest + [(const(), False)])
        return node
    return node


def name_constants(node: Node, prefix: str = "c") -> Node:
    """``node`` with its anonymous constants named ``{prefix}0, {prefix}1, ...`` in reading
    order, the names :func:`render` gives them."""
    counter = iter(range(1 << 30))

    def go(n: Node) -> Node:
        if n.op == "const":
            return Node("const", name=f"{prefix}{next(counter)}")
        if not n.args:
            return n
        return Node(n.op, tuple(go(a) for a in n.args), n.value, n.name)

    return go(node)


def with_constant_values(node: Node, fitted: Mapping[str, float]) -> Node:
    """``node`` with each named constant carrying its fitted value (``Node.value``), so the
    value travels with the constant through crossover and mutation (Lamarckian inheritance);
    :func:`render` and the canonical form ignore it. Names ``fitted`` lacks stay valueless."""

    def go(n: Node) -> Node:
        if n.op == "const":
            value = fitted.get(n.name or "")
            return n if value is None else Node("const", value=float(value), name=n.name)
        if not n.args:
            return n
        return Node(n.op, tuple(go(a) for a in n.args), n.value, n.name)

    return go(node)


def constant_values(node: Node) -> list[float | None]:
    """The values the constants carry (:func:`with_constant_values`), in reading order (the
    order in which :func:`render` names them); ``None`` for a constant with none."""
    return [n.value for _, n in walk(node) if n.op == "const"]


def values(node: Node, names: Sequence[str], X: np.ndarray, constants: Sequence[float] = ()) -> np.ndarray:
    """Values of a search tree at the rows of ``X`` (columns ``names``), its free constants
    taking ``constants`` in reading order: :func:`sr_dist.formula.evaluate_numpy` on the named tree."""
    named = name_constants(node)
    return evaluate_numpy(named, X, names, {f"c{i}": float(v) for i, v in enumerate(constants)})
