"""Source: structures that need no data (monomials, products, ratios, sums with free constants)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.blocks import times_const
from sr_dist.sr.evolve.library.shapes import SIMPLE_ONE_VAR_SHAPES
from sr_dist.sr.evolve.tree import binary, const, num, product, total, unary, var

__all__ = ["data_free_seeds"]


def data_free_seeds(variables: Sequence[str]) -> list[Node]:
    xs = [var(v) for v in variables]
    out: list[Node] = [times_const(x) for x in xs]
    out += [binary("add", times_const(x), const()) for x in xs]
    for a, b in itertools.combinations(xs, 2):
        out += [
            times_const(binary("mul", a, b)),
            times_const(binary("div", a, b)),
            times_const(binary("div", b, a)),
            binary("add", times_const(a), times_const(b)),
        ]
    if len(xs) > 1:
        out.append(times_const(product(xs)))
        if len(xs) <= 7:
            out.append(total([times_const(x) for x in xs] + [const()]))
    for x in xs:
        out += [times_const(binary("pow", x, num(2.0))), times_const(binary("div", num(1.0), x)), times_const(unary("sqrt", x))]
        out += [binary("mul", const(), shape(x)) for shape in SIMPLE_ONE_VAR_SHAPES]
    return out
