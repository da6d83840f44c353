"""Rendering the evolve search's trees as text in the formula language, and the tree the formula
parser reads back from that text (:func:`render_as_parsed`, for keying without a parse).

Free constants inside the search are anonymous (``const`` nodes); :func:`render` names them
``c0, c1, ...`` in reading order, so two trees that differ only in constant names render to the
same text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sr_dist.formula import Node

__all__ = ["Rendered", "render", "render_as_parsed"]

_PREC = {"add": 1, "sub": 1, "mul": 2, "div": 2, "neg": 3, "pow": 4}
_SYMBOL = {"add": " + ", "sub": " - ", "mul": "*", "div": "/", "pow": "**"}
_ATOM = 5


def _format_number(value: float) -> str:
    if value == math.pi:
        return "pi"
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _parentheses(op: str, left_prec: int, right_prec: int, right_is_neg: bool) -> tuple[bool, bool]:
    """Whether :func:`render` wraps a binary node's left and right operands in parentheses."""
    own = _PREC[op]
    if op == "pow":
        left_paren, right_paren = left_prec <= own, right_prec < _ATOM
    else:
        # add and mul are associative: a*(b*c) may print as a*b*c (render_as_parsed says how
        # the parser then reads it).
        left_paren = left_prec < own
        right_paren = right_prec < own if op in ("add", "mul") else right_prec <= own
    return left_paren, right_paren or right_is_neg


def _number_text(value: float) -> str:
    """A number's text: a negative one in parentheses, so it reads back as one atom."""
    text = _format_number(abs(value))
    return "(-" + text + ")" if value < 0 else text


def _negation_text(text: str, prec: int) -> str:
    return "-" + (f"({text})" if prec <= _PREC["neg"] else text)


def _binary_text(n: Node, left: str, left_prec: int, right: str, right_prec: int) -> str:
    left_paren, right_paren = _parentheses(n.op, left_prec, right_prec, n.args[1].op == "neg")
    return ((f"({left})" if left_paren else left) + _SYMBOL[n.op]
            + (f"({right})" if right_paren else right))


def render(node: Node, prefix: str = "c") -> str:
    """Text in the formula language; free constants become ``{prefix}0, {prefix}1, ...``."""
    counter = [0]

    def go(n: Node) -> tuple[str, int]:
        if n.op == "var":
            return n.name or "", _ATOM
        if n.op == "const":
            name = f"{prefix}{counter[0]}"
            counter[0] += 1
            return name, _ATOM
        if n.op == "num":
            return _number_text(float(n.value if n.value is not None else 0.0)), _ATOM
        if n.op == "neg":
            return _negation_text(*go(n.args[0])), _PREC["neg"]
        if n.op in _PREC:
            left, lp = go(n.args[0])
            right, rp = go(n.args[1])
            return _binary_text(n, left, lp, right, rp), _PREC[n.op]
        text, _ = go(n.args[0])
        return f"{n.op}({text})", _ATOM

    return go(node)[0]


@dataclass(frozen=True)
class Rendered:
    """:func:`render`'s text with what the formula parser makes of it (:func:`render_as_parsed`)."""

    text: str
    #: the tree ``parse_formula(text)`` builds
    tree: Node
    #: its constant names in order of first appearance, the variables it uses, its node count
    constants: tuple[str, ...]
    variables: frozenset[str]
    nodes: int
    #: the tree's depth (the parser's nesting depth is at most ``2 * depth + 1``)
    depth: int


#: The operators a chain printed without parentheses joins (a right operand of the same
#: precedence under ``add`` or ``mul``).
_CHAINS = {"add": ("add", "sub"), "mul": ("mul", "div")}


def render_as_parsed(node: Node, prefix: str = "c") -> Rendered | None:
    """:func:`render`'s text and the tree the formula parser reads back from it, in one walk:
    keying a bred tree needs its text's parse (for the canonical form), and building that tree
    here is cheaper than lexing and parsing the text (203 against 230 us a keyed tree, canonical
    form and memo included, on a recorded search's offspring).

    The parser's tree differs from ``node`` in two ways only: a chain printed without
    parentheses reads from the left (``a + (b - c)`` prints as ``a + b - c`` and reads as
    ``(a + b) - c``; ``a*(b/c)`` as ``(a*b)/c``), and a minus before a plain number is folded
    into it. None where the text would not read back as such a tree: a non-finite number.
    """
    constants: list[str] = []
    used: set[str] = set()

    def go(n: Node) -> tuple[str, int, Node, int, int]:  # text, precedence, tree, nodes, depth
        op = n.op
        if op == "var":
            name = n.name or ""
            used.add(name)
            return name, _ATOM, Node("var", name=name), 1, 1
        if op == "const":
            name = f"{prefix}{len(constants)}"
            constants.append(name)
            return name, _ATOM, Node("const", name=name), 1, 1
        if op == "num":
            value = float(n.value if n.value is not None else 0.0)
            if not math.isfinite(value):
                raise _NotReadBack
            text = _format_number(abs(value))
            tree = Node("num", (), math.pi, "pi") if text == "pi" else Node("num", (), float(text))
            if value < 0:
                tree = _negated(tree)
            return _number_text(value), _ATOM, tree, 1 + (tree.op == "neg"), 1
        if op == "neg":
            text, p, inner, count, d = go(n.args[0])
            tree = _negated(inner)
            return _negation_text(text, p), _PREC["neg"], tree, count + (tree.op == "neg"), d + 1
        if op in _PREC:
            left, lp, ltree, lcount, ld = go(n.args[0])
            right, rp, rtree, rcount, rd = go(n.args[1])
            _, right_paren = _parentheses(op, lp, rp, n.args[1].op == "neg")
            chain = _CHAINS.get(op, ())
            if not right_paren and rtree.op in chain:
                tree = _graft(op, ltree, rtree, chain)
            else:
                tree = Node(op, (ltree, rtree))
            return (_binary_text(n, left, lp, right, rp), _PREC[op], tree, lcount + rcount + 1,
                    max(ld, rd) + 1)
        text, _, inner, count, d = go(n.args[0])
        return f"{op}({text})", _ATOM, Node(op, (inner,)), count + 1, d + 1

    try:
        text, _, tree, count, depth_ = go(node)
    except _NotReadBack:
        return None
    return Rendered(text, tree, tuple(constants), frozenset(used), count, depth_)


class _NotReadBack(Exception):
    """A number whose text does not read back as that number."""


def _negated(tree: Node) -> Node:
    """The parser's reading of a minus before ``tree``: folded into a plain number."""
    if tree.op == "num" and tree.name is None:
        return Node("num", (), -(tree.value or 0.0))
    return Node("neg", (tree,))


def _graft(op: str, left: Node, chain: Node, group: tuple[str, ...]) -> Node:
    """``left op chain`` read from the left, ``chain`` being the parse of a chain of ``group``
    printed bare: ``left op`` joins the chain's first operand."""
    if chain.op in group:
        return Node(chain.op, (_graft(op, left, chain.args[0], group), chain.args[1]))
    return Node(op, (left, chain))
