"""The exact linear algebra dimensional analysis rests on (sr_dist.sr.structure.pi_groups)."""

from __future__ import annotations

from fractions import Fraction as F

from hypothesis import given
from hypothesis import strategies as st

from sr_dist.sr.structure.pi_groups import integer_direction, rref

small = st.integers(min_value=-4, max_value=4).map(F)


@given(st.integers(1, 4).flatmap(lambda rows: st.integers(1, 5).flatmap(
    lambda cols: st.lists(st.lists(small, min_size=cols, max_size=cols), min_size=rows,
                          max_size=rows))))
def test_rref_has_unit_pivots_and_keeps_the_null_space(rows: list[list[F]]) -> None:
    reduced, pivots = rref(rows)
    assert len(reduced) == len(pivots) and pivots == sorted(pivots)
    for i, c in enumerate(pivots):
        assert [row[c] for row in reduced] == [F(int(i == k)) for k in range(len(reduced))]
    # Each free column's null vector (the π group construction) solves the original rows.
    width = len(rows[0])
    for free in (c for c in range(width) if c not in pivots):
        vector = [F(0)] * width
        vector[free] = F(1)
        for i, c in enumerate(pivots):
            vector[c] = -reduced[i][free]
        assert all(sum(a * b for a, b in zip(row, vector, strict=True)) == 0 for row in rows)


def test_integer_direction_is_the_smallest_integer_multiple() -> None:
    assert integer_direction([F(1), F(-1, 2), F(3, 4)]) == [F(4), F(-2), F(3)]
    assert integer_direction([F(2), F(0), F(-4)]) == [F(1), F(0), F(-2)]
    assert integer_direction([F(0), F(0)]) == [F(0), F(0)]
