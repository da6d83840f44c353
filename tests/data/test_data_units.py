"""Units on datasets: the Feynman units table (shipped as package data) and units given by hand."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest

from sr_dist.data import (
    DatasetUnitsError,
    feynman_equation,
    feynman_equation_units,
    feynman_equations,
    feynman_units,
    load_dataset,
)
from sr_dist.data.feynman import UNIT_ERRATA, UNITS_RESOURCE
from sr_dist.formula import check_dimensions, parse_formula, parse_unit

ROOT = Path(__file__).resolve().parents[2]


def test_units_table_is_package_data_the_wheel_ships() -> None:
    assert resources.files("sr_dist.data").joinpath(UNITS_RESOURCE).is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["sr_dist"]
    assert any(fnmatch(f"data/{UNITS_RESOURCE}", pattern) for pattern in patterns)


def test_every_equation_has_units_and_its_law_is_consistent_with_them() -> None:
    inconsistent = []
    for eq in feynman_equations():
        units = feynman_equation_units(eq)
        assert units.names == eq.variable_names
        verdict = check_dimensions(parse_formula(eq.formula, eq.variable_names), units)
        if not verdict.consistent:
            inconsistent.append((eq.filename, verdict.reason))
    assert inconsistent == []
    assert len(feynman_units()) == 120


def test_the_erratum_is_what_makes_the_drift_law_consistent() -> None:
    eq = feynman_equation("I.43.16")
    assert "mu_drift" in UNIT_ERRATA and "mu_drift" in eq.variable_names
    units = feynman_equation_units(eq).as_dict()
    units["mu_drift"] = parse_unit("kg/s")  # as the table prints it
    verdict = check_dimensions(parse_formula(eq.formula, eq.variable_names), units,
                               parse_unit("m/s"))
    assert not verdict.consistent


def test_feynman_units_on_request_only() -> None:
    plain = load_dataset("feynman:I.12.11", n=50)
    with_units = load_dataset("feynman:I.12.11", n=50, units="feynman")
    assert plain.units is None
    assert with_units.units is not None
    assert with_units.units.of("q") == parse_unit("C")
    assert with_units.units.target == parse_unit("N")
    # Units judge candidates; they do not change the data.
    assert with_units.content_hash == plain.content_hash


def test_units_by_hand_for_a_table(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("x,t,v\n" + "\n".join(f"{i + 1},{i + 2},{(i + 1) / (i + 2)}" for i in range(12)))
    ds = load_dataset(f"csv:{path}", units={"x": "m", "t": "s", "v": "m/s"})
    assert ds.units is not None and ds.units.target == parse_unit("m/s")
    vector = load_dataset(f"csv:{path}", units={"x": [1, 0, 0, 0, 0, 0, 0, 0], "t": {"s": 1},
                                                "v": "m*s**-1"})
    assert vector.units == ds.units
    with pytest.raises(DatasetUnitsError, match="no unit for t"):
        load_dataset(f"csv:{path}", units={"x": "m", "v": "m/s"})
    with pytest.raises(DatasetUnitsError, match="unit of 't': unknown unit 'sec'"):
        load_dataset(f"csv:{path}", units={"x": "m", "t": "sec", "v": "m/s"})
    with pytest.raises(DatasetUnitsError, match="needs a feynman: dataset"):
        load_dataset(f"csv:{path}", units="feynman")
    with pytest.raises(DatasetUnitsError, match="must be 'feynman' or a mapping"):
        load_dataset(f"csv:{path}", units="SI")


def test_with_units_refuses_other_names() -> None:
    ds = load_dataset("feynman:I.12.11", n=50)
    other = feynman_equation_units(feynman_equation("I.6.2"))
    with pytest.raises(DatasetUnitsError, match="the units cover sigma, theta"):
        ds.with_units(other)
    assert ds.with_units(None).units is None
