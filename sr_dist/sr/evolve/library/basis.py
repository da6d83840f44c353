"""The basis of terms the sparse sums are drawn from, in tiers.

Each variable contributes the unit shapes of :data:`UNIT_SHAPES` (powers, periodic and
exponential shapes, their products); pairs and triples of variables contribute products of
them. Which shapes enter which products is said by each shape's tags, never by its position in
the catalog, so a new shape goes where its tags put it. A term's tier is its number of factors for the core products and ``WIDE`` or
``HALF`` for the wider ones; the pursuit runs on each tier and those below it in turn, so a
larger basis adds models without letting its proxies crowd out the simple ones.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.tree import binary, num, unary, var
from sr_dist.sr.structure.sample import Sample

__all__ = ["HALF", "UNIT_SHAPES", "WIDE", "WIDE_TRIPLE_ORDER", "Basis", "UnitShape", "build_basis", "unit_terms"]


@dataclass(frozen=True)
class UnitShape:
    """A shape of one variable: its name, its tree and values as functions of the variable's,
    and its tags, which say where it enters the basis:

    - ``core``: in the products of two shapes of one variable (``sqrt(x)*sin(x)``);
    - ``power``: a power of the variable (two powers never make such a product: ``x*x**2`` is
      a unit shape);
    - ``pair``: in the core products of two variables (and beside the shapes of one variable);
    - ``triple``: in the core products of three variables;
    - ``half``: a half-integer power past sqrt, whose pairs are a tier of their own (``HALF``).
    """

    name: str
    tree: Callable[[Node], Node]
    values: Callable[[np.ndarray], np.ndarray]
    tags: frozenset[str]


def _shape(name: str, tree: Callable[[Node], Node], values: Callable[[np.ndarray], np.ndarray],
           *tags: str) -> UnitShape:
    return UnitShape(name, tree, values, frozenset(tags))


#: The shapes of one variable, in the order the basis lists them.
UNIT_SHAPES: tuple[UnitShape, ...] = (
    _shape("x", lambda x: x, lambda v: v, "core", "power", "pair", "triple"),
    _shape("square", lambda x: binary("pow", x, num(2.0)), lambda v: v**2, "core", "power", "pair", "triple"),
    _shape("cube", lambda x: binary("pow", x, num(3.0)), lambda v: v**3, "core", "power", "pair", "triple"),
    _shape("inverse", lambda x: binary("div", num(1.0), x), lambda v: 1 / v, "core", "power", "pair", "triple"),
    _shape("inverse_square", lambda x: binary("pow", x, num(-2.0)), lambda v: v**-2.0, "core", "power", "pair"),
    _shape("sqrt", lambda x: unary("sqrt", x), lambda v: np.sqrt(np.abs(v)), "core", "power", "pair"),
    _shape("sin", lambda x: unary("sin", x), np.sin, "core", "pair", "triple"),
    _shape("cos", lambda x: unary("cos", x), np.cos, "core", "pair", "triple"),
    _shape("exp", lambda x: unary("exp", x), np.exp, "core"),
    _shape("log", lambda x: unary("log", x), lambda v: np.log(np.abs(v)), "core"),
    _shape("sin_cos", lambda x: binary("mul", unary("sin", x), unary("cos", x)), lambda v: np.sin(v) * np.cos(v)),
    _shape("sin_square", lambda x: binary("pow", unary("sin", x), num(2.0)), lambda v: np.sin(v) ** 2),
    _shape("x_sin", lambda x: binary("mul", x, unary("sin", x)), lambda v: v * np.sin(v)),
    _shape("x_cos", lambda x: binary("mul", x, unary("cos", x)), lambda v: v * np.cos(v)),
    _shape("exp_neg", lambda x: unary("exp", unary("neg", x)), lambda v: np.exp(-v)),
    _shape("gauss", lambda x: unary("exp", unary("neg", binary("pow", x, num(2.0)))), lambda v: np.exp(-(v**2))),
    # Half-integer powers past sqrt (``x1/(x1 - x0**1.5)``, ``sin(x2)/sqrt(x1)``): last, so
    # the core products above do not grow.
    _shape("power_1.5", lambda x: binary("pow", x, num(1.5)), lambda v: np.abs(v) ** 1.5, "half"),
    _shape("power_-0.5", lambda x: binary("pow", x, num(-0.5)), lambda v: np.abs(v) ** -0.5, "half"),
)
#: The shapes the wider triples add, in the order they are given room as the basis allows.
WIDE_TRIPLE_ORDER = ("exp", "sqrt", "inverse_square")
#: The shape whose square multiplies the variable in the one-variable products (``x*log(x)**2``).
SQUARED_SHAPE = "log"


def unit_terms(name: str) -> list[tuple[Node, Callable[[np.ndarray], np.ndarray]]]:
    """``(tree, values)`` of each unit shape of the variable ``name``, in catalog order."""
    x = var(name)
    return [(shape.tree(x), shape.values) for shape in UNIT_SHAPES]


@dataclass(frozen=True)
class Basis:
    """Candidate terms for sparse sums, their standardised values, and their order (factors)."""

    terms: tuple[Node, ...]
    V: np.ndarray
    Z: np.ndarray
    order: np.ndarray


#: Term tiers (``Basis.order``): one factor, core products of two, core products of three, and
#: the wider products (two shapes of one variable, every shape in a pair over few variables,
#: exp/sqrt/x**-2 in triples). The pursuit runs on each tier and those below it in turn, so a
#: larger basis adds models without letting its proxies crowd out the simple ones.
WIDE = 4
#: The last tier: pairs with a half-integer power past sqrt (``x0**1.5/x1``), apart from the
#: wide tier so that they do not crowd its first terms (``sqrt(x0)*sqrt(x1)*cos(x2)``).
HALF = 5


def _tagged(tag: str) -> list[int]:
    return [k for k, shape in enumerate(UNIT_SHAPES) if tag in shape.tags]


def _named(name: str) -> int:
    return next(k for k, shape in enumerate(UNIT_SHAPES) if shape.name == name)


def build_basis(sample: Sample, names: Sequence[str], columns: Sequence[int], max_terms: int,
                shape_products: bool = False) -> Basis | None:
    """The basis over the columns ``names`` of the sample, at most ``max_terms`` terms (the
    wider tiers are cut first); None when no term varies. ``shape_products`` adds, for one or
    two variables, products of two shapes of one variable times a shape of the other (the whole
    problem's basis, not the decomposition's small parts)."""
    pair_shapes, triple_shapes, core = _tagged("pair"), _tagged("triple"), _tagged("core")
    powers, halves = set(_tagged("power")), set(_tagged("half"))
    squared = _named(SQUARED_SHAPE)
    units: list[list[tuple[Node, np.ndarray]]] = []
    with np.errstate(all="ignore"):
        for name, j in zip(names, columns):
            col = sample.X[:, j]
            units.append([(t, f(col)) for t, f in unit_terms(name)])
        out: list[tuple[Node, np.ndarray, int]] = [(t, v, 1) for group in units for t, v in group]
        pairs = list(itertools.combinations(range(len(units)), 2))
        triples = list(itertools.combinations(range(len(units)), 3)) if len(units) <= 5 else []

        def mul(*factors: tuple[Node, np.ndarray]) -> tuple[Node, np.ndarray]:
            node, value = factors[0]
            for t, v in factors[1:]:
                node, value = binary("mul", node, t), value * v
            return node, value

        def shape_pairs(group: list[tuple[Node, np.ndarray]]) -> list[tuple[tuple[Node, np.ndarray], tuple[Node, np.ndarray]]]:
            # Two core shapes of one variable, not two powers (``x*x**2`` is a unit shape).
            return [(group[i], group[j]) for i, j in itertools.combinations(core, 2) if j not in powers]

        for a, b in pairs:
            for i, j in itertools.product(pair_shapes, pair_shapes):
                out.append((*mul(units[a][i], units[b][j]), 2))
            # Differences: distances and phase differences are common in physics.
            xa, xb = var(names[a]), var(names[b])
            da = sample.X[:, columns[a]] - sample.X[:, columns[b]]
            out.append((binary("pow", binary("sub", xa, xb), num(2.0)), da**2, 2))
            out.append((unary("cos", binary("sub", xa, xb)), np.cos(da), 2))
        for a, b, c in triples:
            for i, j, k in itertools.product(triple_shapes, triple_shapes, triple_shapes):
                out.append((*mul(units[a][i], units[b][j], units[c][k]), 3))
        # The wider tier, after the core terms so that ``max_terms`` cuts it first.
        if len(units) == 1:
            # One variable: shapes of a shape (``cos(sqrt(x))``, ``sin(x**2)``), nested as
            # random formulas and some laws nest them; a basis this small has room.
            x, col = var(names[0]), sample.X[:, columns[0]]
            for inner, inner_v in ((unary("sqrt", x), np.sqrt(np.abs(col))), (binary("pow", x, num(2.0)), col**2),
                                   (binary("div", num(1.0), x), 1 / col)):
                for outer_op, outer_f in (("sin", np.sin), ("cos", np.cos), ("exp", np.exp)):
                    out.append((unary(outer_op, inner), outer_f(inner_v), WIDE))
        if len(units) <= 3:
            # Products of two shapes of one variable (``sqrt(x)*sin(x)``, ``x*log(x)**2``,
            # ``cos(x2)*exp(x2)``).
            for group in units:
                for first, second in shape_pairs(group):
                    out.append((*mul(first, second), WIDE))
                squared_term = (binary("pow", group[squared][0], num(2.0)), group[squared][1] ** 2)
                out.append((*mul(group[_named("x")], squared_term), WIDE))
            # ... and, for the whole problem, those times a shape of the other variable
            # (``x1*log(x1)/x0``; 480 terms, too many for the decomposition's small parts).
            for a, b in itertools.permutations(range(len(units)), 2) if shape_products and len(units) <= 2 else ():
                for first, second in shape_pairs(units[a]):
                    out.extend((*mul(first, second, units[b][k]), WIDE) for k in pair_shapes)
        if len(units) <= 3:
            # Every shape of each variable in a pair (``x0 * x2*sin(x2)``) beyond the core pairs.
            for a, b in pairs:
                for i, j in itertools.product(range(len(units[a])), range(len(units[b]))):
                    if i not in pair_shapes or j not in pair_shapes:
                        tier = HALF if i in halves or j in halves else WIDE
                        out.append((*mul(units[a][i], units[b][j]), tier))
        # exp, sqrt and x**-2 in triples as far as the basis has room for them
        # (``x0/x2*exp(x3)``, ``sqrt(I1)*sqrt(I2)*cos(delta)``).
        wide = [_named(name) for name in WIDE_TRIPLE_ORDER]
        n_core = len(triple_shapes)
        while wide and len(out) + len(triples) * ((n_core + len(wide)) ** 3 - n_core**3) > max_terms:
            wide.pop()
        shapes = (*triple_shapes, *wide)
        for a, b, c in triples if wide else []:
            for i, j, k in itertools.product(shapes, shapes, shapes):
                if i in wide or j in wide or k in wide:
                    out.append((*mul(units[a][i], units[b][j], units[c][k]), WIDE))
    kept = [(t, v, o) for t, v, o in out[:max_terms] if np.all(np.isfinite(v)) and np.std(v) > 0]
    if not kept:
        return None
    V = np.column_stack([v for _, v, _ in kept])
    Z = (V - V.mean(axis=0)) / V.std(axis=0)
    return Basis(tuple(t for t, _, _ in kept), V, Z, np.array([o for _, _, o in kept]))
