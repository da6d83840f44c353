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

For problems of at most ``library.curve_linear_max_variables`` variables (4) each curve also
stands beside a linear model of every variable outside it (:func:`beside_linear_model`):
``a*S(u) + b*v + c*w``, and ``a*v*S(u) + c*w``. A law often adds more than one linear trend to
its bend, and the genetic search rarely grows a second term onto a curve whose inner constants
were fitted without it.

On by default for problems of at most ``library.curve_max_variables`` variables (10); leaving
``curves`` out of ``model.library.sources`` turns it off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.blocks import times_const
from sr_dist.sr.evolve.tree import binary, const, num, total, unary, var

__all__ = ["CURVES", "beside_linear_model", "curve_seeds"]


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


def beside_linear_model(shape: Node, outside: Sequence[Node], times: bool = True) -> list[Node]:
    """``a*S + sum(b_k*x_k)`` over every variable ``x_k`` outside the curve and, with ``times``,
    each ``a*x_j*S + sum(b_k*x_k)`` over the others. None with fewer than two outside: the
    one-term forms already cover those."""
    if len(outside) < 2:
        return []
    out = [total([times_const(shape), *(times_const(x) for x in outside)])]
    if times:
        for j, x in enumerate(outside):
            rest = [times_const(o) for i, o in enumerate(outside) if i != j]
            out.append(total([times_const(binary("mul", x, shape)), *rest]))
    return out


def curve_seeds(variables: Sequence[str], linear_model: bool = False) -> list[Node]:
    """Every curve in every variable: with an offset, times each other variable, and beside a
    linear term in each other variable; with ``linear_model``, then each beside a linear model
    of all the others (after every one-term form, so those keep their places)."""
    out: list[Node] = []
    for name in variables:
        others = [var(v) for v in variables if v != name]
        for curve in CURVES.values():
            shape = curve(var(name))
            out.append(binary("add", times_const(shape), const()))
            out += [times_const(binary("mul", other, shape)) for other in others]
            out += [binary("add", times_const(shape), times_const(other)) for other in others]
    if linear_model:
        for name in variables:
            others = [var(v) for v in variables if v != name]
            for curve in CURVES.values():
                out += beside_linear_model(curve(var(name)), others)
    return out
