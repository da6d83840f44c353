"""Seeds from dimensional analysis: Buckingham π groups and the prefactor that fixes the units.

With the units of the variables (columns of the exponent matrix ``D``) and of the target
(``u``), every dimensionally consistent law is ``y = x**p * g(π_1, ..., π_k)``: ``D p = u``
fixes the prefactor's units and the π groups, monomials whose exponent vectors span the
nullspace of ``D``, are dimensionless, so ``g`` may be any function of them. The prefactor is
chosen from that affine family by the data (the exponents closest to a log-log power-law fit,
rounded to halves); the π groups come from the reduced row echelon form of ``D`` (each group
has one of the free variables to the power 1), computed by the structure core
(:mod:`sr_dist.sr.structure.pi_groups`) as for the ``dimensional_groups`` tool. The seeds are
``c*prefactor``, the prefactor times shapes of each group, and the prefactor times sparse sums
and ratios over the groups, found by the same pursuit as the other data-driven seeds. Every
seed is dimensionally consistent by construction (constants dimensionless), and nothing here
looks at an equation's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from sr_dist.formula import Node
from sr_dist.formula.tree import replace_leaves
from sr_dist.sr.evolve.library.basis import build_basis
from sr_dist.sr.evolve.library.blocks import monomial, times_const
from sr_dist.sr.evolve.library.config import DEFAULT_LIBRARY, LibraryConfig
from sr_dist.sr.evolve.library.order import interleave
from sr_dist.sr.evolve.library.sources.decomposition import decomposition_seeds
from sr_dist.sr.evolve.library.sources.transformed_sums import transformed_sum_seeds
from sr_dist.sr.evolve.tree import binary, const, num, size, total, unary
from sr_dist.sr.structure.pi_groups import unit_basis
from sr_dist.sr.structure.power_law import power_law
from sr_dist.sr.structure.pursuit import best_additions, fit_error
from sr_dist.sr.structure.sample import Sample
from sr_dist.sr.structure.tolerances import NEAR, NEAR_EXACT

__all__ = ["DimensionalBasis", "dimensional_basis", "pi_library", "units_from_info"]

#: Most π groups given shapes of their own.
MAX_GROUPS = 4
#: Most π groups the sparse sums run over, and the most for the exhaustive ratio search (the
#: pursuit's cost grows fast with the groups: with more, only the shapes are seeded).
MAX_SPARSE_GROUPS = 4
MAX_RATIONAL_GROUPS = 3
#: Best (denominator, numerator) pairs of the ratio search that are refitted exactly.
RATIONAL_PAIRS = 24
#: Most terms in the basis of the ratio search over the π groups.
RATIONAL_BASIS = 400
#: Most loose (not near-exact) seeds over the π groups: they go last in the library.
MAX_LOOSE_SEEDS = 24


@dataclass(frozen=True)
class DimensionalBasis:
    """The prefactor's exponents (``D p = u``) and the π groups' exponents (nullspace of ``D``),
    by variable name."""

    particular: Mapping[str, Fraction]
    groups: tuple[Mapping[str, Fraction], ...]


def units_from_info(info: Mapping[str, Any], variables: Sequence[str]) -> tuple[dict[str, tuple[Fraction, ...]], tuple[Fraction, ...]] | None:
    """``info["units"]`` = ``{"variables": {name: exponents}, "target": exponents}`` (what
    ``problem_info`` shares), as exact fractions; None when absent or malformed."""
    raw = info.get("units") if isinstance(info, Mapping) else None
    if not isinstance(raw, Mapping):
        return None
    try:
        table = raw["variables"]
        units = {name: tuple(Fraction(v).limit_denominator(1000) for v in table[name]) for name in variables}
        target = tuple(Fraction(v).limit_denominator(1000) for v in raw["target"])
    except (KeyError, TypeError, ValueError):
        return None
    width = len(target)
    if width == 0 or any(len(u) != width for u in units.values()):
        return None
    return units, target


def dimensional_basis(variables: Sequence[str], units: Mapping[str, Sequence[Fraction]],
                      target: Sequence[Fraction]) -> DimensionalBasis | None:
    """The prefactor (pivot variables solved, free ones at 0) and the π groups of the structure
    core's :func:`~sr_dist.sr.structure.pi_groups.unit_basis` (the ones the
    ``dimensional_groups`` tool reports), by name; None when no product of powers of the
    variables has the target's units."""
    names = list(variables)
    basis = unit_basis([units[n] for n in names], target)
    if basis.particular is None:
        return None
    particular = {names[c]: basis.particular[c] for c in basis.pivots}
    # Each group: its free variable first, then the pivot variables in order (the order the
    # seeds' monomials are written in).
    groups = tuple({names[k]: g[k] for k in (j, *basis.pivots) if g[k] != 0}
                   for j, g in zip(basis.free, basis.groups, strict=True))
    return DimensionalBasis({k: v for k, v in particular.items() if v != 0}, groups)


def _shifted(plain: Mapping[str, Fraction], groups: Sequence[Mapping[str, Fraction]],
             weights: Sequence[Fraction], names: Sequence[str]) -> dict[str, Fraction]:
    """``plain`` times the groups to the powers ``weights`` (still the target's units)."""
    out = {}
    for name in names:
        value = plain.get(name, Fraction(0)) + sum(
            (w * g.get(name, Fraction(0)) for w, g in zip(weights, groups, strict=True)), Fraction(0))
        if value != 0:
            out[name] = value
    return out


def _prefactor(basis: DimensionalBasis, variables: Sequence[str], sample: Sample | None) -> list[dict[str, Fraction]]:
    """Prefactor exponents, distinct: the one nearest the data's log-log power law with the
    groups' powers rounded to halves, the plain one, the nearest with whole powers."""
    plain = dict(basis.particular)
    law = power_law(sample, variables) if sample is not None else None
    if law is None or not basis.groups:
        return [plain]
    names = list(variables)
    fitted = np.array([law.exponents.get(n, 0.0) for n in names])
    p0 = np.array([float(plain.get(n, 0)) for n in names])
    N = np.array([[float(g.get(n, 0)) for g in basis.groups] for n in names])
    weights, *_ = np.linalg.lstsq(N, fitted - p0, rcond=None)
    half = _shifted(plain, basis.groups, [Fraction(round(2 * float(w)), 2) for w in weights], names)
    whole = _shifted(plain, basis.groups, [Fraction(round(float(w))) for w in weights], names)
    out: list[dict[str, Fraction]] = []
    for p in (half, plain, whole):
        if p not in out:
            out.append(p)
    return out


def _rationals(sample: Sample, names: Sequence[str], max_rows: int = 256) -> list[Node]:
    """Near-exact ``(c + c*t1 [+ c*t2]) / (1 + c*s)`` over terms of the π groups (the linear
    problem ``z = a0 + a1*t1 + a2*t2 - b*z*s``): every (denominator, numerator) pair is scored
    at once in closed form, the best pairs are refitted and, when needed, given one more
    numerator term. It finds the weighted means and saturations a greedy pursuit from scratch
    misses."""
    sample = Sample(sample.X[:max_rows], sample.y[:max_rows])
    basis = build_basis(sample, names, list(range(len(names))), RATIONAL_BASIS)
    if basis is None:
        return []
    z = sample.y
    low = np.flatnonzero(basis.order <= 2)
    with np.errstate(all="ignore"):
        W = -z[:, None] * basis.V[:, low]
    sd = W.std(axis=0)
    usable = np.isfinite(sd) & (sd > 0) & np.all(np.isfinite(W), axis=0)
    if not usable.any() or np.std(z) == 0:
        return []
    den = low[usable]
    Zw = (W[:, usable] - W[:, usable].mean(axis=0)) / sd[usable]
    n_num = len(low)
    Z = np.column_stack([basis.Z[:, low], Zw])
    t = z - z.mean()
    n = len(t)
    norm = float(np.sqrt(np.mean(t**2))) or 1.0
    # One denominator term s_j and one numerator term t_k, for every pair at once: with u_j the
    # unit vector of s_j, projecting it out leaves the gain (N_k.t - (u_j.N_k)(u_j.t))**2 /
    # (|N_k|**2 - (u_j.N_k)**2) of adding t_k.
    numerators = basis.Z[:, low]
    U = Zw / np.linalg.norm(Zw, axis=0)
    b = U.T @ t
    M = U.T @ numerators
    c = numerators.T @ t
    rest = np.einsum("ij,ij->j", numerators, numerators)[None, :] - M**2
    with np.errstate(all="ignore"):
        gain = np.where(rest > 1e-9 * n, (c[None, :] - M * b[:, None]) ** 2 / rest, 0.0)
    left = np.maximum(float(t @ t) - b[:, None] ** 2 - gain, 0.0)
    err = np.sqrt(left / n) / norm
    order = np.argsort(err, axis=None)[:RATIONAL_PAIRS]
    found: list[tuple[float, Node]] = []
    for flat in order:
        j, k = divmod(int(flat), err.shape[1])
        support: tuple[int, ...] = (n_num + j, k)
        pair_err, _ = fit_error(Z, t, support, norm)
        if pair_err >= NEAR_EXACT:  # one more numerator term, the best one
            picks = [m for m in best_additions(Z, t, support, 4) if m < n_num]
            if not picks:
                continue
            support = (*support, picks[0])
            pair_err, _ = fit_error(Z, t, support, norm)
        if pair_err < NEAR_EXACT:
            top = [basis.terms[int(low[m])] for m in support if m < n_num]
            numerator = total([binary("mul", const(), term) for term in top] + [const()])
            denominator = binary("add", num(1.0), times_const(basis.terms[int(den[j])]))
            found.append((pair_err, binary("div", numerator, denominator)))
    found.sort(key=lambda et: et[0])
    return [tree for _, tree in found[:4]]


def _monomial_of(exponents: Mapping[str, Fraction], with_const: bool) -> Node:
    return monomial({k: float(v) for k, v in exponents.items()}, with_const=with_const)


#: Shapes of one π group ``a``; every constant sits where a number would (all dimensionless).
#: The first ones carry their own scale (``c + c*a``); the rest get one in front
#: (:data:`UNSCALED_PI_SHAPES`): ``1/(exp(c*a) - 1)`` alone cannot fit Planck's ``1/(2*pi**3)``.
PI_SHAPES: tuple[Callable[[Node], Node], ...] = (
    lambda a: binary("add", const(), times_const(a)),
    lambda a: binary("div", num(1.0), binary("add", const(), times_const(a))),
    lambda a: binary("pow", binary("add", const(), times_const(binary("pow", a, num(2.0)))), num(-0.5)),
    lambda a: unary("sqrt", binary("add", const(), times_const(binary("pow", a, num(2.0))))),
    lambda a: binary("add", const(), times_const(binary("pow", a, num(2.0)))),
    lambda a: binary("div", num(1.0), binary("add", const(), times_const(binary("pow", a, num(2.0))))),
)
UNSCALED_PI_SHAPES: tuple[Callable[[Node], Node], ...] = (
    lambda a: unary("exp", times_const(a)),
    lambda a: unary("exp", times_const(binary("pow", a, num(2.0)))),
    lambda a: unary("sin", times_const(a)),
    lambda a: unary("cos", times_const(a)),
    lambda a: binary("pow", unary("sin", times_const(a)), num(2.0)),
    lambda a: unary("tanh", times_const(a)),
    lambda a: binary("div", num(1.0), binary("sub", unary("exp", times_const(a)), num(1.0))),
    lambda a: binary("add", const(), unary("cos", times_const(a))),
    lambda a: unary("log", binary("add", const(), times_const(a))),
    lambda a: unary("arcsin", times_const(a)),
)


def _substitute(tree: Node, groups: Mapping[str, Node]) -> Node:
    """``tree`` with each placeholder variable replaced by its π group's monomial."""
    return replace_leaves(tree, "var", groups)


def pi_library(variables: Sequence[str], units: Mapping[str, Sequence[Fraction]],
               target: Sequence[Fraction], sample: Sample | None,
               config: LibraryConfig = DEFAULT_LIBRARY) -> tuple[list[Node], list[Node]]:
    """Dimensionally consistent seeds (see the module docstring): the near-exact sparse models
    over the π groups and the bare prefactors, then the rest."""
    basis = dimensional_basis(variables, units, target)
    if basis is None:
        return [], []
    prefactors = _prefactor(basis, variables, sample)
    group_nodes = [_monomial_of(g, with_const=False) for g in basis.groups]
    exact: list[Node] = []
    loose: list[Node] = []
    shaped: list[Node] = []
    plain = [_monomial_of(p, with_const=True) for p in prefactors]
    for p in prefactors[:2]:
        outer = _monomial_of(p, with_const=False)
        scaled = _monomial_of(p, with_const=True)
        for g in basis.groups[:MAX_GROUPS]:
            # The group and its inverse (a group is only defined up to its power).
            for group in (_monomial_of(g, with_const=False),
                          _monomial_of({k: -v for k, v in g.items()}, with_const=False)):
                shaped += [binary("mul", outer, shape(group)) for shape in PI_SHAPES]
                shaped += [binary("mul", scaled, shape(group)) for shape in UNSCALED_PI_SHAPES]
    if sample is not None and 0 < len(basis.groups) <= MAX_SPARSE_GROUPS:
        # The data's prefactor and the plain one: a law such as a weighted mean is a ratio of
        # sums only over the plain prefactor (the second only with few groups: time).
        for p in prefactors[: 2 if len(basis.groups) <= MAX_RATIONAL_GROUPS else 1]:
            more_exact, more_loose = _group_sums(variables, basis, p, group_nodes, sample, config)
            exact += more_exact
            loose += more_loose
    exact.sort(key=size)  # all near-exact: the simplest first (stable: ties keep their order)
    return exact + plain, interleave([shaped, loose])


def _group_sums(variables: Sequence[str], basis: DimensionalBasis, prefactor: Mapping[str, Fraction],
                group_nodes: Sequence[Node], sample: Sample, config: LibraryConfig) -> tuple[list[Node], list[Node]]:
    """``prefactor * sparse model over the π groups`` (sums and ratios of sums)."""
    index = {n: j for j, n in enumerate(variables)}
    with np.errstate(all="ignore"):
        def column(exponents: Mapping[str, Fraction]) -> np.ndarray:
            out = np.ones(sample.X.shape[0])
            for name, power in exponents.items():
                out = out * np.power(sample.X[:, index[name]], float(power))
            return out

        scale = column(prefactor)
        z = sample.y / scale
        pis = np.column_stack([column(g) for g in basis.groups])
    keep = np.isfinite(z) & np.all(np.isfinite(pis), axis=1)
    if keep.sum() < 8:
        return [], []
    names = [f"pi{i}" for i in range(len(basis.groups))]
    pi_sample = Sample(pis[keep], z[keep])
    law = power_law(pi_sample, names)
    exact_seeds, loose_seeds = transformed_sum_seeds(pi_sample, names, law.outer_sets() if law is not None else [],
                                                     config, max_basis=config.pi_basis)
    exact, loose = [s.tree for s in exact_seeds], [s.tree for s in loose_seeds]
    if len(names) <= MAX_RATIONAL_GROUPS:
        exact = _rationals(pi_sample, names) + exact
    if len(names) >= 2:
        # The dimensionless problem decomposed as AI Feynman does after its dimensional
        # analysis: a law such as (1 - pi1) / sqrt(1 - pi2**2) is a product of one-group parts.
        found = decomposition_seeds(pi_sample, names, config.decomposition_rows, config.decomposition_depth,
                                    config.decomposition_solves)
        exact = [t for err, t in found if err < NEAR] + exact
        loose = loose + [t for err, t in found if err >= NEAR]
    placeholders = dict(zip(names, group_nodes, strict=True))
    outer = _monomial_of(prefactor, with_const=False)

    def lift(tree: Node) -> Node:
        body = _substitute(tree, placeholders)
        return body if not prefactor else binary("mul", outer, body)

    return [lift(t) for t in exact], [lift(t) for t in loose[:MAX_LOOSE_SEEDS]]
