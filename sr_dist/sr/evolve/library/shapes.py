"""Catalogs of shapes that multiply a power law: of one variable, of two, of a dimensionless group.

Each catalog is ordered (the library tries them in this order). The one-variable catalog
starts with ``SIMPLE_ONE_VAR_SHAPES`` (periodic and exponential), the only ones the data-free
seeds also use.
"""

from __future__ import annotations

from collections.abc import Callable

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.blocks import times_const
from sr_dist.sr.evolve.tree import binary, const, num, unary

__all__ = ["GROUP_SHAPES", "ONE_VAR_SHAPES", "SIMPLE_ONE_VAR_SHAPES", "TWO_VAR_SHAPES"]


#: The periodic and exponential shapes of one variable: the data-free seeds use these alone.
SIMPLE_ONE_VAR_SHAPES: tuple[Callable[[Node], Node], ...] = (
    lambda x: unary("sin", x),
    lambda x: unary("cos", x),
    lambda x: unary("sin", times_const(x)),
    lambda x: unary("cos", times_const(x)),
    lambda x: unary("exp", times_const(x)),
    lambda x: unary("exp", unary("neg", times_const(x))),
)

#: Shapes of one variable that multiply a power law (a free constant scales the whole).
ONE_VAR_SHAPES: tuple[Callable[[Node], Node], ...] = SIMPLE_ONE_VAR_SHAPES + (
    lambda x: unary("exp", times_const(binary("pow", x, num(2.0)))),
    lambda x: unary("exp", unary("neg", times_const(binary("pow", x, num(2.0))))),
    lambda x: binary("mul", unary("sin", x), unary("cos", x)),
    lambda x: binary("pow", unary("sin", x), num(2.0)),
    lambda x: binary("pow", unary("cos", x), num(2.0)),
    lambda x: binary("add", x, const()),
    lambda x: binary("div", num(1.0), binary("add", x, const())),
    lambda x: binary("add", binary("pow", x, num(2.0)), const()),
    lambda x: unary("log", x),
    lambda x: unary("tanh", times_const(x)),
    lambda x: binary("add", unary("cos", x), const()),
    lambda x: binary("div", num(1.0), binary("sub", unary("exp", times_const(x)), num(1.0))),
    lambda x: unary("arcsin", times_const(x)),
    lambda x: binary("add", unary("exp", times_const(x)), unary("exp", unary("neg", times_const(x)))),
    lambda x: unary("sqrt", binary("add", const(), binary("pow", x, num(2.0)))),
    lambda x: binary("pow", binary("add", const(), binary("pow", x, num(2.0))), num(-0.5)),
)


#: Shapes of two variables (ratios, differences, sums) that multiply a power law.
TWO_VAR_SHAPES: tuple[Callable[[Node, Node], Node], ...] = (
    lambda x, y: binary("pow", binary("add", const(), binary("pow", binary("div", x, y), num(2.0))), num(-0.5)),
    lambda x, y: unary("sqrt", binary("add", const(), binary("pow", binary("div", x, y), num(2.0)))),
    lambda x, y: binary("div", num(1.0), binary("add", const(), binary("div", x, y))),
    lambda x, y: binary("add", const(), binary("div", x, y)),
    lambda x, y: binary("add", x, times_const(y)),
    lambda x, y: binary("div", num(1.0), binary("add", x, times_const(y))),
    lambda x, y: binary("pow", binary("sub", x, y), num(2.0)),
    lambda x, y: binary("sub", x, y),
    lambda x, y: binary("add", binary("pow", x, num(2.0)), times_const(binary("pow", y, num(2.0)))),
    lambda x, y: binary("div", num(1.0), binary("add", binary("pow", x, num(2.0)), times_const(binary("pow", y, num(2.0))))),
    lambda x, y: unary("exp", times_const(binary("div", x, y))),
    lambda x, y: unary("sin", times_const(binary("mul", x, y))),
    lambda x, y: unary("cos", times_const(binary("mul", x, y))),
    lambda x, y: unary("sin", binary("sub", x, y)),
    lambda x, y: unary("cos", binary("sub", x, y)),
    lambda x, y: binary("div", num(1.0), binary("sub", unary("exp", times_const(binary("div", x, y))), num(1.0))),
    lambda x, y: binary("mul", x, unary("sin", y)),
    lambda x, y: binary("mul", x, unary("cos", y)),
    lambda x, y: binary("add", const(), binary("mul", x, unary("cos", y))),
    lambda x, y: unary("tanh", times_const(binary("div", x, y))),
)


#: Shapes of a dimensionless group ``a`` (a product of variables): ``tanh(c*a)``, ``exp(-c*a)``...
GROUP_SHAPES: tuple[Callable[[Node], Node], ...] = (
    lambda a: unary("exp", unary("neg", times_const(a))),
    lambda a: unary("tanh", times_const(a)),
    lambda a: binary("pow", unary("sin", times_const(a)), num(2.0)),
    lambda a: unary("sin", times_const(a)),
    lambda a: unary("cos", times_const(a)),
    lambda a: binary("div", num(1.0), binary("sub", unary("exp", times_const(a)), num(1.0))),
    lambda a: binary("sub", unary("exp", times_const(a)), num(1.0)),
    lambda a: binary("div", num(1.0), binary("add", unary("exp", times_const(a)), unary("exp", unary("neg", times_const(a))))),
    lambda a: binary("add", const(), unary("cos", times_const(a))),
    lambda a: binary("div", num(1.0), binary("add", const(), a)),
    lambda a: binary("add", const(), a),
    lambda a: unary("sqrt", binary("add", const(), a)),
    lambda a: binary("pow", binary("add", const(), binary("pow", a, num(2.0))), num(-0.5)),
    lambda a: unary("arcsin", times_const(a)),
    lambda a: unary("exp", unary("neg", times_const(binary("pow", a, num(2.0))))),
    lambda a: unary("log", times_const(a)),
)
