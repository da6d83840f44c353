"""Exact recovery: is a fitted candidate the ground-truth formula, up to the values of its constants?

The fitted constants are floats; the truth has exact ones (``1/2``, ``4*pi``, ``sqrt(2*pi)``).
Each fitted constant is snapped to the simplest closed form it matches to a relative tolerance
(a small rational times a power of pi, or the square root of one), then sympy decides
whether candidate and truth are the same function. Variables are taken as positive reals (the
AI Feynman sampling ranges are positive), which lets sympy cancel ``sqrt(x**2)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from sr_dist.formula import Formula, FormulaError, parse_formula

if TYPE_CHECKING:
    import sympy

__all__ = ["exact_recovery", "recovery_verdict", "snap_constant"]

_PI_POWERS = (0, 1, -1, 2, -2, 3, -3)


def snap_constant(value: float, rel_tol: float = 2e-6, max_denominator: int = 32) -> sympy.Expr | None:
    """The simplest closed form close to ``value``, or None.

    Tries ``p/q * pi**k``, then ``sqrt(p/q * pi**k)`` (``|k| <= 3``, ``q <= max_denominator``),
    simplest first (no root, small ``|k|``, small ``q``). A fitted constant is accurate to a few
    parts in a million (float32 fits), so plain rationals with ``q <= 12`` and ``|k| <= 1`` are
    accepted within ``10 * rel_tol``, fancier forms only within ``rel_tol``. Between the plain
    forms and the roots, ``log(p/q)``, ``exp(p/q)``, ``(p/q)**3``, ``sin(p/q)`` and ``cos(p/q)`` with ``q <= 10`` (:func:`_function_of_rational`),
    within ``rel_tol``: a root with a large ``p`` matches almost any value. Values below
    1e-4 in magnitude snap to 0 (no AI Feynman constant is that small).
    """
    import sympy

    if not math.isfinite(value):
        return None
    if abs(value) < 1e-4:
        return sympy.Integer(0)
    sign = 1 if value > 0 else -1
    magnitude = abs(value)
    for root in (False, True):
        if root:
            transcendental = _function_of_rational(magnitude, rel_tol)
            if transcendental is not None:
                return sign * transcendental
        for k in _PI_POWERS:
            scale = math.pi**k
            base = (magnitude**2 if root else magnitude) / scale
            tol = rel_tol * (10 if (not root and abs(k) <= 1) else 1)
            for q in range(1, max_denominator + 1):
                p = round(base * q)
                if p == 0:
                    continue
                approx = p / q * scale
                approx = math.sqrt(approx) if root else approx
                if abs(approx - magnitude) <= (tol if q <= 12 else rel_tol) * magnitude:
                    expr = sympy.Rational(p, q) * sympy.pi**k
                    return sign * (sympy.sqrt(expr) if root else expr)
    return None


#: The rationals tried inside ``log`` and ``exp``: denominators up to 10, ``log(r)`` for
#: ``1 < r <= 10`` and ``exp(s)`` for ``0 < |s| <= 10``. Larger ``r`` would match almost any
#: value (``log(p/q)`` is dense there).
_LOG_EXP_DENOMINATOR = 10
_LOG_MAX_ARGUMENT = 10
_EXP_MAX_EXPONENT = 10
#: ``sin(p/q)`` and ``cos(p/q)`` (``q <= 10``, ``0 < p/q < pi``) are tried too: a phase
#: (``cos(x - 4/5) = cos(4/5)*cos(x) + sin(4/5)*sin(x)``) leaves them once expanded.
#: Cubes ``(p/q)**3`` (``q <= 10``, ``p <= 30``): the constant ``(c*x/y)**3`` leaves once
#: expanded to ``c**3*x**3/y**3`` (``(8/5)**3 = 512/125``, a denominator past the plain bound).
_CUBE_MAX_NUMERATOR = 30


def _function_of_rational(magnitude: float, rel_tol: float) -> sympy.Expr | None:
    """``log(p/q)``, ``exp(p/q)``, ``(p/q)**3``, ``sin(p/q)`` or ``cos(p/q)`` within ``rel_tol``
    of ``magnitude`` (see the constants above), fewest digits first: the constants
    ``log(c*x) = log(x) + log(c)``, ``exp(x + c) = exp(c)*exp(x)``, ``(c*x)**3 = c**3*x**3`` and
    ``cos(x - c) = cos(c)*cos(x) + sin(c)*sin(x)`` leave in a fitted formula. Tried after every
    plain rational and pi form and before the roots, at the strict tolerance only."""
    import sympy

    found: list[tuple[int, sympy.Expr]] = []
    log_s = math.log(magnitude)  # magnitude = exp(s)
    for q in range(1, _LOG_EXP_DENOMINATOR + 1):
        if magnitude <= math.log(_LOG_MAX_ARGUMENT):
            p = round(math.exp(magnitude) * q)  # magnitude = log(p/q)
            if q < p <= _LOG_MAX_ARGUMENT * q and abs(math.log(p / q) - magnitude) <= rel_tol * magnitude:
                found.append((p + q, sympy.log(sympy.Rational(p, q))))
        p = round(log_s * q)
        if p != 0 and abs(p) <= _EXP_MAX_EXPONENT * q and abs(math.exp(p / q) - magnitude) <= rel_tol * magnitude:
            found.append((abs(p) + q, sympy.exp(sympy.Rational(p, q))))
        p = round(magnitude ** (1 / 3) * q)  # magnitude = (p/q)**3
        if 0 < p <= _CUBE_MAX_NUMERATOR and abs((p / q) ** 3 - magnitude) <= rel_tol * magnitude:
            found.append((p + q, sympy.Rational(p, q) ** 3))
        if magnitude <= 1:
            # magnitude = sin(p/q) or cos(p/q), 0 < p/q < pi
            arcs = ((sympy.sin, math.sin, math.asin(magnitude)), (sympy.sin, math.sin, math.pi - math.asin(magnitude)),
                    (sympy.cos, math.cos, math.acos(magnitude)))
            for symbolic, numeric, angle in arcs:
                p = round(angle * q)
                if 0 < p < math.pi * q and abs(numeric(p / q) - magnitude) <= rel_tol * magnitude:
                    found.append((p + q, symbolic(sympy.Rational(p, q))))
    return min(found, key=lambda f: f[0])[1] if found else None


def _positive(expr: sympy.Expr, variables: Sequence[str]) -> sympy.Expr:
    import sympy

    swap = {s: sympy.Symbol(s.name, positive=True) for s in expr.free_symbols if s.name in set(variables)}
    return expr.xreplace(swap)


def _same(a: sympy.Expr, b: sympy.Expr) -> bool | None:
    """True when sympy proves ``a == b``; False when it shows they differ (``equals`` finds
    them apart); None when it can do neither (``sqrt((c + v)/(c - v))`` against
    ``(1 + v/c)/sqrt(1 - v**2/c**2)``: equal only where ``v < c``, which sympy is not told)."""
    import sympy

    diff = a - b
    try:
        if sympy.simplify(diff) == 0:
            return True
        if b != 0 and sympy.simplify(a / b) == 1:
            return True
        verdict = diff.equals(0)
        if verdict is None and _apart_somewhere(a, b):
            return False
        return None if verdict is None else bool(verdict)
    except (TypeError, ValueError, ZeroDivisionError, RecursionError, AttributeError):
        return False


def _apart_somewhere(a: sympy.Expr, b: sympy.Expr, points: int = 12) -> bool:
    """Whether ``a`` and ``b`` differ clearly at some point of (0.1, 3)^n where both are real
    and finite: what ``equals`` leaves undecided is then refuted. Points where either side is
    complex (``v > c`` under ``sqrt(1 - v**2/c**2)``) say nothing and are skipped."""
    import sympy

    symbols = sorted(a.free_symbols | b.free_symbols, key=lambda x: x.name)
    rng = np.random.default_rng(0)
    for _ in range(points):
        at = {x: sympy.Float(float(v)) for x, v in zip(symbols, rng.uniform(0.1, 3.0, len(symbols)), strict=True)}
        try:
            va, vb = complex(a.xreplace(at).evalf()), complex(b.xreplace(at).evalf())
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            continue
        if abs(va.imag) > 1e-12 or abs(vb.imag) > 1e-12 or not (math.isfinite(va.real) and math.isfinite(vb.real)):
            continue
        if abs(va.real - vb.real) > 1e-6 * max(1.0, abs(va.real), abs(vb.real)):
            return True
    return False


def exact_recovery(
    candidate: str | Formula,
    constants: Mapping[str, float],
    truth_text: str,
    variables: Sequence[str],
    rel_tol: float = 2e-6,
) -> bool:
    """True when ``candidate`` with its fitted ``constants`` snapped to closed forms is proved
    equal to the truth (:func:`recovery_verdict` is True).

    A constant that matches no closed form stays a symbol: the candidate then only counts if
    that constant does not matter (it multiplies a term whose other constant snapped to 0).
    Never raises for bad input: a formula that does not parse or a sympy failure gives False.
    """
    return recovery_verdict(candidate, constants, truth_text, variables, rel_tol) is True


def recovery_verdict(
    candidate: str | Formula,
    constants: Mapping[str, float],
    truth_text: str,
    variables: Sequence[str],
    rel_tol: float = 2e-6,
) -> bool | None:
    """:func:`exact_recovery` with the third answer: True when sympy proves the snapped
    candidate equal to the truth, False when it shows them different (or the candidate cannot
    be read, or a constant matches no closed form and matters), None when sympy can neither
    prove nor refute it; the benchmarks then decide on fresh points of the problem's domain."""
    try:
        formula = candidate if isinstance(candidate, Formula) else parse_formula(candidate, variables)
        truth = parse_formula(truth_text, variables)
    except FormulaError:
        return False
    import sympy

    cand = formula.to_sympy()
    target = _positive(truth.to_sympy(), variables)
    if truth.constants:
        return False
    # A: snap each fitted constant on its own.
    snapped: dict[sympy.Symbol, sympy.Expr] = {}
    floats: dict[sympy.Symbol, sympy.Expr] = {}
    for symbol in cand.free_symbols:
        if symbol.name in formula.constants:
            value = constants.get(symbol.name)
            if value is None or not math.isfinite(float(value)):
                continue
            floats[symbol] = sympy.Float(float(value))
            closed = snap_constant(float(value), rel_tol)
            if closed is not None:
                snapped[symbol] = closed
    first = _positive(cand.xreplace(snapped), variables)
    if first.has(sympy.Float):
        first = sympy.nsimplify(first, rational=False)
    first_verdict = _same(first, target)
    if first_verdict:
        return True
    # Undecided only when every constant snapped: a free symbol left over is a real difference.
    undecided = first_verdict is None and not first.free_symbols - target.free_symbols
    # B: over-parametrised candidates (c0*(x + c1*x*y) with c0*c1 = 1): substitute the floats,
    # expand, and snap the coefficients of the expanded form instead.
    if len(floats) < len(formula.constants):
        return None if undecided else False
    try:
        expanded = sympy.expand(_positive(cand.xreplace(floats), variables))
        closed_forms = {}
        for atom in expanded.atoms(sympy.Float):
            closed = snap_constant(float(atom), rel_tol)
            if closed is not None:
                closed_forms[atom] = closed
        second = expanded.xreplace(closed_forms)
        second_verdict = _same(second, target)
    except (TypeError, ValueError, RecursionError):
        second_verdict = False
    if second_verdict:
        return True
    if second_verdict is None and not second.has(sympy.Float):
        undecided = True
    return None if undecided else False
