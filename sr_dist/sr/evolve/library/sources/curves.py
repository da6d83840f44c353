"""Source: classic curves whose fitted constants sit inside their functions (issue 32, item 5).

A logistic step has a slope and a midpoint, a Gaussian bump a width and a centre, a sinusoid a
frequency and a phase, a damped sinusoid a rate besides, an exponential approach a rate. Sparse
sums cannot hold these (a basis function's inner constants are fixed), and the genetic search
rarely assembles them, so this source proposes them outright, as curve-fitting libraries list
their built-in models (lmfit's step, Gaussian, sine, damped-oscillator and exponential models):
each curve of :data:`CURVES` in each variable ``u``, with an offset (``a*S(u) + b``), times another
variable (``a*v*S(u)``) and beside a linear term in another (``a*S(u) + b*v``). The outer
constants enter linearly (the evaluator solves them exactly); the inner ones are what the fit's
restarts, and ``evaluator.data_starts``, must find.

On by default for problems of at most ``library.curve_max_variables`` variables (10); leaving
``curves`` out of ``model.library.sources`` turns it off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.blocks import times_const
from sr_dist.sr.evolve.tree import binary, const, num, unary, var

__all__ = ["CURVES", "curve_seeds"]


def _shifted(u: Node) -> Node:
    """``c*(u - c)``: a slope (or width) and a midpoint (or centre)."""
    return times_const(binary("sub", u, const()))


#: The curves of one variable, by name: each a tree with its inner constants free.
CURVES: dict[str, Callable[[Node], Node]] = {
    "logistic": lambda u: binary("div", num(1.0), binary("add", num(1.0), unary("exp", _shifted(u)))),
    "gaussian": lambda u: unary("exp", unary("neg", times_const(binary("pow", binary("sub", u, const()), num(2.0))))),
    "sinusoid": lambda u: unary("sin", binary("add", times_const(u), const())),
    "damped_sinusoid": lambda u: binary("mul", unary("exp", unary("neg", times_const(u))),
                                        unary("sin", binary("add", times_const(u), const()))),
    "approach": lambda u: binary("sub", num(1.0), unary("exp", unary("neg", times_const(u)))),
    "saturation": lambda u: unary("tanh", times_const(u)),
}


def curve_seeds(variables: Sequence[str]) -> list[Node]:
    """Every curve in every variable: with an offset, times each other variable, and beside a
    linear term in each other variable."""
    out: list[Node] = []
    for name in variables:
        others = [var(v) for v in variables if v != name]
        for curve in CURVES.values():
            shape = curve(var(name))
            out.append(binary("add", times_const(shape), const()))
            out += [times_const(binary("mul", other, shape)) for other in others]
            out += [binary("add", times_const(shape), times_const(other)) for other in others]
    return out
