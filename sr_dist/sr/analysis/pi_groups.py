"""Buckingham pi analysis of a dataset's units: the dimensionless groups of its variables and
a power-law prefactor with the target's units, so that ``target = prefactor * f(groups)``.

Exact arithmetic over fractions, by the structure core (:mod:`sr_dist.sr.structure.pi_groups`,
the computation the offline proposer's π-group seeds read): the groups are a basis of the null
space of the dimension matrix (one row per base unit, one column per variable), each scaled to
the smallest integer exponents; the prefactor is one solution of ``matrix @ p = target unit``
(the variables listed later are the ones left out of it, so it is one choice among several
whenever groups exist: any prefactor times a power of the groups is as good).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from sr_dist.formula.units import BASE_UNITS, DatasetUnits, Unit
from sr_dist.sr.analysis._common import fresh_name
from sr_dist.sr.structure.pi_groups import unit_basis

__all__ = ["NO_UNITS", "buckingham_groups", "power_product"]

#: What the analysis says about a dataset without units.
NO_UNITS = ("the dataset has no units, so there are no dimensionless groups to find; give "
            "dataset.units (units: feynman for a Feynman dataset, or a mapping from each variable "
            "and the target to its unit) to use dimensional analysis")


def _exponent_text(power: Fraction) -> str:
    return str(power.numerator) if power.denominator == 1 else f"({power.numerator}/{power.denominator})"


def power_product(names: Sequence[str], powers: Sequence[Fraction]) -> str:
    """``prod(name**power)`` in the formula language, negative powers as a denominator:
    ``q1**2/(epsilon*r**2)``; ``1`` for the empty product."""
    def factor(name: str, power: Fraction) -> str:
        return name if power == 1 else f"{name}**{_exponent_text(power)}"

    up = [factor(n, p) for n, p in zip(names, powers, strict=True) if p > 0]
    down = [factor(n, -p) for n, p in zip(names, powers, strict=True) if p < 0]
    top = "*".join(up) if up else "1"
    if not down:
        return top
    return f"{top}/{down[0]}" if len(down) == 1 else f"{top}/({'*'.join(down)})"


def _exponents(names: Sequence[str], powers: Sequence[Fraction]) -> dict[str, str]:
    return {n: str(p) for n, p in zip(names, powers, strict=True) if p}


def buckingham_groups(units: DatasetUnits | None, target: str) -> dict[str, Any]:
    """The dimensionless groups and the prefactor for ``units`` (``has_units`` False and a
    ``reason`` when there are none), from the structure core's
    :func:`~sr_dist.sr.structure.pi_groups.unit_basis`: the groups the offline proposer seeds."""
    if units is None:
        return {"has_units": False, "reason": NO_UNITS}
    names = list(units.names)
    used = [i for i in range(len(BASE_UNITS))
            if any(u.exponents[i] for _, u in units.variables) or units.target.exponents[i]]
    target_unit: Unit = units.target
    basis = unit_basis([unit.exponents for _, unit in units.variables], target_unit.exponents)
    groups: list[dict[str, Any]] = [
        {"formula": power_product(names, vector), "exponents": _exponents(names, vector)} for vector in basis.groups]
    out: dict[str, Any] = {
        "has_units": True,
        "units": units.as_text(target),
        "base_units": [BASE_UNITS[i] for i in used],
        "rank": basis.rank,
        "groups": groups,
    }
    prefactor_powers = basis.particular
    if prefactor_powers is None:
        out["prefactor"] = None
        out["reason"] = (f"no product of powers of the variables has the target's unit "
                         f"({target_unit.describe()}): the law needs a dimensional constant, or the "
                         "units are incomplete")
        return out
    prefactor = power_product(names, prefactor_powers)
    out["prefactor"] = {"formula": prefactor, "exponents": _exponents(names, prefactor_powers)}
    pis = [g["formula"] for g in groups]
    function = f"phi({', '.join(pis)})" if pis else "constant"
    out["form"] = f"{target} = {function}" if prefactor == "1" else f"{target} = {prefactor} * {function}"
    scale = "" if prefactor == "1" else f"*{_wrap(prefactor)}"
    powers = "".join(f"*{_wrap(p)}**{fresh_name('b', k, names)}" for k, p in enumerate(pis))
    out["suggestion"] = f"{fresh_name('c', 0, names)}{scale}{powers}"
    return out


def _wrap(text: str) -> str:
    return text if all(ch.isalnum() or ch == "_" for ch in text) else f"({text})"
