"""Data-driven starting structures: the first guesses a physicist would write down.

From a small sample of training rows (``Sample``) the proposer fits ``log|y|`` linearly on the
logs of the positive variables (a robust, Huber-weighted fit) and rounds the exponents to halves
and to integers: a power law ``c*x**a*y**b`` is the commonest shape in physics. Variables whose
exponent does not round cleanly are the ones a power law does not explain; for those the library
multiplies the clean power-law part by shapes of one or two variables (``sin(x)``, ``exp(c*x)``,
``1/sqrt(c + (x/y)**2)``, ...), and adds a sparse sum of such terms found by orthogonal
matching pursuit. Without a sample the library is data-free: monomials, pairwise products,
ratios and sums with free constants.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.rational import rational_seeds
from sr_dist.sr.evolve.transforms import TRANSFORMS
from sr_dist.sr.evolve.tree import binary, const, num, product, size, total, unary, var

__all__ = ["Sample", "PowerLaw", "sample_from_info", "power_law", "seed_library", "sparse_sums", "decomposition_first"]


@dataclass(frozen=True)
class Sample:
    """Rows of training data the agent shared with the proposer (``X`` is rows x variables)."""

    X: np.ndarray
    y: np.ndarray

    def __post_init__(self) -> None:
        if self.X.ndim != 2 or self.y.ndim != 1 or self.X.shape[0] != self.y.shape[0]:
            raise ValueError(f"sample shapes do not match: X {self.X.shape}, y {self.y.shape}")


@dataclass(frozen=True)
class PowerLaw:
    """``log|y| ~ b + sum(a_j log x_j)`` over the positive variables; ``rmse`` of the residual."""

    exponents: Mapping[str, float]
    rmse: float
    #: Per variable: the share of the log-log residual that a few non-power terms of that
    #: variable explain (near 0 when the variable enters as a pure power).
    gains: Mapping[str, float]

    def rounded(self, step: float) -> dict[str, float]:
        return {k: round(a / step) * step for k, a in self.exponents.items()}

    def misfit(self, name: str) -> float:
        """How far the variable's exponent is from a half-integer (0 for clean power laws)."""
        a = self.exponents.get(name)
        return 1.0 if a is None else abs(a - round(a * 2) / 2)

    def outer_sets(self) -> list[dict[str, float]]:
        """Candidate power-law factors: sets of variables that look like pure powers, with their
        exponents rounded to halves, loosest evidence last; at most four distinct sets."""
        half = self.rounded(0.5)
        looks_pure = {k: self.gains.get(k, 1.0) < 0.03 for k in self.exponents}
        strict = {k: half[k] for k in self.exponents if self.misfit(k) < 0.1 and looks_pure[k]}
        relaxed = {k: half[k] for k in self.exponents if self.misfit(k) < 0.16 and looks_pure[k]}
        integer = {k: float(round(a)) for k, a in self.exponents.items()
                   if abs(a - round(a)) < 0.2 and round(a) != 0 and looks_pure[k]}
        singles = [{k: half[k]} for k in sorted(self.exponents, key=lambda k: (self.misfit(k), k))
                   if self.misfit(k) < 0.2 and half[k] != 0 and looks_pure[k]]
        out: list[dict[str, float]] = []
        for cand in [strict, relaxed, integer, *singles[:2]]:
            cand = {k: a for k, a in cand.items() if a != 0}
            if cand and cand not in out:
                out.append(cand)
        return out[:4]


def sample_from_info(info: Mapping[str, Any], variables: Sequence[str], max_rows: int = 1000) -> Sample | None:
    """Read ``info["sample"]`` = ``{"X": rows, "y": values}`` (or ``{"columns": {name: values}, "y": ...}``).

    Returns None when there is no usable sample; never raises on malformed input.
    """
    raw = info.get("sample") if isinstance(info, Mapping) else None
    if not isinstance(raw, Mapping) or "y" not in raw:
        return None
    try:
        y = np.asarray(raw["y"], dtype=float).reshape(-1)
        if "X" in raw:
            X = np.asarray(raw["X"], dtype=float)
            if X.ndim == 1:
                X = X.reshape(-1, 1)
        elif isinstance(raw.get("columns"), Mapping):
            cols = raw["columns"]
            X = np.column_stack([np.asarray(cols[v], dtype=float) for v in variables])
        else:
            return None
        if X.shape != (y.shape[0], len(variables)):
            return None
        keep = np.isfinite(y) & np.all(np.isfinite(X), axis=1)
        X, y = X[keep][:max_rows], y[keep][:max_rows]
        if y.shape[0] < 8:
            return None
        return Sample(X, y)
    except (TypeError, ValueError, KeyError):
        return None


def _huber_lstsq(A: np.ndarray, b: np.ndarray, iterations: int = 5) -> tuple[np.ndarray, np.ndarray]:
    w = np.ones_like(b)
    coef = np.zeros(A.shape[1])
    for _ in range(iterations):
        sw = np.sqrt(w)
        coef, *_ = np.linalg.lstsq(A * sw[:, None], b * sw, rcond=None)
        r = b - A @ coef
        scale = 1.4826 * np.median(np.abs(r - np.median(r))) + 1e-12
        k = 1.345 * scale
        w = np.where(np.abs(r) <= k, 1.0, k / np.maximum(np.abs(r), 1e-300))
    return coef, b - A @ coef


def power_law(sample: Sample, variables: Sequence[str]) -> PowerLaw | None:
    """Robust log-log fit of ``|y|`` on the strictly positive variables, or None if impossible."""
    nonzero = sample.y != 0
    if nonzero.sum() < 8:
        return None
    X, y = sample.X[nonzero], sample.y[nonzero]
    positive = [j for j in range(X.shape[1]) if np.all(X[:, j] > 0) and np.ptp(X[:, j]) > 0]
    if not positive:
        return None
    A = np.column_stack([np.ones(len(y))] + [np.log(X[:, j]) for j in positive])
    target = np.log(np.abs(y))
    coef, resid = _huber_lstsq(A, target)
    exps = {variables[j]: float(coef[i + 1]) for i, j in enumerate(positive)}
    rss = float(np.sum(resid**2))
    gains: dict[str, float] = {}
    for j in positive:
        x = X[:, j]
        extended = np.column_stack([A, x, x**2, 1 / x, np.sin(x), np.cos(x)])
        _, r = _huber_lstsq(extended, target)
        gains[variables[j]] = float(1 - np.sum(r**2) / rss) if rss > 0 else 0.0
    return PowerLaw(exps, float(np.sqrt(np.mean(resid**2))), gains)


# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------


def _power(name: str, exponent: float) -> Node | None:
    x = var(name)
    if exponent == 0:
        return None
    if exponent == 1:
        return x
    if exponent == 0.5:
        return unary("sqrt", x)
    return binary("pow", x, num(exponent))


def _monomial(exponents: Mapping[str, float], skip: Sequence[str] = (), with_const: bool = True) -> Node:
    """``c * prod(x**a)`` with the negative powers written as a quotient."""
    top: list[Node] = [const()] if with_const else []
    bottom: list[Node] = []
    for name in sorted(exponents):
        if name in skip:
            continue
        a = exponents[name]
        if a > 0:
            p = _power(name, a)
            if p is not None:
                top.append(p)
        elif a < 0:
            p = _power(name, -a)
            if p is not None:
                bottom.append(p)
    out = product(top) if top else num(1.0)
    return binary("div", out, product(bottom)) if bottom else out


def _cx(x: Node) -> Node:
    return binary("mul", const(), x)


#: Shapes of one variable that multiply a power law (a free constant scales the whole).
ONE_VAR_SHAPES: tuple[Callable[[Node], Node], ...] = (
    lambda x: unary("sin", x),
    lambda x: unary("cos", x),
    lambda x: unary("sin", _cx(x)),
    lambda x: unary("cos", _cx(x)),
    lambda x: unary("exp", _cx(x)),
    lambda x: unary("exp", unary("neg", _cx(x))),
    lambda x: unary("exp", _cx(binary("pow", x, num(2.0)))),
    lambda x: unary("exp", unary("neg", _cx(binary("pow", x, num(2.0))))),
    lambda x: binary("mul", unary("sin", x), unary("cos", x)),
    lambda x: binary("pow", unary("sin", x), num(2.0)),
    lambda x: binary("pow", unary("cos", x), num(2.0)),
    lambda x: binary("add", x, const()),
    lambda x: binary("div", num(1.0), binary("add", x, const())),
    lambda x: binary("add", binary("pow", x, num(2.0)), const()),
    lambda x: unary("log", x),
    lambda x: unary("tanh", _cx(x)),
    lambda x: binary("add", unary("cos", x), const()),
    lambda x: binary("div", num(1.0), binary("sub", unary("exp", _cx(x)), num(1.0))),
    lambda x: unary("arcsin", _cx(x)),
    lambda x: binary("add", unary("exp", _cx(x)), unary("exp", unary("neg", _cx(x)))),
    lambda x: unary("sqrt", binary("add", const(), binary("pow", x, num(2.0)))),
    lambda x: binary("pow", binary("add", const(), binary("pow", x, num(2.0))), num(-0.5)),
)

#: Shapes of two variables (ratios, differences, sums) that multiply a power law.
TWO_VAR_SHAPES: tuple[Callable[[Node, Node], Node], ...] = (
    lambda x, y: binary("pow", binary("add", const(), binary("pow", binary("div", x, y), num(2.0))), num(-0.5)),
    lambda x, y: unary("sqrt", binary("add", const(), binary("pow", binary("div", x, y), num(2.0)))),
    lambda x, y: binary("div", num(1.0), binary("add", const(), binary("div", x, y))),
    lambda x, y: binary("add", const(), binary("div", x, y)),
    lambda x, y: binary("add", x, _cx(y)),
    lambda x, y: binary("div", num(1.0), binary("add", x, _cx(y))),
    lambda x, y: binary("pow", binary("sub", x, y), num(2.0)),
    lambda x, y: binary("sub", x, y),
    lambda x, y: binary("add", binary("pow", x, num(2.0)), _cx(binary("pow", y, num(2.0)))),
    lambda x, y: binary("div", num(1.0), binary("add", binary("pow", x, num(2.0)), _cx(binary("pow", y, num(2.0))))),
    lambda x, y: unary("exp", _cx(binary("div", x, y))),
    lambda x, y: unary("sin", _cx(binary("mul", x, y))),
    lambda x, y: unary("cos", _cx(binary("mul", x, y))),
    lambda x, y: unary("sin", binary("sub", x, y)),
    lambda x, y: unary("cos", binary("sub", x, y)),
    lambda x, y: binary("div", num(1.0), binary("sub", unary("exp", _cx(binary("div", x, y))), num(1.0))),
    lambda x, y: binary("mul", x, unary("sin", y)),
    lambda x, y: binary("mul", x, unary("cos", y)),
    lambda x, y: binary("add", const(), binary("mul", x, unary("cos", y))),
    lambda x, y: unary("tanh", _cx(binary("div", x, y))),
)


#: Shapes of a dimensionless group ``a`` (a product of variables): ``tanh(c*a)``, ``exp(-c*a)``...
GROUP_SHAPES: tuple[Callable[[Node], Node], ...] = (
    lambda a: unary("exp", unary("neg", _cx(a))),
    lambda a: unary("tanh", _cx(a)),
    lambda a: binary("pow", unary("sin", _cx(a)), num(2.0)),
    lambda a: unary("sin", _cx(a)),
    lambda a: unary("cos", _cx(a)),
    lambda a: binary("div", num(1.0), binary("sub", unary("exp", _cx(a)), num(1.0))),
    lambda a: binary("sub", unary("exp", _cx(a)), num(1.0)),
    lambda a: binary("div", num(1.0), binary("add", unary("exp", _cx(a)), unary("exp", unary("neg", _cx(a))))),
    lambda a: binary("add", const(), unary("cos", _cx(a))),
    lambda a: binary("div", num(1.0), binary("add", const(), a)),
    lambda a: binary("add", const(), a),
    lambda a: unary("sqrt", binary("add", const(), a)),
    lambda a: binary("pow", binary("add", const(), binary("pow", a, num(2.0))), num(-0.5)),
    lambda a: unary("arcsin", _cx(a)),
    lambda a: unary("exp", unary("neg", _cx(binary("pow", a, num(2.0))))),
    lambda a: unary("log", _cx(a)),
)


def _group_candidates(law: PowerLaw) -> list[Node]:
    """``c * power law * g(group)``: the group multiplies the variables that do not enter as
    integer powers, each to the sign of its fitted exponent (a saturating or periodic ``g``
    bends the log-log slope towards half-integers, so only integer powers count as clean);
    variants also keep a strongly varying group variable in the power law outside."""
    clean = {k: float(round(a)) for k, a in law.exponents.items()
             if abs(a - round(a)) < 0.15 and round(a) != 0 and law.gains.get(k, 1.0) < 0.03}
    messy = sorted(k for k in law.exponents if k not in clean and abs(law.exponents[k]) > 0.05)[:5]
    if not messy:
        return []
    signs = {k: (-1.0 if law.exponents[k] < 0 else 1.0) for k in messy}
    # A decreasing g (exp(-a)) flips the signs, so the inverse group is tried as well.
    groups = [_monomial(signs, with_const=False), _monomial({k: -a for k, a in signs.items()}, with_const=False)]
    outers = [clean]
    for k in sorted(messy, key=lambda k: -abs(law.exponents[k])):
        if abs(law.exponents[k]) > 0.75:
            outers.append({**clean, k: -1.0 if law.exponents[k] < 0 else 1.0})
    out: list[Node] = []
    for outer in outers[:3]:
        base = _monomial(outer)
        for group in groups:
            out += [binary("mul", base, shape(group)) for shape in GROUP_SHAPES]
    return out


# --------------------------------------------------------------------------------------------
# Sparse sums (orthogonal matching pursuit over a basis of terms)
# --------------------------------------------------------------------------------------------


def _unit_terms(name: str) -> list[tuple[Node, Callable[[np.ndarray], np.ndarray]]]:
    x = var(name)
    return [
        (x, lambda v: v),
        (binary("pow", x, num(2.0)), lambda v: v**2),
        (binary("pow", x, num(3.0)), lambda v: v**3),
        (binary("div", num(1.0), x), lambda v: 1 / v),
        (binary("pow", x, num(-2.0)), lambda v: v**-2.0),
        (unary("sqrt", x), lambda v: np.sqrt(np.abs(v))),
        (unary("sin", x), np.sin),
        (unary("cos", x), np.cos),
        (unary("exp", x), np.exp),
        (unary("log", x), lambda v: np.log(np.abs(v))),
        (binary("mul", unary("sin", x), unary("cos", x)), lambda v: np.sin(v) * np.cos(v)),
        (binary("pow", unary("sin", x), num(2.0)), lambda v: np.sin(v) ** 2),
        (binary("mul", x, unary("sin", x)), lambda v: v * np.sin(v)),
        (binary("mul", x, unary("cos", x)), lambda v: v * np.cos(v)),
        (unary("exp", unary("neg", x)), lambda v: np.exp(-v)),
        (unary("exp", unary("neg", binary("pow", x, num(2.0)))), lambda v: np.exp(-(v**2))),
        # Half-integer powers past sqrt (``x1/(x1 - x0**1.5)``, ``sin(x2)/sqrt(x1)``): last, so
        # the core products above do not grow.
        (binary("pow", x, num(1.5)), lambda v: np.abs(v) ** 1.5),
        (binary("pow", x, num(-0.5)), lambda v: np.abs(v) ** -0.5),
    ]


@dataclass(frozen=True)
class _Basis:
    """Candidate terms for sparse sums, their standardised values, and their order (factors)."""

    terms: tuple[Node, ...]
    V: np.ndarray
    Z: np.ndarray
    order: np.ndarray


#: Shapes (indices into :func:`_unit_terms`) of the core products: two factors take the first
#: eight shapes, three factors these six.
_PAIR_SHAPES = range(8)
_TRIPLE_SHAPES = (0, 1, 2, 3, 6, 7)
#: Shapes the wider products add, in the order they are given room: exp, sqrt, x**-2.
_WIDE_TRIPLE_SHAPES = (8, 5, 4)
#: Term tiers (``_Basis.order``): one factor, core products of two, core products of three, and
#: the wider products (two shapes of one variable, every shape in a pair over few variables,
#: exp/sqrt/x**-2 in triples). The pursuit runs on each tier and those below it in turn, so a
#: larger basis adds models without letting its proxies crowd out the simple ones.
WIDE = 4
#: The last tier: pairs with a half-integer power past sqrt (``x0**1.5/x1``), apart from the
#: wide tier so that they do not crowd its first terms (``sqrt(x0)*sqrt(x1)*cos(x2)``).
HALF = 5
_HALF_SHAPES = 16
#: Widest target (max - min) whose exp :func:`_sparse_candidates` fits as a sparse sum: past
#: it the largest rows alone decide the fit.
EXP_TRANSFORM_RANGE = 20.0
#: Most one-factor terms for the pair completion of :func:`sparse_sums` (its cost is their
#: number squared: 18 shapes of up to six variables).
PAIR_COMPLETION_TERMS = 108


def _basis(sample: Sample, names: Sequence[str], columns: Sequence[int], max_terms: int,
           shape_products: bool = False) -> _Basis | None:
    units: list[list[tuple[Node, np.ndarray]]] = []
    with np.errstate(all="ignore"):
        for name, j in zip(names, columns):
            col = sample.X[:, j]
            units.append([(t, f(col)) for t, f in _unit_terms(name)])
        out: list[tuple[Node, np.ndarray, int]] = [(t, v, 1) for group in units for t, v in group]
        pairs = list(itertools.combinations(range(len(units)), 2))
        triples = list(itertools.combinations(range(len(units)), 3)) if len(units) <= 5 else []

        def mul(*factors: tuple[Node, np.ndarray]) -> tuple[Node, np.ndarray]:
            node, value = factors[0]
            for t, v in factors[1:]:
                node, value = binary("mul", node, t), value * v
            return node, value

        for a, b in pairs:
            for i, j in itertools.product(_PAIR_SHAPES, _PAIR_SHAPES):
                out.append((*mul(units[a][i], units[b][j]), 2))
            # Differences: distances and phase differences are common in physics.
            xa, xb = var(names[a]), var(names[b])
            da = sample.X[:, columns[a]] - sample.X[:, columns[b]]
            out.append((binary("pow", binary("sub", xa, xb), num(2.0)), da**2, 2))
            out.append((unary("cos", binary("sub", xa, xb)), np.cos(da), 2))
        for a, b, c in triples:
            for i, j, k in itertools.product(_TRIPLE_SHAPES, _TRIPLE_SHAPES, _TRIPLE_SHAPES):
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
                for (_, first), (j, second) in itertools.combinations(enumerate(group[:10]), 2):
                    if j > 5:  # not two powers (``x*x**2`` is a unit term)
                        out.append((*mul(first, second), WIDE))
                log_sq = (binary("pow", group[9][0], num(2.0)), group[9][1] ** 2)
                out.append((*mul(group[0], log_sq), WIDE))
            # ... and, for the whole problem, those times a shape of the other variable
            # (``x1*log(x1)/x0``; 480 terms, too many for the decomposition's small parts).
            for a, b in itertools.permutations(range(len(units)), 2) if shape_products and len(units) <= 2 else ():
                for (_, first), (j, second) in itertools.combinations(enumerate(units[a][:10]), 2):
                    if j > 5:
                        out.extend((*mul(first, second, other), WIDE) for other in units[b][:8])
        if len(units) <= 3:
            # Every shape of each variable in a pair (``x0 * x2*sin(x2)``).
            for a, b in pairs:
                for i, j in itertools.product(range(len(units[a])), range(len(units[b]))):
                    if i >= 8 or j >= 8:
                        out.append((*mul(units[a][i], units[b][j]), HALF if max(i, j) >= _HALF_SHAPES else WIDE))
        # exp, sqrt and x**-2 in triples as far as the basis has room for them
        # (``x0/x2*exp(x3)``, ``sqrt(I1)*sqrt(I2)*cos(delta)``).
        wide = list(_WIDE_TRIPLE_SHAPES)
        while wide and len(out) + len(triples) * ((6 + len(wide)) ** 3 - 6**3) > max_terms:
            wide.pop()
        shapes = (*_TRIPLE_SHAPES, *wide)
        for a, b, c in triples if wide else []:
            for i, j, k in itertools.product(shapes, shapes, shapes):
                if i in wide or j in wide or k in wide:
                    out.append((*mul(units[a][i], units[b][j], units[c][k]), WIDE))
    kept = [(t, v, o) for t, v, o in out[:max_terms] if np.all(np.isfinite(v)) and np.std(v) > 0]
    if not kept:
        return None
    V = np.column_stack([v for _, v, _ in kept])
    Z = (V - V.mean(axis=0)) / V.std(axis=0)
    return _Basis(tuple(t for t, _, _ in kept), V, Z, np.array([o for _, _, o in kept]))


def _fit_error(Z: np.ndarray, t: np.ndarray, support: tuple[int, ...], norm: float) -> tuple[float, np.ndarray]:
    if not support:
        return 1.0, t
    A = Z[:, list(support)]
    coef, *_ = np.linalg.lstsq(A, t, rcond=None)
    r = t - A @ coef
    return float(np.sqrt(np.mean(r**2)) / norm), r


def _project_out(Z: np.ndarray, t: np.ndarray, support: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The residual of ``t`` and the columns of ``Z``, both orthogonal to the ``support`` columns."""
    if not support:
        return t, Z
    Q, _ = np.linalg.qr(Z[:, list(support)])
    return t - Q @ (Q.T @ t), Z - Q @ (Q.T @ Z)


def _best_additions(Z: np.ndarray, t: np.ndarray, support: tuple[int, ...], k: int) -> list[int]:
    """The ``k`` terms whose addition lowers the least-squares error most (forward stepwise
    selection: candidates are orthogonalised against the current support, unlike plain
    matching pursuit, so a proxy such as ``log(x)`` does not hide ``x``)."""
    r, Zp = _project_out(Z, t, support)
    return [int(i) for i in np.argsort(-_gains(Zp, r, support))[:k]]


#: Largest basis for which :func:`sparse_sums` pairs every one-factor term with its best
#: partner when nothing exact was found (one projection of the basis per one-factor term).
SINGLE_PAIR_TERMS = 5000
#: Relative residual below which :func:`_pursuit` refits a support by least squares.
_REFIT_BELOW = 1e-5


def _gains(Zp: np.ndarray, r: np.ndarray, support: tuple[int, ...]) -> np.ndarray:
    """How much each column of ``Zp`` (orthogonal to ``support``) lowers ``|r|**2``; 0 for the
    support and for columns it already spans."""
    norms = np.einsum("ij,ij->j", Zp, Zp)
    gains: np.ndarray = np.where(norms > 1e-9 * len(r), (Zp.T @ r) ** 2 / np.maximum(norms, 1e-300), 0.0)
    if support:
        gains[list(support)] = 0.0
    return gains


def _pursuit(Z: np.ndarray, t: np.ndarray, max_terms: int, beam: int, first_beam: int) -> dict[tuple[int, ...], float]:
    """Beam forward stepwise selection (:func:`_best_additions` at each step): every support
    it tries, with its relative residual. A support's residual and its columns, orthogonalised
    against it, pass to its children by one Gram-Schmidt step each; a child's error comes from
    its gain (``|r|**2 - gain``), and from a least-squares refit once it is below
    ``_REFIT_BELOW``, where that difference would lose the digits the exactness bars need."""
    n = len(t)
    norm = float(np.sqrt(np.mean(t**2))) or 1.0
    results: dict[tuple[int, ...], float] = {}
    frontier: list[tuple[tuple[int, ...], np.ndarray, np.ndarray]] = [((), t, Z)]
    for step in range(max_terms):
        width = first_beam if step == 0 else beam
        candidates: dict[tuple[int, ...], tuple[float, int, int]] = {}
        for f, (support, r, Zp) in enumerate(frontier):
            gains = _gains(Zp, r, support)
            rr = float(r @ r)
            for k in np.argsort(-gains)[:width]:
                new = tuple(sorted(support + (int(k),)))
                if new in candidates or new in results:
                    continue
                err = float(np.sqrt(max(rr - gains[k], 0.0) / n)) / norm
                if err < _REFIT_BELOW:
                    err, _ = _fit_error(Z, t, new, norm)
                candidates[new] = (err, f, int(k))
        if not candidates:
            break
        results.update({support: c[0] for support, c in candidates.items()})
        chosen = sorted(candidates, key=lambda c: candidates[c][0])[:width]
        children = []
        for support in chosen if step + 1 < max_terms else ():
            _, f, k = candidates[support]
            _, r, Zp = frontier[f]
            q = Zp[:, k] / np.sqrt(Zp[:, k] @ Zp[:, k])
            children.append((support, r - q * (q @ r), Zp - np.outer(q, q @ Zp)))
        frontier = children
        if candidates[chosen[0]][0] < 1e-9:
            # An exact support may carry terms picked before the right ones (a proxy first,
            # then the law, with the proxy's coefficient gone to zero): drop what it does
            # not need (backward elimination).
            support = chosen[0]
            while len(support) > 1:
                drops = {tuple(j for j in support if j != i): 0.0 for i in support}
                for smaller in drops:
                    drops[smaller], _ = _fit_error(Z, t, smaller, norm)
                results.update(drops)
                best = min(drops, key=drops.__getitem__)
                if drops[best] >= 1e-9:
                    break
                support = best
            break
    return results


def _pair_completions(Z: np.ndarray, t: np.ndarray, support: tuple[int, ...],
                      candidates: np.ndarray, keep: int = 3) -> list[tuple[int, ...]]:
    """``support`` plus the ``keep`` best *pairs* of ``candidates``, scored jointly: the 2-D
    projection of the residual on each pair, for all pairs at once. Greedy steps cannot add
    ``I1 + I2`` to ``sqrt(I1)*sqrt(I2)*cos(delta)``: alone each explains less than a proxy
    (``sqrt(I1)*sqrt(I2)``, ranked first), together they close the sum."""
    r, Cp = _project_out(Z[:, [*support, *candidates.tolist()]], t, tuple(range(len(support))))
    Cp = Cp[:, len(support):]
    G = Cp.T @ Cp
    b = Cp.T @ r
    gii = np.diag(G)
    with np.errstate(all="ignore"):
        det = gii[:, None] * gii[None, :] - G**2
        gain = (gii[None, :] * b[:, None] ** 2 - 2 * G * b[:, None] * b[None, :]
                + gii[:, None] * b[None, :] ** 2) / det
    ok = np.triu(det > 1e-9 * np.outer(gii, gii), 1) & np.isfinite(gain)
    if not ok.any():
        return []
    gain = np.where(ok, gain, -np.inf)
    best = np.argsort(-gain, axis=None)[:keep]
    out = []
    for flat in best:
        i, j = np.unravel_index(int(flat), gain.shape)
        if np.isfinite(gain[i, j]):
            out.append(tuple(sorted((*support, int(candidates[i]), int(candidates[j])))))
    return out


def _single_completions(Z: np.ndarray, t: np.ndarray, first: int, candidates: np.ndarray,
                        max_terms: int, beam: int, first_beam: int) -> dict[tuple[int, ...], float]:
    """``first`` plus each support :func:`_pursuit` finds among ``candidates`` for what
    ``first`` leaves of ``t`` (``candidates`` orthogonalised against it), with its relative
    residual on ``t`` (the residual of the completion on what ``first`` leaves is the same)."""
    others = candidates[candidates != first]
    if max_terms < 1 or not len(others):
        return {}
    r, Zp = _project_out(Z[:, [first, *others.tolist()]], t, (0,))
    scale = float(np.sqrt(np.mean(r**2)) / (np.sqrt(np.mean(t**2)) or 1.0))
    found = _pursuit(Zp[:, 1:], r, max_terms, beam, first_beam)
    return {tuple(sorted((first, *(int(others[i]) for i in support)))): err * scale
            for support, err in found.items()}


def _gains_beside(C: np.ndarray, qr: np.ndarray, zr: np.ndarray, norms: np.ndarray | float,
                  n: int) -> np.ndarray:
    """``gains[j, k]``: how much adding column ``z_k`` lowers the squared least-squares error of
    ``r`` beyond the unit column ``q_j`` alone, from ``C = Q.T @ Z``, ``qr = Q.T @ r``,
    ``zr = Z.T @ r`` and ``norms = |z_k|**2``: ``(z_k.r - (q_j.z_k)(q_j.r))**2 / (|z_k|**2 -
    (q_j.z_k)**2)``, the orthogonal matching pursuit step with ``q_j`` already in the model. Zero
    where ``z_k`` is (nearly) parallel to ``q_j``."""
    with np.errstate(all="ignore"):
        rest = norms - C**2  # |z_k|**2 once q_j is projected out
        return np.where(rest > 1e-9 * n, (zr[None, :] - C * qr[:, None]) ** 2 / rest, 0.0)


def _best_partners(Z: np.ndarray, t: np.ndarray, firsts: np.ndarray, keep: int = 2) -> dict[tuple[int, ...], float]:
    """For each of ``firsts``, itself and each of the ``keep`` columns of ``Z`` that lower the
    least-squares error most beside it, with the pair's relative residual: every pair scored at
    once from ``Z[:, firsts].T @ Z`` (the columns of ``Z`` are standardised, ``|z|**2 = n``;
    ``t`` is centred), refitted by least squares below ``_REFIT_BELOW``."""
    n = len(t)
    norm = float(np.sqrt(np.mean(t**2))) or 1.0
    C = Z[:, firsts].T @ Z / np.sqrt(n)  # q_s . z_k with q_s = z_s / sqrt(n)
    qt = Z[:, firsts].T @ t / np.sqrt(n)
    gains = _gains_beside(C, qt, Z.T @ t, n, n)
    gains[np.arange(len(firsts)), firsts] = 0.0
    best = np.argsort(-gains, axis=1)[:, :keep]
    left = float(t @ t) - qt**2  # what each first leaves
    out: dict[tuple[int, ...], float] = {}
    for i, (s, row) in enumerate(zip(firsts, best, strict=True)):
        for k in row:
            support = tuple(sorted((int(s), int(k))))
            err = float(np.sqrt(max(left[i] - gains[i, k], 0.0) / n)) / norm
            out[support] = _fit_error(Z, t, support, norm)[0] if err < _REFIT_BELOW else err
    return out


#: Largest basis for which :func:`sparse_sums` scores every pair of terms with its best third
#: when nothing exact was found (a basis over one variable has 47 terms).
EXHAUSTIVE_TERMS = 64


def _all_triples(Z: np.ndarray, t: np.ndarray, keep: int = 8) -> dict[tuple[int, ...], float]:
    """The ``keep`` best supports of three terms among those made of every pair of columns and
    the column that lowers the error most beside it, with their relative residuals. Beam steps
    miss ``exp(x)/x + exp(x)/x**2 + x**2``: its terms are collinear, and alone each explains
    less than proxies such as ``exp(x)``. For each first column the others are projected off
    it, and each second column's best third is read from one product
    (:func:`_gains_beside`)."""
    n, m = Z.shape
    norm = float(np.sqrt(np.mean(t**2))) or 1.0
    scored: dict[tuple[int, ...], float] = {}
    for i in range(m):
        r, Zp = _project_out(Z, t, (i,))
        norms = np.einsum("ij,ij->j", Zp, Zp)
        live = norms > 1e-9 * n
        live[: i + 1] = False
        if not live.any():
            continue
        with np.errstate(all="ignore"):
            Q = Zp / np.sqrt(np.where(live, norms, 1.0))
            C = Q[:, live].T @ Zp  # q_j . z_k, j live
            qr = Q[:, live].T @ r
        gains = _gains_beside(C, qr, Zp.T @ r, norms, n)
        gains[:, ~(norms > 1e-9 * n)] = 0.0
        gains[:, i] = 0.0
        seconds = np.flatnonzero(live)
        gains[np.arange(len(seconds)), seconds] = 0.0
        best = np.argmax(gains, axis=1)
        top = gains[np.arange(len(seconds)), best]
        left = float(r @ r) - qr**2
        errs = np.where(top > 0, np.sqrt(np.maximum(left - top, 0.0) / n) / norm, np.inf)
        for row in np.argsort(errs)[:keep]:
            if not np.isfinite(errs[row]):
                break
            scored[tuple(sorted((i, int(seconds[row]), int(best[row]))))] = float(errs[row])
    out: dict[tuple[int, ...], float] = {}
    for support in sorted(scored, key=scored.__getitem__)[:keep]:
        err = scored[support]
        out[support] = _fit_error(Z, t, support, norm)[0] if err < _REFIT_BELOW else err
    return out


def best_of_each_size(sums: Sequence[tuple[float, list[Node]]]) -> list[tuple[float, list[Node]]]:
    """The sum of least error of each number of terms, fewest terms first: besides
    :func:`sparse_sums`'s first few (fewest terms first when nothing is exact, so all single
    terms) ``x4 + sin(x1)`` fitted to a decomposition's estimate of a part (accurate to about
    1e-4, so nothing is exact there)."""
    best: dict[int, tuple[float, list[Node]]] = {}
    for err, terms in sums:
        if err < best.get(len(terms), (math.inf, []))[0]:
            best[len(terms)] = (err, terms)
    return [best[k] for k in sorted(best)]


def sparse_sums(
    basis: _Basis, target: np.ndarray, max_terms: int = 4, beam: int = 3, first_beam: int = 6,
    every_pair: bool = False,
) -> list[tuple[float, list[Node]]]:
    """Sparse linear models ``target ~ c0 + sum(c_k t_k)`` found by beam matching pursuit.

    The search runs on the one-factor terms, then on all terms, so simple sums are not crowded
    out by products that correlate better one at a time. With ``every_pair`` (the whole
    problem's sums, not the decomposition's many small ones), each one-factor term is also
    tried with its two best partners when nothing exact turned up.
    Returns ``(relative residual, terms)`` pairs: near-exact models first, fewest terms first.
    """
    if not np.all(np.isfinite(target)) or np.std(target) == 0:
        return []
    t = target - target.mean()
    found: dict[tuple[int, ...], float] = {}
    orders = sorted(set(basis.order.tolist()))
    core = [o for o in orders if o < WIDE]
    for max_order in dict.fromkeys([orders[0], *core[-1:], orders[-1]]):
        columns = np.flatnonzero(basis.order <= max_order)
        for support, err in _pursuit(basis.Z[:, columns], t, max_terms, beam, first_beam).items():
            found.setdefault(tuple(int(columns[i]) for i in support), err)
    if min(found.values(), default=1.0) > 1e-9:
        # Nothing exact: each of the best single terms (of the whole basis, of the tiers up to
        # the wide one, and of the terms of one or two factors, where a product of three does
        # not outrank ``x3*x4``) plus the best pair of one-factor terms (a law such as ``I1 + I2 + 2*sqrt(I1*I2)*cos(delta)``),
        # and plus a pursuit over the one-factor terms alone (``x3*x4 + 2.2*x0 + x1 + x2``:
        # after ``x3*x4`` a greedy step over every term picks products such as
        # ``sqrt(x0)*x1`` that stand in for the sum).
        singles = np.flatnonzero(basis.order == 1)
        if 2 <= len(singles) <= PAIR_COMPLETION_TERMS:
            norm = float(np.sqrt(np.mean(t**2))) or 1.0
            # First terms from the whole basis, from the tiers below the half-integer powers
            # (``x1**-0.5*cos(x2)`` can crowd ``sqrt(x0)*sqrt(x1)*cos(x2)`` out of the whole
            # basis's best) and from the terms of one or two factors.
            firsts = dict.fromkeys([*_best_additions(basis.Z, t, (), first_beam)])
            for tier in (np.flatnonzero(basis.order <= WIDE), np.flatnonzero(basis.order <= 2)):
                firsts.update(dict.fromkeys(int(tier[i]) for i in _best_additions(basis.Z[:, tier], t, (), first_beam)))
            for first in firsts:
                for support in _pair_completions(basis.Z, t, (first,), singles):
                    if len(set(support)) == 3 and support not in found:
                        found[support], _ = _fit_error(basis.Z, t, support, norm)
                completions = _single_completions(basis.Z, t, first, singles, max_terms - 1, beam, first_beam)
                for support, err in completions.items():
                    if support not in found:
                        found[support] = err
            if every_pair and basis.Z.shape[1] <= SINGLE_PAIR_TERMS:
                # Every one-factor term with its best partners from the whole basis
                # (``log(x1) + x1*log(x1)/x0``: neither term is among the best first steps).
                for support, err in _best_partners(basis.Z, t, singles).items():
                    if support not in found:
                        found[support] = err
    if min(found.values(), default=1.0) > 1e-9 and basis.Z.shape[1] <= EXHAUSTIVE_TERMS:
        for support, err in _all_triples(basis.Z, t).items():
            found.setdefault(support, err)
    ranked = sorted(found.items(), key=lambda kv: (kv[1] > 1e-7, len(kv[0]), int(basis.order[list(kv[0])].sum()), kv[1]))
    return [(err, [basis.terms[i] for i in support]) for support, err in ranked]


# --------------------------------------------------------------------------------------------
# The library
# --------------------------------------------------------------------------------------------


def _data_free(variables: Sequence[str]) -> list[Node]:
    xs = [var(v) for v in variables]
    out: list[Node] = [_cx(x) for x in xs]
    out += [binary("add", _cx(x), const()) for x in xs]
    for a, b in itertools.combinations(xs, 2):
        out += [
            _cx(binary("mul", a, b)),
            _cx(binary("div", a, b)),
            _cx(binary("div", b, a)),
            binary("add", _cx(a), _cx(b)),
        ]
    if len(xs) > 1:
        out.append(_cx(product(xs)))
        if len(xs) <= 7:
            out.append(total([_cx(x) for x in xs] + [const()]))
    for x in xs:
        out += [_cx(binary("pow", x, num(2.0))), _cx(binary("div", num(1.0), x)), _cx(unary("sqrt", x))]
        out += [binary("mul", const(), shape(x)) for shape in ONE_VAR_SHAPES[:6]]
    return out


def _interleave(groups: Sequence[Sequence[Node]]) -> list[Node]:
    """Round-robin over the groups, so every batch samples every kind of structure."""
    out: list[Node] = []
    for items in itertools.zip_longest(*groups):
        out.extend(t for t in items if t is not None)
    return out


def seed_library(variables: Sequence[str], sample: Sample | None, sparse: bool = True,
                 decompose: bool = True) -> list[Node]:
    """Deterministic, ordered list of starting structures (duplicates removed by the caller).

    Near-exact sparse models come first, then what decomposition finds
    (:func:`decomposition_first`); then, round-robin: power laws, power law times shapes
    of the variables the power law explains worst, power law times shapes of a dimensionless
    group, the other sparse models, and the data-free structures.
    """
    exact, rest = _seed_library(variables, sample, sparse)
    if not decompose or sample is None:
        return exact + rest
    return decomposition_first(exact, rest, variables, sample)


def decomposition_first(exact: Sequence[Node], rest: Sequence[Node], variables: Sequence[str],
                        sample: Sample) -> list[Node]:
    """The library with the decomposition's proposals (``sr_dist.sr.evolve.decompose``): its
    near-exact ones right after the library's near-exact sparse models, the others after the
    next eight entries."""
    from sr_dist.sr.evolve.decompose import decomposition_seeds

    found = decomposition_seeds(sample, variables)
    near = [tree for err, tree in found if err < 1e-6]
    loose = [tree for err, tree in found if err >= 1e-6]
    return [*exact, *near, *rest[:8], *loose, *rest[8:]]


def _seed_library(variables: Sequence[str], sample: Sample | None, sparse: bool = True) -> tuple[list[Node], list[Node]]:
    """The library without decomposition (see :func:`seed_library`): (near-exact, the rest)."""
    law = power_law(sample, variables) if sample is not None else None
    exact: list[Node] = []
    loose: list[Node] = []
    monomials: list[Node] = []
    one_var: list[Node] = []
    two_var: list[Node] = []
    groups: list[Node] = []
    if law is not None and law.exponents:
        monomials += [_monomial(law.rounded(0.5)), _monomial(law.rounded(1.0))]
        outers = law.outer_sets()
        clean = outers[0] if outers else {}
        messy = sorted((k for k in law.exponents if k not in clean), key=lambda k: (-law.gains[k], k))
        for name in messy[:4]:
            base = _monomial(clean, skip=[name])
            one_var += [binary("mul", base, shape(var(name))) for shape in ONE_VAR_SHAPES]
        for a, b in itertools.permutations(messy[:4], 2):
            base = _monomial(clean, skip=[a, b])
            two_var += [binary("mul", base, shape(var(a), var(b))) for shape in TWO_VAR_SHAPES]
        groups = _group_candidates(law)
        if sparse and sample is not None:
            exact, loose = _sparse_candidates(sample, variables, outers)
    elif sparse and sample is not None:
        exact, loose = _sparse_candidates(sample, variables, [])
    return exact, _interleave([monomials, one_var, groups, loose, two_var, _data_free(variables)])


def _rational(basis: _Basis, target: np.ndarray, s0: np.ndarray, s0_node: Node) -> list[tuple[float, Node]]:
    """Near-exact rational models ``(a0 + sum(a_k t_k)) / (s0 + sum(b_k s_k))`` from the linear
    problem ``target*s0 = a0 + sum(a_k t_k) - sum(b_k target*s_k)`` (terms of up to two factors)."""
    low = np.flatnonzero(basis.order <= 2)
    with np.errstate(all="ignore"):
        W = -target[:, None] * basis.V[:, low]
        lhs = target * s0
    sd = W.std(axis=0)
    ok = np.isfinite(sd) & (sd > 0) & np.all(np.isfinite(W), axis=0)
    if not np.all(np.isfinite(lhs)) or np.std(lhs) == 0 or not ok.any():
        return []
    # A denominator term equal to the leading one (target*s0 itself) would be a trivial fit.
    lhs_z = (lhs - lhs.mean()) / lhs.std()
    with np.errstate(all="ignore"):
        same = np.abs(((W - W.mean(axis=0)) / np.where(sd > 0, sd, 1.0)).T @ lhs_z) / len(lhs) > 1 - 1e-9
    ok &= ~same
    if not ok.any():
        return []
    Zw = (W[:, ok] - W[:, ok].mean(axis=0)) / sd[ok]
    Z = np.column_stack([basis.Z[:, low], Zw])
    den_terms = [basis.terms[int(i)] for i in low[ok]]
    n_num = len(low)
    out: list[tuple[float, Node]] = []
    for support, err in sorted(_pursuit(Z, lhs - lhs.mean(), 5, 3, 6).items(), key=lambda kv: kv[1])[:6]:
        top = [basis.terms[int(low[i])] for i in support if i < n_num]
        bottom = [den_terms[i - n_num] for i in support if i >= n_num]
        # Only near-exact fits: a loose one is usually a denominator that is nearly zero.
        if top and bottom and err < 1e-6:
            numerator = total([binary("mul", const(), t) for t in top] + [const()])
            denominator = total([s0_node] + [binary("mul", const(), t) for t in bottom])
            out.append((err, binary("div", numerator, denominator)))
    return out


def _sparse_candidates(
    sample: Sample, variables: Sequence[str], outers: Sequence[Mapping[str, float]],
    max_basis: int = 4500, max_rows: int = 256,
) -> tuple[list[Node], list[Node]]:
    """``power-law part * g(sparse model over the other variables)`` for each candidate
    power-law part, ``g`` in (identity, reciprocal, square root, square, cube; without a
    power-law part also log, exp, sin, tan; arccos and arcsin where defined) and sparse sums and ratios of sums;
    returns (near-exact, rest)."""
    exact: list[tuple[float, Node]] = []
    loose: list[tuple[float, Node]] = []
    index = {v: j for j, v in enumerate(variables)}
    # A few hundred rows identify a sparse model; the evaluator checks it on all of them.
    sample = Sample(sample.X[:max_rows], sample.y[:max_rows])

    def keep(err: float, body: Node, outer: Node | None, transform: str) -> None:
        body = TRANSFORMS[transform].inverse(body)
        tree = body if outer is None else binary("mul", outer, body)
        if math.isfinite(err):
            (exact if err < 1e-6 else loose).append((err, tree))

    for rank, outer_exps in enumerate([*outers[:3], {}]):
        with np.errstate(all="ignore"):
            scale = np.ones(len(sample.y))
            for k, a in outer_exps.items():
                scale = scale * sample.X[:, index[k]] ** a
            z = sample.y / scale
            kinds = ["id", "inv"]
            if np.all(z > 0):  # where sqrt(z**2) is z
                kinds += ["sq", "sqrt"]
            # Roots: a law may be a power of a sum (``x1*(9/5 + x0*x2)**3``, ``(x0 + x1*x2)**2``),
            # which expanded is a sum of many products no pursuit assembles.
            kinds.append("cbrt")
            if not outer_exps and np.ptp(z) < EXP_TRANSFORM_RANGE:
                # The log of a sum (``x2 + log(x1**3 + exp(x0))``: its exp is a sum of two
                # products) ...
                kinds.append("exp")
            if not outer_exps and TRANSFORMS["log"].usable(z):
                # ... and the exp of one (``x2*exp(x0*x1)``: beyond a power law).
                kinds.append("log")
            if TRANSFORMS["acos"].usable(z) and np.ptp(z) > 0:
                # A cosine or sine of a sum (``x0*cos(sin(x2)/sqrt(x1))``,
                # ``sin(cos(sqrt(x0)))``), exact where the sum stays in [0, pi] or
                # [-pi/2, pi/2].
                kinds += ["acos", "asin"]
            if not outer_exps and TRANSFORMS["sin"].usable(z):
                # An angle: the law may be arcsin or arctan of a sum (Snell's law, diffraction).
                kinds += ["sin", "tan"]
            # exp of the target less its maximum: the same sum up to its constants, in range.
            transforms = [(k, TRANSFORMS[k].forward(z - np.max(z) if k == "exp" else z)) for k in kinds]
        # The sum carries its own constants, so the power-law part has none.
        outer = _monomial(outer_exps, with_const=False) if outer_exps else None
        names = [v for v in variables if v not in outer_exps]
        basis = _basis(sample, names, [index[v] for v in names], max_basis, shape_products=True) if names else None
        if basis is None:
            continue
        for transform, target in transforms:
            if not np.all(np.isfinite(target)):
                continue
            for err, terms in sparse_sums(basis, target, every_pair=True)[:4]:
                if transform in ("sin", "tan"):
                    # Without the intercept first: from all-ones constants ``arcsin(c0*x + c1)``
                    # is undefined on every row (c1 = 1) and the fit may never start; laws
                    # under an arcsin rarely carry one (Snell, diffraction).
                    keep(err, total([binary("mul", const(), t) for t in terms]), outer, transform)
                body = total([binary("mul", const(), t) for t in terms] + [const()])
                keep(err, body, outer, transform)
            if transform in ("id", "sq"):
                # Ratios of polynomials in one joint solve (the inverse is the same ratio).
                columns = sample.X[:, [index[v] for v in names]]
                for err, body in rational_seeds(columns, target, names):
                    keep(err, body, outer, transform)
            if transform not in ("id", "sq") or (rank > 0 and outer_exps):
                continue
            # Ratios of sums with a denominator 1 + ... .
            for err, body in _rational(basis, target, np.ones(len(target)), num(1.0))[:2]:
                keep(err, body, outer, transform)
    exact.sort(key=lambda et: (et[0] > 1e-9, size(et[1])))  # the simplest exact model first
    loose.sort(key=lambda et: et[0])
    return [t for _, t in exact], [t for _, t in loose]
