"""The embedded AI Feynman equation table (``FeynmanEquations.csv``, shipped as package data).

The table is read once, lazily. Each row names an equation (``Filename``, e.g. ``I.6.2``), its
output, its formula and up to ten variables with sampling ranges. The ``# variables`` column of
the original table disagrees with the listed variables in a few rows; the listed names and
ranges are what counts here.

``FeynmanUnits.csv`` (also package data) gives the SI unit of every variable and output of the
table as exponents of m, s, kg, K and V; :func:`feynman_units` reads it.
"""

from __future__ import annotations

import csv
import difflib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from types import MappingProxyType

from ..formula.units import DatasetUnits, Unit

#: Package resource holding the table.
TABLE_RESOURCE = "FeynmanEquations.csv"
#: Package resource holding the units of the table's variables (m, s, kg, T = kelvin, V).
UNITS_RESOURCE = "FeynmanUnits.csv"
#: Corrections to the units table, applied when it is read: ``mu_drift`` is a mobility
#: (drift velocity per force, v = mu*F: s/kg, as the table's own ``mob`` row has it); the
#: table lists it as kg/s, the inverse.
UNIT_ERRATA: Mapping[str, str] = MappingProxyType({"mu_drift": "s/kg"})


@dataclass(frozen=True)
class FeynmanVariable:
    """One input variable and its uniform sampling range ``[low, high]``."""

    name: str
    low: float
    high: float


@dataclass(frozen=True)
class FeynmanEquation:
    """One row of the table."""

    filename: str
    number: int
    output: str
    formula: str
    variables: tuple[FeynmanVariable, ...]

    @property
    def variable_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variables)


def _read_table(text: str) -> tuple[FeynmanEquation, ...]:
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        if not row.get("Filename"):
            continue
        variables = []
        for i in range(1, 11):
            name = (row.get(f"v{i}_name") or "").strip()
            if name:
                variables.append(
                    FeynmanVariable(name, float(row[f"v{i}_low"]), float(row[f"v{i}_high"]))
                )
        rows.append(
            FeynmanEquation(
                filename=row["Filename"].strip(),
                number=int(row["Number"]),
                output=row["Output"].strip(),
                formula=row["Formula"].strip(),
                variables=tuple(variables),
            )
        )
    return tuple(rows)


@lru_cache(maxsize=1)
def feynman_equations() -> tuple[FeynmanEquation, ...]:
    """All equations of the embedded table, in file order (parsed once)."""
    text = resources.files(__package__).joinpath(TABLE_RESOURCE).read_text(encoding="utf-8")
    return _read_table(text)


@lru_cache(maxsize=1)
def _by_name() -> dict[str, FeynmanEquation]:
    return {eq.filename: eq for eq in feynman_equations()}


def feynman_equation(name: str) -> FeynmanEquation:
    """Look an equation up by its ``Filename``; a ``KeyError`` message suggests close names."""
    table = _by_name()
    if name in table:
        return table[name]
    close = difflib.get_close_matches(name, table.keys(), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise KeyError(
        f"unknown Feynman equation {name!r}{hint} "
        f"({len(table)} equations, e.g. I.6.2, II.6.15a, III.4.33)"
    )


@lru_cache(maxsize=1)
def feynman_units() -> Mapping[str, Unit]:
    """The unit of every variable of the table, by name (read once; :data:`UNIT_ERRATA`
    applied)."""
    text = resources.files(__package__).joinpath(UNITS_RESOURCE).read_text(encoding="utf-8")
    units: dict[str, Unit] = {}
    for row in csv.DictReader(io.StringIO(text)):
        name = (row.get("Variable") or "").strip()
        if name:
            units[name] = Unit.from_exponents([row[k].strip() for k in ("m", "s", "kg", "T", "V")])
    for name, unit in UNIT_ERRATA.items():
        units[name] = Unit.parse(unit)
    return MappingProxyType(units)


def feynman_equation_units(eq: FeynmanEquation) -> DatasetUnits:
    """The units of an equation's variables and output, from :func:`feynman_units`."""
    table = feynman_units()
    names = (*eq.variable_names, eq.output)
    missing = [name for name in names if name not in table]
    if missing:  # pragma: no cover - the shipped tables cover every equation (a test checks)
        raise KeyError(f"the Feynman units table has no unit for {', '.join(missing)}")
    return DatasetUnits.from_mapping({name: table[name] for name in names}, eq.variable_names,
                                     eq.output)
