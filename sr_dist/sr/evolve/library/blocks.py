"""Small tree builders the seed sources share: powers, monomials, a free constant times a term."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sr_dist.formula import Node
from sr_dist.sr.evolve.tree import binary, const, num, product, unary, var

__all__ = ["monomial", "power_of", "times_const"]


def power_of(name: str, exponent: float) -> Node | None:
    x = var(name)
    if exponent == 0:
        return None
    if exponent == 1:
        return x
    if exponent == 0.5:
        return unary("sqrt", x)
    return binary("pow", x, num(exponent))


def monomial(exponents: Mapping[str, float], skip: Sequence[str] = (), with_const: bool = True) -> Node:
    """``c * prod(x**a)`` with the negative powers written as a quotient."""
    top: list[Node] = [const()] if with_const else []
    bottom: list[Node] = []
    for name in sorted(exponents):
        if name in skip:
            continue
        a = exponents[name]
        if a > 0:
            p = power_of(name, a)
            if p is not None:
                top.append(p)
        elif a < 0:
            p = power_of(name, -a)
            if p is not None:
                bottom.append(p)
    out = product(top) if top else num(1.0)
    return binary("div", out, product(bottom)) if bottom else out


def times_const(x: Node) -> Node:
    return binary("mul", const(), x)
