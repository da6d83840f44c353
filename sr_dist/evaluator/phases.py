"""Phases reduced to one turn: ``sin(f*x + 82.58)`` is ``sin(f*x + 0.90)``.

A multi-start fit of a sinusoid's phase converges to whichever copy of it lies nearest the
start, and random starts span decades, so a fitted phase is often many whole turns away from
the one a person would write. The law is the same, but the answer reads worse, its float32
values lose digits to the large argument, and a judge that reads constants as numbers does
not see the law. A constant that is a term of the argument of ``sin`` or ``cos`` (and appears
nowhere else) is therefore moved by whole turns into ``[-pi, pi]`` after the fit; every value
of the formula is unchanged up to rounding.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from sr_dist.formula import Node, iter_nodes

__all__ = ["phase_constants", "wrap_phases"]

_PERIODIC = frozenset({"sin", "cos"})


def _terms(node: Node) -> list[Node]:
    """The terms of a sum or difference (signs dropped: a whole turn either way is one)."""
    if node.op in ("add", "sub"):
        return [t for arg in node.args for t in _terms(arg)]
    if node.op == "neg":
        return _terms(node.args[0])
    return [node]


def phase_constants(tree: Node) -> frozenset[str]:
    """Names of the constants that are a term of the argument of ``sin``/``cos`` and occur
    once in ``tree``."""
    nodes = list(iter_nodes(tree))
    uses = Counter(str(n.name) for n in nodes if n.op == "const")
    found = {str(t.name) for n in nodes if n.op in _PERIODIC for t in _terms(n.args[0])
             if t.op == "const"}
    return frozenset(name for name in found if uses[name] == 1)


def wrap_phases(tree: Node, names: Sequence[str], values: Sequence[float]) -> tuple[float, ...] | None:
    """``values`` (constants in ``names``' order) with every phase constant of ``tree`` moved
    by whole turns into ``[-pi, pi]``; None when none moves."""
    phases = phase_constants(tree)
    if not phases:
        return None
    out = list(values)
    moved = False
    for j, name in enumerate(names):
        v = out[j]
        if name in phases and math.isfinite(v) and abs(v) > math.pi:
            out[j] = v - 2.0 * math.pi * round(v / (2.0 * math.pi))
            moved = True
    return tuple(out) if moved else None
