"""Dimensional consistency of a formula, given the units of its variables and of the target.

The rules: ``+`` and ``-`` need equal units; ``*`` and ``/`` add and subtract exponents; a power
needs a numeric exponent (then the exponents scale) or a dimensionless base and exponent;
``sqrt`` halves; ``abs`` and ``-`` keep the unit; every other function (``sin``, ``exp``,
``log``, ...) needs a dimensionless argument and gives a dimensionless result. Numbers are
dimensionless. Free constants are dimensionless too, unless ``dimensionless_constants=False``:
then each constant may carry any unit (as PySR allows) and the formula is consistent when some
assignment of units to its constants makes it so.

Each subexpression's unit is kept as a fixed unit times a product of the constants' unknown
units raised to rational powers, so every rule is a linear equation over the unknowns (one per
base unit, all with the same coefficients). The equations are reduced as they come (exact
Gaussian elimination over fractions); the first one that cannot hold is the reported mismatch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from .core import Formula
from .nodes import Node
from .render import render
from .tree import fold_tree
from .units import DatasetUnits, Unit

__all__ = ["DimensionCheck", "check_dimensions"]

#: Functions whose unit is their argument's unit.
_KEEPS_UNIT = ("neg", "abs")
#: Longest subexpression text quoted in a mismatch sentence.
_QUOTE_CHARS = 48


@dataclass(frozen=True)
class DimensionCheck:
    """The verdict: ``consistent``, and when not, ``reason``, one sentence for a person or a
    model (``"x0 + x1 adds m to s"``); ``unit`` is the formula's unit when it is fixed (no
    constant with a free unit is left in it)."""

    consistent: bool
    reason: str | None = None
    unit: Unit | None = None


@dataclass(frozen=True)
class _Form:
    """A unit: ``fixed`` times the product of ``unknowns[name] ** power``."""

    fixed: Unit
    unknowns: tuple[tuple[str, Fraction], ...] = ()

    def times(self, other: _Form, sign: int = 1) -> _Form:
        powers = dict(self.unknowns)
        for name, power in other.unknowns:
            powers[name] = powers.get(name, Fraction(0)) + sign * power
        fixed = self.fixed * other.fixed if sign > 0 else self.fixed / other.fixed
        return _Form(fixed, tuple((n, p) for n, p in sorted(powers.items()) if p))

    def scaled(self, factor: Fraction) -> _Form:
        return _Form(self.fixed ** factor, tuple((n, p * factor) for n, p in self.unknowns if p * factor))

    def text(self) -> str:
        if not self.unknowns:
            return self.fixed.describe()
        parts = [] if self.fixed.is_dimensionless else [str(self.fixed)]
        for name, power in self.unknowns:
            parts.append(f"unit({name})" if power == 1 else f"unit({name})**({power})")
        return "*".join(parts)


class _Equations:
    """Linear equations ``sum(a[c] * u[c]) + b == 0`` over the constants' unit vectors ``u``,
    kept in reduced echelon form (pivot constant -> row)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[dict[str, Fraction], tuple[Fraction, ...]]] = {}

    def add(self, form: _Form) -> bool:
        """Require ``form`` to be dimensionless; False when no units of the constants can."""
        coeffs = {name: power for name, power in form.unknowns}
        rhs = list(form.fixed.exponents)
        for pivot, (row, row_rhs) in self.rows.items():
            factor = coeffs.get(pivot)
            if not factor:
                continue
            for name, value in row.items():
                coeffs[name] = coeffs.get(name, Fraction(0)) - factor * value
            rhs = [a - factor * b for a, b in zip(rhs, row_rhs, strict=True)]
        coeffs = {n: v for n, v in coeffs.items() if v}
        if not coeffs:
            return not any(rhs)
        pivot = min(coeffs)
        scale = coeffs[pivot]
        row = {n: v / scale for n, v in coeffs.items()}
        new_rhs = tuple(v / scale for v in rhs)
        for other, (other_row, other_rhs) in list(self.rows.items()):
            factor = other_row.get(pivot)
            if factor:
                merged = dict(other_row)
                for name, value in row.items():
                    merged[name] = merged.get(name, Fraction(0)) - factor * value
                self.rows[other] = ({n: v for n, v in merged.items() if v},
                                    tuple(a - factor * b for a, b in zip(other_rhs, new_rhs, strict=True)))
        self.rows[pivot] = (row, new_rhs)
        return True

    def resolve(self, form: _Form) -> _Form:
        """``form`` with every constant fixed by the equations replaced by its unit."""
        powers = dict(form.unknowns)
        fixed = list(form.fixed.exponents)
        for pivot, (row, rhs) in self.rows.items():
            # u[pivot] = -rhs - sum(row[n] u[n] for n != pivot)
            power = powers.pop(pivot, None)
            if not power:
                continue
            fixed = [f - power * r for f, r in zip(fixed, rhs, strict=True)]
            for name, value in row.items():
                if name != pivot:
                    powers[name] = powers.get(name, Fraction(0)) - power * value
        return _Form(Unit(tuple(fixed)), tuple((n, p) for n, p in sorted(powers.items()) if p))


class _Mismatch(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _quote(node: Node) -> str:
    text = render(node)
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 3] + "..."


def _numeric_value(node: Node) -> float | None:
    """The value of a subtree without variables or constants (e.g. ``1/3``), else None."""

    def fold(n: Node, kids: tuple[float | None, ...]) -> float | None:
        if n.op == "num":
            return float(n.value) if n.value is not None else None
        if n.op in ("var", "const") or any(k is None for k in kids):
            return None
        values = [float(k) for k in kids if k is not None]
        try:
            if n.op == "add":
                return values[0] + values[1]
            if n.op == "sub":
                return values[0] - values[1]
            if n.op == "mul":
                return values[0] * values[1]
            if n.op == "div":
                return values[0] / values[1]
            if n.op == "pow":
                return float(values[0] ** values[1])
            if n.op == "neg":
                return -values[0]
            function = getattr(math, {"arcsin": "asin", "arccos": "acos", "arctan": "atan"}.get(n.op, n.op), None)
            return float(function(values[0])) if function is not None else None
        except (ArithmeticError, ValueError, TypeError):
            return None

    value = fold_tree(node, fold)
    return value if value is not None and math.isfinite(value) else None


def _rational(value: float) -> Fraction | None:
    """``value`` as a simple fraction (denominator at most 12) when it is one."""
    guess = Fraction(value).limit_denominator(12)
    return guess if abs(float(guess) - value) <= 1e-9 * max(1.0, abs(value)) else None


def check_dimensions(formula: Formula, units: DatasetUnits | Mapping[str, Unit], target: Unit | None = None,
                     *, dimensionless_constants: bool = True) -> DimensionCheck:
    """Whether ``formula`` is dimensionally consistent with ``units`` (a :class:`DatasetUnits`,
    or variable name -> :class:`Unit` plus ``target``); see the module docstring for the rules.

    A variable without a unit is a ``KeyError`` that names it (the units are the caller's
    setup, not the formula's fault).
    """
    table: dict[str, Unit] = units.as_dict() if isinstance(units, DatasetUnits) else dict(units)
    want: Unit | None = target
    if want is None and isinstance(units, DatasetUnits):
        want = units.target
    equations = _Equations()

    def need_dimensionless(form: _Form, reason: str) -> None:
        if not equations.add(form):
            raise _Mismatch(reason)

    def shown(form: _Form) -> str:
        return equations.resolve(form).text()

    def fold(node: Node, kids: tuple[tuple[_Form, Node], ...]) -> tuple[_Form, Node]:
        op = node.op
        if op == "num":
            return _Form(Unit.dimensionless()), node
        if op == "var":
            name = str(node.name)
            if name not in table:
                raise KeyError(f"no unit for the variable {name!r}; give units for "
                               f"{', '.join(sorted(table)) or 'every variable'} and {name}")
            return _Form(table[name]), node
        if op == "const":
            if dimensionless_constants:
                return _Form(Unit.dimensionless()), node
            return _Form(Unit.dimensionless(), ((str(node.name), Fraction(1)),)), node
        if op in ("add", "sub"):
            (left, lnode), (right, rnode) = kids
            difference = left.times(right, -1)
            if not equations.add(difference):
                if op == "add":
                    raise _Mismatch(f"{_quote(node)} adds {shown(left)} to {shown(right)}")
                raise _Mismatch(f"{_quote(node)} subtracts {shown(right)} from {shown(left)}")
            return left, node
        if op == "mul":
            (left, _), (right, _) = kids
            return left.times(right), node
        if op == "div":
            (left, _), (right, _) = kids
            return left.times(right, -1), node
        if op == "pow":
            (base, bnode), (exponent, enode) = kids
            value = _numeric_value(enode)
            power = _rational(value) if value is not None else None
            if power is not None:
                return base.scaled(power), node
            need_dimensionless(exponent, f"the exponent of {_quote(node)} must be dimensionless, "
                                         f"but {_quote(enode)} has {shown(exponent)}")
            kind = "not a fixed number" if value is None else "not a simple fraction"
            need_dimensionless(base, f"{_quote(node)} raises {shown(base)} to the power "
                                     f"{_quote(enode)}, which is {kind}; only a dimensionless "
                                     f"base can take such a power (use an exponent such as 2 "
                                     f"or 1/2)")
            return _Form(Unit.dimensionless()), node
        (arg, anode) = kids[0]
        if op in _KEEPS_UNIT:
            return arg, node
        if op == "sqrt":
            return arg.scaled(Fraction(1, 2)), node
        need_dimensionless(arg, f"{op}() needs a dimensionless argument, but {_quote(anode)} has "
                                f"{shown(arg)}")
        return _Form(Unit.dimensionless()), node

    try:
        result, _ = fold_tree(formula.tree, fold)
        if want is not None:
            have = shown(result)
            if not equations.add(result.times(_Form(want), -1)):
                return DimensionCheck(False, f"the result has {have} where the target has "
                                             f"{want.describe()}")
    except _Mismatch as exc:
        return DimensionCheck(False, exc.reason)
    final = equations.resolve(result)
    return DimensionCheck(True, None, final.fixed if not final.unknowns else None)
