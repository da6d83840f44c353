"""Source: sparse exact ratios of polynomials (Levy's linearised fit, :mod:`sr_dist.sr.structure.rational`) as trees."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.tree import binary, const, num, product, total, var
from sr_dist.sr.structure.rational import rational_fits

__all__ = ["polynomial", "rational_seeds"]


def polynomial(names: Sequence[str], exps: Sequence[tuple[int, ...]], lead: int | None) -> Node:
    """``sum(c*m)`` over the monomials; the ``lead`` one (if any) without its constant."""
    terms = []
    for i, e in enumerate(exps):
        factors = [var(n) if p == 1 else binary("pow", var(n), num(float(p)))
                   for n, p in zip(names, e, strict=True) if p]
        mono = product(factors) if factors else None
        if i == lead:
            terms.append(mono if mono is not None else num(1.0))
        else:
            terms.append(const() if mono is None else binary("mul", const(), mono))
    return total(terms)


def rational_seeds(X: np.ndarray, y: np.ndarray, names: Sequence[str]) -> list[tuple[float, Node]]:
    """``(relative error on the rows, P/Q)`` for each fit of :func:`rational_fits` over the
    columns ``names`` of ``X``; a polynomial stands alone, without a denominator."""
    out: list[tuple[float, Node]] = []
    for fit in rational_fits(X, y):
        top = polynomial(names, fit.numerator, None)
        out.append((fit.error, top if fit.lead is None else binary("div", top, polynomial(names, fit.denominator, fit.lead))))
    return out
