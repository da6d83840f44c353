"""Source: products of two sinusoids in two variables, ``a*sin(b*u + c)*sin(d*v + e)``.

A wave modulated by another (beats, a standing wave ``sin(k*x)*cos(w*t)``, an interference
pattern) is a product of oscillations in two variables. Neither ``curves`` nor ``pair_curves``
writes one (they bend one variable, or one product of two), and the genetic search rarely
assembles two sinusoids with four inner constants right. This source writes the product for
each pair of variables (``cos`` is a ``sin`` a quarter turn on, so one form covers both): with
an offset (``a*S + b``), beside a linear term in each variable outside the pair
(``a*S + b*x``), and, for problems of at most ``library.curve_linear_max_variables``
variables, beside a linear model of every variable outside the pair. The amplitude and the
linear terms enter linearly; the frequencies and phases are the fit's to find, and
``evaluator.data_starts`` starts the frequencies of such a product from the periodogram of the
squared residual (:mod:`sr_dist.evaluator.data_starts`): a marginal periodogram has no peak
for it.

On by default for problems of at most ``library.sinusoid_product_max_variables`` variables
(4); leaving ``sinusoid_products`` out of ``model.library.sources`` turns it off. Entries:
``n*(n - 1)/2`` pairs, each with ``n - 1`` one-term forms (and one more beside the linear
model when two or more variables are outside the pair): 1 for 2 variables, 6 for 3, 24 for 4.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.blocks import times_const
from sr_dist.sr.evolve.library.sources.curves import CURVES, beside_linear_model
from sr_dist.sr.evolve.tree import binary, const, var

__all__ = ["sinusoid_product", "sinusoid_product_seeds"]


def sinusoid_product(u: str, v: str) -> Node:
    """``sin(c*u + c)*sin(c*v + c)``: two frequencies and two phases, all free."""
    return binary("mul", CURVES["sinusoid"](var(u)), CURVES["sinusoid"](var(v)))


def sinusoid_product_seeds(variables: Sequence[str], linear_model: bool = False) -> list[Node]:
    """For each pair of variables, the product with an offset and beside a linear term in each
    variable outside the pair; with ``linear_model``, then each beside a linear model of all
    the variables outside the pair."""
    out: list[Node] = []
    for u, v in combinations(variables, 2):
        shape = sinusoid_product(u, v)
        others = [var(x) for x in variables if x not in (u, v)]
        out.append(binary("add", times_const(shape), const()))
        out += [binary("add", times_const(shape), times_const(other)) for other in others]
    if linear_model:
        for u, v in combinations(variables, 2):
            others = [var(x) for x in variables if x not in (u, v)]
            out += beside_linear_model(sinusoid_product(u, v), others, times=False)
    return out
