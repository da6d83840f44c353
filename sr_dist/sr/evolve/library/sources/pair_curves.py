"""Source: the classic curves of :mod:`.curves` taken of a product or a ratio of two variables.

Many laws bend in a combination of variables rather than in one: a saturation ``tanh(k*u*v)``,
an Arrhenius or Boltzmann factor ``exp(-k*u/v)``, a decay ``exp(-k*u*v)``, a logistic step in a
ratio. The ``curves`` source writes each curve of one variable; this one writes each curve of
:data:`~sr_dist.sr.evolve.library.sources.curves.CURVES` of ``u*v`` (each pair once) and of
``u/v`` (each ordered pair), with an offset (``a*S(w) + b``), beside a linear term in a
variable outside the pair (``a*S(w) + b*x``) and times one (``a*x*S(w)``). As there, the outer
constants enter linearly and the inner ones are the fit's restarts' to find; and for problems of
at most ``library.curve_linear_max_variables`` variables each curve also stands beside a linear
model of every variable outside the pair (``a*S(w) + b*x + c*y``; not times one of them, which
would add twice as many entries again).

On by default for problems of at most ``library.pair_curve_max_variables`` variables (4);
leaving ``pair_curves`` out of ``model.library.sources`` turns it off. Why the cap: the source has
``3*n*(n - 1)/2`` arguments, each with ``2n - 3`` forms of every curve, so 540 entries for 4
variables and 4,158 for 7.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, permutations

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.blocks import times_const
from sr_dist.sr.evolve.library.sources.curves import CURVES, beside_linear_model
from sr_dist.sr.evolve.tree import binary, const, var

__all__ = ["pair_arguments", "pair_curve_seeds"]


def pair_arguments(variables: Sequence[str]) -> list[tuple[Node, tuple[str, str]]]:
    """Each product ``u*v`` (each pair once) and ratio ``u/v`` (each ordered pair), with the two
    variables it uses."""
    products = [(binary("mul", var(u), var(v)), (u, v)) for u, v in combinations(variables, 2)]
    ratios = [(binary("div", var(u), var(v)), (u, v)) for u, v in permutations(variables, 2)]
    return products + ratios


def pair_curve_seeds(variables: Sequence[str], linear_model: bool = False) -> list[Node]:
    """Every curve of every pair's product and ratio: with an offset, beside a linear term in
    each variable outside the pair, and times each such variable; with ``linear_model``, then
    each beside a linear model of all the variables outside the pair."""
    out: list[Node] = []
    for argument, pair in pair_arguments(variables):
        others = [var(v) for v in variables if v not in pair]
        for curve in CURVES.values():
            shape = curve(argument)
            out.append(binary("add", times_const(shape), const()))
            out += [binary("add", times_const(shape), times_const(other)) for other in others]
            out += [times_const(binary("mul", other, shape)) for other in others]
    if linear_model:
        for argument, pair in pair_arguments(variables):
            others = [var(v) for v in variables if v not in pair]
            for curve in CURVES.values():
                out += beside_linear_model(curve(argument), others, times=False)
    return out
