"""The Unit value: parsing text, vectors and mappings, the algebra, and the errors' wording."""

from __future__ import annotations

from fractions import Fraction

import pytest

from sr_dist.formula.units import BASE_UNITS, DatasetUnits, Unit, UnitError, parse_unit

# text -> the same unit written in base units as a mapping
PARSES = [
    ("kg*m/s**2", {"kg": 1, "m": 1, "s": -2}),
    ("kg m / s^2", {"kg": 1, "m": 1, "s": -2}),
    ("m^2", {"m": 2}),
    ("m**(1/2)", {"m": Fraction(1, 2)}),
    ("m^0.5", {"m": Fraction(1, 2)}),
    ("s**-2", {"s": -2}),
    ("s^(-1)", {"s": -1}),
    ("(m/s)^2", {"m": 2, "s": -2}),
    ("1/(s*V)", {"s": -1, "V": -1}),
    ("kg·m²/s²", {"kg": 1, "m": 2, "s": -2}),
    ("s⁻¹", {"s": -1}),
    ("", {}),
    ("1", {}),
    ("dimensionless", {}),
    ("rad", {}),
    ("N", {"kg": 1, "m": 1, "s": -2}),
    ("J", {"kg": 1, "m": 2, "s": -2}),
    ("W", {"kg": 1, "m": 2, "s": -3}),
    ("Pa", {"kg": 1, "m": -1, "s": -2}),
    ("Hz", {"s": -1}),
    ("T", {"V": 1, "s": 1, "m": -2}),
    ("Wb", {"V": 1, "s": 1}),
    ("km/ms", {"m": 1, "s": -1}),
    ("g", {"kg": 1}),
    ("mol*K", {"mol": 1, "K": 1}),
    ("cd", {"cd": 1}),
    # Charge and current through the volt, as the Feynman table has them.
    ("C", {"kg": 1, "m": 2, "s": -2, "V": -1}),
    ("A", {"kg": 1, "m": 2, "s": -3, "V": -1}),
    ("Ω", {"V": 2, "s": 3, "kg": -1, "m": -2}),
]


@pytest.mark.parametrize(("text", "powers"), PARSES)
def test_parse(text: str, powers: dict[str, int | Fraction]) -> None:
    assert parse_unit(text) == Unit.of(powers)


@pytest.mark.parametrize(("left", "right"), [
    ("V*A", "W"), ("N*m", "J"), ("J/s", "W"), ("C/s", "A"), ("Ω*A", "V"), ("Pa*m**2", "N"),
    ("F*V", "C"), ("H*A", "Wb"), ("kg*m**2/s**2", "J"),
])
def test_derived_units_agree(left: str, right: str) -> None:
    assert parse_unit(left) == parse_unit(right)


@pytest.mark.parametrize(("text", "fragment"), [
    ("kg*x", "unknown unit 'x'"),
    ("min", "unknown unit 'min'"),
    ("m^", "ends too early"),
    ("m^a", "expected a number as exponent"),
    ("2*m", "no numbers except 1"),
    ("m)", "unexpected ')'"),
    ("(m", "ends too early"),
    ("m**(1/0)", "division by zero"),
    ("m % s", "cannot read the unit"),
])
def test_parse_errors_say_what_was_not_understood(text: str, fragment: str) -> None:
    with pytest.raises(UnitError, match=None) as info:
        parse_unit(text)
    assert fragment in str(info.value)


def test_vectors_mappings_and_algebra() -> None:
    force = Unit.from_exponents([1, -2, 1, 0, 0, 0, 0, 0])
    assert force == parse_unit("N") == Unit.coerce({"kg": 1, "m": 1, "s": -2}) == Unit.coerce("N")
    # The Feynman table's five columns (m, s, kg, K, V).
    assert Unit.from_exponents([2, -3, 1, 0, -1]) == parse_unit("A")
    assert Unit.coerce([0, 0, 0, 1, 0]) == parse_unit("K")
    assert force * parse_unit("m") == parse_unit("J")
    assert parse_unit("J") / parse_unit("s") == parse_unit("W")
    assert parse_unit("m**2") ** Fraction(1, 2) == parse_unit("m")
    assert (parse_unit("m") / parse_unit("m")).is_dimensionless
    assert len(force.exponents) == len(BASE_UNITS)
    assert hash(force) == hash(parse_unit("kg*m/s**2"))
    with pytest.raises(UnitError, match="8 entries"):
        Unit.from_exponents([1, 2])
    with pytest.raises(UnitError, match="unknown base unit 'furlong'"):
        Unit.of({"furlong": 1})
    with pytest.raises(UnitError, match="exponent"):
        Unit.of({"m": "two"})


@pytest.mark.parametrize("text", ["kg*m/s**2", "1/s", "m**(1/2)", "kg*m**2/(s**3*V)", "1", "K*mol"])
def test_str_parses_back(text: str) -> None:
    unit = parse_unit(text)
    assert parse_unit(str(unit)) == unit


def test_dataset_units_need_every_name() -> None:
    units = DatasetUnits.from_mapping({"x": "m", "t": "s", "v": [1, -1, 0, 0, 0]}, ("x", "t"), "v")
    assert units.of("x") == parse_unit("m") and units.target == parse_unit("m/s")
    assert units.as_text("v") == {"x": "m", "t": "s", "v": "m/s"}
    with pytest.raises(UnitError, match="no unit for t") as info:
        DatasetUnits.from_mapping({"x": "m", "v": "m/s", "w": "s"}, ("x", "t"), "v")
    assert "w is not a variable" in str(info.value)
    with pytest.raises(UnitError, match="unit of 'x': unknown unit 'meter'"):
        DatasetUnits.from_mapping({"x": "meter", "t": "s", "v": "m/s"}, ("x", "t"), "v")
