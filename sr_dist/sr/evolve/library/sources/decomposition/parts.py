"""A part's candidate formulas (:class:`PartFit`) and how two parts combine into one.

Every candidate carries its predictions on the sample, so combinations are ranked by their
error on the real target, and only the best few of each part are combined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.blocks import times_const
from sr_dist.sr.evolve.tree import const, count_constants, product, size, total

__all__ = ["KEEP", "PartFit", "SubProblem", "best_parts", "combine_product", "combine_sum", "denominator_ok", "fit_rel",
           "linear_fit", "near_exact", "rank", "relative_error", "sum_terms"]


#: Candidates kept per (sub)problem.
KEEP = 4


@dataclass(frozen=True)
class PartFit:
    """A proposal for one (sub)problem: its tree, its values on the sample, its relative RMS
    error there, and whether it carries a free overall scale (so a sum need not add one)."""

    tree: Node
    pred: np.ndarray
    error: float
    scaled: bool = True


def relative_error(pred: np.ndarray, t: np.ndarray) -> float:
    scale = float(np.std(t)) or float(np.mean(np.abs(t))) or 1.0
    with np.errstate(all="ignore"):
        value = float(np.sqrt(np.mean((pred - t) ** 2)) / scale)
    return value if np.isfinite(value) else np.inf


def linear_fit(V: np.ndarray, z: np.ndarray, intercept: bool) -> np.ndarray | None:
    A = np.column_stack([np.ones(len(z)), V]) if intercept else V
    if A.shape[1] == 0 or not np.all(np.isfinite(A)) or not np.all(np.isfinite(z)):
        return None
    try:
        with np.errstate(all="ignore"):
            coef, *_ = np.linalg.lstsq(A, z, rcond=None)
            fit = A @ coef
    except np.linalg.LinAlgError:
        return None
    return fit if np.all(np.isfinite(fit)) else None


def denominator_ok(N: np.ndarray, w: np.ndarray, lhs: np.ndarray, lead: np.ndarray, s: np.ndarray) -> bool:
    """Whether ``lead + b*s`` (``b`` from the linear fit) keeps one sign, well away from 0."""
    A = np.column_stack([np.ones(len(lhs)), N, w])
    try:
        coef, *_ = np.linalg.lstsq(A, lhs, rcond=None)
    except np.linalg.LinAlgError:
        return False
    den = lead + coef[-1] * s
    return bool(np.all(np.isfinite(den)) and np.min(np.abs(den)) > 0.05 * np.max(np.abs(den))
                and (np.all(den > 0) or np.all(den < 0)))


def fit_rel(V: np.ndarray, t: np.ndarray) -> float:
    fit = linear_fit(V, t, True)
    return np.inf if fit is None else relative_error(fit, t)


def near_exact(tree: Node, t: np.ndarray, error: float) -> PartFit:
    """A ratio of sums fits its data near-exactly (the seed library keeps only those), so its
    values are taken to be the data: no nonlinear refit of its many constants is needed."""
    return PartFit(tree, t.copy(), max(error, 1e-12), True)


def rank(c: PartFit) -> float:
    """Decades of error plus a price per constant and per node: on a part's estimated data
    (accurate to about 1e-5) an over-fitted ratio of sums must not beat the simple truth."""
    return float(np.log10(max(c.error, 1e-12)) + 0.1 * count_constants(c.tree) + 0.01 * size(c.tree))


def best_parts(cands: Sequence[PartFit], k: int = KEEP) -> list[PartFit]:
    out: list[PartFit] = []
    seen: set[Node] = set()
    for c in sorted(cands, key=rank):
        if c.tree not in seen and np.isfinite(c.error):
            seen.add(c.tree)
            out.append(c)
        if len(out) >= k:
            break
    return out


def combine_sum(t: np.ndarray, a: PartFit, b: PartFit) -> PartFit:
    fit = linear_fit(np.column_stack([a.pred, b.pred]), t, True)
    error = np.inf if fit is None else relative_error(fit, t)
    terms = [p.tree if p.scaled else times_const(p.tree) for p in (a, b)] + [const()]
    return PartFit(total(terms), fit if fit is not None else a.pred, error, True)


def combine_product(t: np.ndarray, a: PartFit, b: PartFit) -> PartFit:
    fit = linear_fit((a.pred * b.pred)[:, None], t, False)
    error = np.inf if fit is None else relative_error(fit, t)
    factors = [a.tree, b.tree] if (a.scaled or b.scaled) else [const(), a.tree, b.tree]
    return PartFit(product(factors), fit if fit is not None else a.pred, error, True)


def sum_terms(tree: Node) -> list[Node | None] | None:
    """The terms of a sum of ``c*term`` and ``c`` (None stands for the constant), or None when
    ``tree`` is not such a sum (a constant may only stand alone)."""
    parts: list[Node] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if node.op == "add":
            stack.extend(reversed(node.args))
        else:
            parts.append(node)
    out: list[Node | None] = []
    for part in parts:
        if part.op == "const":
            out.append(None)
        elif part.op == "mul" and part.args[0].op == "const" and count_constants(part.args[1]) == 0:
            out.append(part.args[1])
        else:
            return None
    return out


@dataclass(frozen=True)
class SubProblem:
    """A (sub)problem of the decomposition: its variables' names, their columns, the target."""

    names: tuple[str, ...]
    X: np.ndarray
    t: np.ndarray

    def columns(self, idx: Sequence[int]) -> SubProblem:
        return SubProblem(tuple(self.names[i] for i in idx), self.X[:, list(idx)], self.t)

    def with_target(self, t: np.ndarray) -> SubProblem:
        return SubProblem(self.names, self.X, t)
