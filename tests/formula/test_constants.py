"""The closed-form catalog shared by the simplifier and the exactness judge (sr_dist.formula.constants)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sr_dist.formula.constants import (
    CATALOG,
    E_MULTIPLES,
    FUNCTIONS_OF_RATIONALS,
    PI_MULTIPLE_ROOTS,
    PI_MULTIPLES,
    PI_POWERS,
    RECOVERY_FAMILIES,
    SIMPLIFIER_FAMILIES,
    OfRational,
    Scaled,
)


def test_both_modules_draw_their_families_from_the_one_catalog() -> None:
    assert set(RECOVERY_FAMILIES) <= set(CATALOG)
    assert set(SIMPLIFIER_FAMILIES) <= set(CATALOG)
    assert len(set(CATALOG)) == len(CATALOG)
    # The judge's order: plain pi multiples, then the functions of rationals, then the roots.
    assert RECOVERY_FAMILIES == (*PI_MULTIPLES, *FUNCTIONS_OF_RATIONALS, *PI_MULTIPLE_ROOTS)
    assert [f.power for f in PI_MULTIPLES] == list(PI_POWERS) == [0, 1, -1, 2, -2, 3, -3]
    # The simplifier's subset: p/q, p/q*pi, p/q/pi, p/q*e, the forms it writes as short text.
    assert SIMPLIFIER_FAMILIES == (Scaled("pi", 0), Scaled("pi", 1), Scaled("pi", -1), Scaled("e", 1))
    assert all(not f.root and abs(f.power) <= 1 for f in SIMPLIFIER_FAMILIES)
    assert E_MULTIPLES[0] in SIMPLIFIER_FAMILIES and E_MULTIPLES[0] not in RECOVERY_FAMILIES


def test_families_are_frozen_values() -> None:
    family = PI_MULTIPLES[1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        family.power = 2  # type: ignore[misc]
    assert hash(Scaled("pi", 1)) == hash(family) and Scaled("pi", 1) == family


@pytest.mark.parametrize("family,p,q,value", [
    (Scaled("pi", 0), 3, 4, 0.75),
    (Scaled("pi", 1), 3, 4, 0.75 * math.pi),
    (Scaled("pi", -2), 1, 4, 1 / (4 * math.pi**2)),
    (Scaled("pi", 1, root=True), 2, 1, math.sqrt(2 * math.pi)),
    (Scaled("e", 1), 1, 2, math.e / 2),
])
def test_a_scaled_member_and_its_numerator(family: Scaled, p: int, q: int, value: float) -> None:
    assert family.value(p, q) == pytest.approx(value, rel=1e-15)
    assert round(family.target(value, q)) == p
    assert family.named == (None if family.power == 0 else family.base)


@pytest.mark.parametrize("function,p,q,value", [
    ("log", 7, 5, math.log(1.4)),
    ("exp", -3, 10, math.exp(-0.3)),
    ("cube", 8, 5, 4.096),
    ("sin", 5, 2, math.sin(2.5)),
    ("cos", 4, 5, math.cos(0.8)),
])
def test_a_function_of_a_rational_and_its_numerator(function: str, p: int, q: int, value: float) -> None:
    family = next(f for f in FUNCTIONS_OF_RATIONALS if f.function == function)
    assert family.value(p, q) == pytest.approx(value, rel=1e-15)
    assert p in family.numerators(value, q)
    assert family.admits(p, q)
    assert family.digits(p, q) == abs(p) + q


def test_the_bounds_of_the_functions_of_rationals() -> None:
    log, exp, cube, sin, cos = (OfRational(f) for f in ("log", "exp", "cube", "sin", "cos"))
    assert not log.admits(1, 1) and log.admits(10, 1) and not log.admits(11, 1)
    assert log.numerators(math.log(11), 1) == ()
    assert not exp.admits(0, 1) and exp.admits(-10, 1) and not exp.admits(101, 10)
    assert cube.admits(30, 7) and not cube.admits(31, 7)
    assert sin.admits(31, 10) and not sin.admits(32, 10) and not cos.admits(0, 3)
    assert sin.numerators(1.5, 4) == () and cos.numerators(1.5, 4) == ()
    assert len(sin.numerators(0.5, 6)) == 2  # asin and pi - asin
