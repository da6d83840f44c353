"""Buckingham π groups of a dimension matrix: exact arithmetic over fractions, no formula trees.

The units of the variables are the columns of the exponent matrix ``D`` (one row per base
unit), the target's unit is ``u``. Every dimensionally consistent law is
``y = x**p * g(π_1, ..., π_k)``: ``D p = u`` fixes the prefactor's exponents ``p`` (one
solution: the pivot variables of the reduced row echelon form solved, the free ones at 0), and
the π groups, monomials whose exponent vectors span the null space of ``D``, are dimensionless
(one per free variable, which it holds to a positive power, scaled to the smallest integer
exponents: a group may be raised to any power). Both the ``dimensional_groups`` analysis tool
and the offline proposer's π-group seeds read :func:`unit_basis`, so they see the same groups.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["UnitBasis", "integer_direction", "rref", "unit_basis"]


def rref(rows: Sequence[Sequence[Fraction]]) -> tuple[list[list[Fraction]], list[int]]:
    """The reduced row echelon form of ``rows`` (exact, zero rows dropped) and its pivot
    columns, in order: row ``i`` of the result has its leading 1 in column ``pivots[i]``."""
    m = [[Fraction(v) for v in row] for row in rows]
    pivots: list[int] = []
    r = 0
    for c in range(len(m[0]) if m else 0):
        pivot = next((i for i in range(r, len(m)) if m[i][c] != 0), None)
        if pivot is None:
            continue
        m[r], m[pivot] = m[pivot], m[r]
        lead = m[r][c]
        m[r] = [v / lead for v in m[r]]
        for i in range(len(m)):
            if i != r and m[i][c] != 0:
                factor = m[i][c]
                m[i] = [a - factor * b for a, b in zip(m[i], m[r], strict=True)]
        pivots.append(c)
        r += 1
        if r == len(m):
            break
    return m[:r], pivots


def integer_direction(vector: Sequence[Fraction]) -> list[Fraction]:
    """``vector`` scaled to the smallest integer entries with the same direction (unchanged
    when it is all zeros)."""
    denominators = [v.denominator for v in vector if v]
    if not denominators:
        return list(vector)
    scaled = [v * math.lcm(*denominators) for v in vector]
    divisor = math.gcd(*(int(v) for v in scaled if v))
    return [v / divisor for v in scaled]


@dataclass(frozen=True)
class UnitBasis:
    """The π groups and the prefactor of a dimension matrix, by variable index."""

    #: Rank of ``D``; its pivot variables, in order (the ones the prefactor is solved for).
    rank: int
    pivots: tuple[int, ...]
    #: The free variables, in order, and the integer exponent vector of each one's π group
    #: (the free variable at a positive power, the pivot variables, zeros elsewhere).
    free: tuple[int, ...]
    groups: tuple[tuple[Fraction, ...], ...]
    #: The prefactor's exponents (free variables at 0), or None when no product of powers of
    #: the variables has the target's unit (``D p = u`` has no solution).
    particular: tuple[Fraction, ...] | None


def unit_basis(columns: Sequence[Sequence[Fraction]], target: Sequence[Fraction]) -> UnitBasis:
    """The basis of ``D`` (``columns[j]``: the unit exponents of variable ``j``, one per base
    unit) and ``u`` (``target``), from the reduced row echelon form of ``[D | u]`` (its first
    columns are the reduced form of ``D``)."""
    n, width = len(columns), len(target)
    if any(len(c) != width for c in columns):
        raise ValueError(f"every unit needs {width} exponents (one per base unit), as the target's has")
    rows = [[Fraction(c[d]) for c in columns] + [Fraction(target[d])] for d in range(width)]
    reduced, all_pivots = rref(rows)
    pivots = [c for c in all_pivots if c < n]
    particular: tuple[Fraction, ...] | None = None
    if n not in all_pivots:  # the target's column is no pivot: D p = u has a solution
        values = [Fraction(0)] * n
        for row, c in zip(reduced[: len(pivots)], pivots, strict=True):
            values[c] = row[-1]
        particular = tuple(values)
    free = [j for j in range(n) if j not in pivots]
    groups = []
    for j in free:
        vector = [Fraction(0)] * n
        vector[j] = Fraction(1)
        for row, c in zip(reduced[: len(pivots)], pivots, strict=True):
            vector[c] = -row[j]
        groups.append(tuple(integer_direction(vector)))
    return UnitBasis(len(pivots), tuple(pivots), tuple(free), tuple(groups), particular)
