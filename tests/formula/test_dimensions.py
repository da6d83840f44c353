"""The dimensional check: a table of formulas, units and the expected verdict and sentence."""

from __future__ import annotations

import pytest

from sr_dist.formula import parse_formula
from sr_dist.formula.dimensions import check_dimensions
from sr_dist.formula.units import DatasetUnits, parse_unit

# x: m, t: s, v: m/s, m: kg, r: 1 (dimensionless)
UNITS = {"x": "m", "t": "s", "v": "m/s", "m": "kg", "r": "1"}
NAMES = tuple(UNITS)

# formula, target unit, dimensionless constants?, expected: None (consistent) or a sentence
CASES = [
    ("x/t", "m/s", True, None),
    ("x + v*t", "m", True, None),
    ("x + t", "m", True, "x + t adds m to s"),
    ("x - t", "m", True, "x - t subtracts s from m"),
    ("x/t", "m", True, "the result has m/s where the target has m"),
    ("m*v**2/2", "J", True, None),
    ("sqrt(x*x)", "m", True, None),
    ("x**(1/3)", "m**(1/3)", True, None),
    ("x**-2", "1/m**2", True, None),
    ("-x + abs(x)", "m", True, None),
    ("r**r", "1", True, None),
    ("sin(x)", "1", True, "sin() needs a dimensionless argument, but x has m"),
    ("exp(x/(v*t))", "1", True, None),
    ("log(t)", "1", True, "log() needs a dimensionless argument, but t has s"),
    ("cos(r) + x", "m", True, "cos(r) + x adds dimensionless to m"),
    ("x**r", "m", True, "x**r raises m to the power r, which is not a fixed number; only a "
     "dimensionless base can take such a power (use an exponent such as 2 or 1/2)"),
    ("r**t", "1", True, "the exponent of r**t must be dimensionless, but t has s"),
    ("x**pi", "1", True, "x**pi raises m to the power pi, which is not a simple fraction; only "
     "a dimensionless base can take such a power (use an exponent such as 2 or 1/2)"),
    # Constants: dimensionless by default ...
    ("c0*x", "m", True, None),
    ("c0*x", "m/s", True, "the result has m where the target has m/s"),
    ("x + c0", "m", True, "x + c0 adds m to dimensionless"),
    # ... or wildcards: consistent when some units of the constants make it so.
    ("c0*x", "m/s", False, None),
    ("x + c0", "m", False, None),
    ("c0*x + c1*t", "kg", False, None),
    ("exp(c0*t)*v", "m/s", False, None),
    ("c0*x + t", "m", False, "the result has s where the target has m"),
    ("c0*x + c0*t", "m", False, "c0*x + c0*t adds m*unit(c0) to s*unit(c0)"),
    ("exp(c0*t) + x", "m", False, "exp(c0*t) + x adds dimensionless to m"),
    ("sin(c0*x) * x**c1", "m", False, "x**c1 raises m to the power c1, which is not a fixed "
     "number; only a dimensionless base can take such a power (use an exponent such as 2 or 1/2)"),
    ("c0**2*x + t", "s", False, None),
    ("(x + c0)/v", "s", False, None),
    ("(x + c0)/v + c0", "s", False, "(x + c0)/v + c0 adds s to m"),
]


@pytest.mark.parametrize(("text", "target", "dimensionless", "expected"), CASES)
def test_check_table(text: str, target: str, dimensionless: bool, expected: str | None) -> None:
    units = DatasetUnits.from_mapping({**UNITS, "y": target}, NAMES, "y")
    result = check_dimensions(parse_formula(text, NAMES), units,
                              dimensionless_constants=dimensionless)
    assert result.consistent is (expected is None)
    assert result.reason == expected
    if expected is None and dimensionless:
        assert result.unit == parse_unit(target)


def test_without_a_target_the_unit_is_reported() -> None:
    table = {name: parse_unit(unit) for name, unit in UNITS.items()}
    result = check_dimensions(parse_formula("m*x/t**2", NAMES), table)
    assert result.consistent and result.unit == parse_unit("N")
    # A constant whose unit is still free leaves the result's unit open.
    assert check_dimensions(parse_formula("c0*x", NAMES), table,
                            dimensionless_constants=False).unit is None


def test_a_variable_without_a_unit_is_a_setup_error() -> None:
    with pytest.raises(KeyError, match="no unit for the variable 'x'"):
        check_dimensions(parse_formula("x", ("x",)), {}, parse_unit("m"))
