"""Exact linear algebra over unit exponents, for dimensional analysis (Buckingham π).

One home for what both the ``dimensional_groups`` tool and evolve's dimensional seeds need:
the reduced row echelon form of a dimension matrix over fractions (its pivots solve for the
prefactor, its free columns give the π groups) and the smallest integer exponents of a group
(a dimensionless group may be raised to any power, so its direction is what matters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

__all__ = ["integer_direction", "rref"]


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
