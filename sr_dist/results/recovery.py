"""Exact recovery: is a fitted candidate the ground-truth formula, up to the values of its constants?

The fitted constants are floats; the truth has exact ones (``1/2``, ``4*pi``, ``sqrt(2*pi)``).
Each fitted constant is snapped to the simplest closed form it matches to a relative tolerance
(a small rational times a power of pi, a small function of a rational, or the square root of a
pi multiple: the judge's families of the catalog shared with the simplifier,
:data:`sr_dist.formula.constants.RECOVERY_FAMILIES`, and after its plain forms a rational phase
plus quarter turns; a constant added inside a ``sin`` or ``cos`` is tried as such a phase first
when the other forms fail), then sympy decides
whether candidate and truth are the same function; failing that, whether their ratio is a
number within a few parts in a million of 1 once the constants are read as decimals (SRBench's
"the ratio is a constant", made strict). Variables are taken as positive reals (the
AI Feynman sampling ranges are positive), which lets sympy cancel ``sqrt(x**2)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from sr_dist.formula import Formula, FormulaError, parse_formula
from sr_dist.formula.constants import (
    FUNCTIONS_OF_RATIONALS,
    OF_RATIONAL_MAX_DENOMINATOR,
    PI_MULTIPLE_ROOTS,
    PI_MULTIPLES,
    RECOVERY_MAX_DENOMINATOR,
    OfRational,
    Scaled,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    import sympy  # type: ignore[import-untyped]  # sympy ships no type information

__all__ = ["exact_recovery", "recovery_verdict", "snap_constant"]

#: Values below this in magnitude snap to 0 (no AI Feynman constant is that small).
ZERO_BELOW = 1e-4
#: The looser tolerance (``LOOSE_FACTOR * rel_tol``) is for plain forms only: ``p/q * pi**k``
#: with ``|k| <= LOOSE_MAX_PI_POWER`` and ``q <= LOOSE_MAX_DENOMINATOR``.
LOOSE_FACTOR = 10
LOOSE_MAX_PI_POWER = 1
LOOSE_MAX_DENOMINATOR = 12
#: The quarter turns ``k`` a phase ``p/q + k*pi/2`` may carry (:func:`_phase_shifted`), fewest
#: first: up to two whole turns either way (a fit's phase drifts by whole turns, and a negated
#: frequency moves it by a half turn: ``sin(-4.1*x + 3*pi - 9/10)`` is ``sin(4.1*x + 9/10)``).
QUARTER_TURNS = tuple(k for turns in range(1, 9) for k in (turns, -turns))
#: Largest magnitude taken for a phase: two whole turns and a quarter.
PHASE_MAX = 4.5 * math.pi
#: Largest denominator ``q`` of a phase's rational part.
PHASE_MAX_DENOMINATOR = 12
#: Largest denominator of the decimals the ratio test reads constants as (:func:`_decimal`):
#: three decimal places, as SRBench rounds a model's constants before its symbolic check.
RATIO_MAX_DENOMINATOR = 1000


def snap_constant(value: float, rel_tol: float = 2e-6,
                  max_denominator: int = RECOVERY_MAX_DENOMINATOR) -> sympy.Expr | None:
    """The simplest closed form close to ``value``, or None.

    The families are the judge's of :data:`sr_dist.formula.constants.RECOVERY_FAMILIES`, in
    their order. Tries ``p/q * pi**k`` (:data:`~sr_dist.formula.constants.PI_MULTIPLES`), then
    ``sqrt(p/q * pi**k)`` (``|k| <= 3``, ``q <= max_denominator``), simplest first (no root,
    small ``|k|``, small ``q``). A fitted constant is accurate to a few parts in a million
    (float32 fits), so plain rationals with ``q <= 12`` and ``|k| <= 1`` are accepted within
    ``10 * rel_tol``, fancier forms only within ``rel_tol``. Between the plain forms and the
    roots, ``log(p/q)``, ``exp(p/q)``, ``(p/q)**3``, ``sin(p/q)`` and ``cos(p/q)`` with
    ``q <= 10`` (:func:`_function_of_rational`), within ``rel_tol``: a root with a large ``p``
    matches almost any value. A phase ``p/q + k*pi/2`` (:func:`_phase_shifted`) is tried right
    after the plain forms (``|k| <= 1``). Values below 1e-4 in magnitude snap to 0 (no AI
    Feynman constant is that small).
    """
    import sympy

    if not math.isfinite(value):
        return None
    if abs(value) < ZERO_BELOW:
        return sympy.Integer(0)
    sign = 1 if value > 0 else -1
    magnitude = abs(value)
    closed = _first_scaled(PI_MULTIPLES[:3], magnitude, rel_tol, max_denominator)
    if closed is None:
        phase = _phase_shifted(value, rel_tol)
        if phase is not None:
            return phase
        closed = _first_scaled(PI_MULTIPLES[3:], magnitude, rel_tol, max_denominator)
    if closed is None:
        closed = _function_of_rational(magnitude, rel_tol)
    if closed is None:
        closed = _first_scaled(PI_MULTIPLE_ROOTS, magnitude, rel_tol, max_denominator)
    return None if closed is None else sign * closed


def _phase_shifted(value: float, rel_tol: float) -> sympy.Expr | None:
    """``p/q + k*pi/2`` (``k`` in :data:`QUARTER_TURNS`, ``q <= PHASE_MAX_DENOMINATOR``) within
    ``rel_tol`` of ``value`` (``|value| <= PHASE_MAX``), fewest turns first: the phase of a
    fitted sinusoid is found up to quarter turns, with the amplitude's sign or ``sin``/``cos``
    making up for them (``-5/2*sin(u + 9/10 + pi)`` is ``5/2*sin(u + 9/10)``, which sympy sees
    once the phase is exact). Tried after the plain forms and before the higher powers of pi,
    which match almost any value of this size (``359/(9*pi**2)`` is within 2e-6 of
    ``9/10 + pi``), at the strict tolerance only."""
    import sympy

    if abs(value) > PHASE_MAX:
        return None
    for k in QUARTER_TURNS:
        rest = value - k * math.pi / 2
        for q in range(1, PHASE_MAX_DENOMINATOR + 1):
            p = round(rest * q)
            if p != 0 and abs(p / q + k * math.pi / 2 - value) <= rel_tol * abs(value):
                return sympy.Rational(p, q) + k * sympy.pi / 2
    return None


def _first_scaled(families: Sequence[Scaled], magnitude: float, rel_tol: float,
                  max_denominator: int) -> sympy.Expr | None:
    """The first member of ``families`` (family by family, ``q`` ascending) within tolerance
    of ``magnitude`` (> 0), as sympy."""
    for family in families:
        loose = not family.root and abs(family.power) <= LOOSE_MAX_PI_POWER
        tol = rel_tol * (LOOSE_FACTOR if loose else 1)
        for q in range(1, max_denominator + 1):
            p = round(family.target(magnitude, q))
            if p == 0:
                continue
            approx = family.value(p, q)
            if abs(approx - magnitude) <= (tol if q <= LOOSE_MAX_DENOMINATOR else rel_tol) * magnitude:
                return _scaled_sympy(family, p, q)
    return None


def _scaled_sympy(family: Scaled, p: int, q: int) -> sympy.Expr:
    import sympy

    base = {"pi": sympy.pi, "e": sympy.E}[family.base]
    expr = sympy.Rational(p, q) * base**family.power
    return sympy.sqrt(expr) if family.root else expr


def _of_rational_sympy(family: OfRational, p: int, q: int) -> sympy.Expr:
    import sympy

    r = sympy.Rational(p, q)
    if family.function == "cube":
        return r**3
    return {"log": sympy.log, "exp": sympy.exp, "sin": sympy.sin, "cos": sympy.cos}[family.function](r)


def _function_of_rational(magnitude: float, rel_tol: float) -> sympy.Expr | None:
    """``log(p/q)``, ``exp(p/q)``, ``(p/q)**3``, ``sin(p/q)`` or ``cos(p/q)`` within ``rel_tol``
    of ``magnitude`` (:data:`~sr_dist.formula.constants.FUNCTIONS_OF_RATIONALS` and their
    bounds), fewest digits first: the constants ``log(c*x) = log(x) + log(c)``,
    ``exp(x + c) = exp(c)*exp(x)``, ``(c*x)**3 = c**3*x**3`` and
    ``cos(x - c) = cos(c)*cos(x) + sin(c)*sin(x)`` leave in a fitted formula. Tried after every
    plain rational and pi form and before the roots, at the strict tolerance only."""
    found: list[tuple[int, OfRational, int, int]] = []
    for q in range(1, OF_RATIONAL_MAX_DENOMINATOR + 1):
        for family in FUNCTIONS_OF_RATIONALS:
            for p in family.numerators(magnitude, q):
                if family.admits(p, q) and abs(family.value(p, q) - magnitude) <= rel_tol * magnitude:
                    found.append((family.digits(p, q), family, p, q))
    if not found:
        return None
    _, family, p, q = min(found, key=lambda f: f[0])
    return _of_rational_sympy(family, p, q)


def _with_closed_forms(cand: sympy.Expr, closed: Mapping[sympy.Symbol, sympy.Expr],
                       variables: Sequence[str]) -> sympy.Expr:
    """The candidate with its snapped constants put in, variables positive, floats left over
    (a constant that snapped to nothing stays a symbol) read as sympy numbers."""
    import sympy

    out = _positive(cand.xreplace(closed), variables)
    return sympy.nsimplify(out, rational=False) if out.has(sympy.Float) else out


def _phase_in_any_turn(value: float, rel_tol: float) -> sympy.Expr | None:
    """:func:`_phase_shifted` of ``value`` less its whole turns, with the turns added back
    exactly: a fitted phase may have drifted by any number of them."""
    import sympy

    turns = round(value / (2 * math.pi))
    phase = _phase_shifted(value - turns * 2 * math.pi, rel_tol)
    return None if phase is None else phase + 2 * turns * sympy.pi


def _phase_symbols(expr: sympy.Expr, constants: Sequence[str]) -> set[sympy.Symbol]:
    """The constants that are a term of a ``sin`` or ``cos`` argument: phases."""
    import sympy

    found: set[sympy.Symbol] = set()
    for call in expr.atoms(sympy.sin, sympy.cos):
        argument = call.args[0]
        terms = argument.args if isinstance(argument, sympy.Add) else (argument,)
        found.update(t for t in terms if isinstance(t, sympy.Symbol) and t.name in constants)
    return found


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


def _real_values(exprs: Sequence[sympy.Expr], low: float, high: float, points: int,
                 seed: int) -> Iterator[tuple[float, ...]]:
    """The values of ``exprs`` at ``points`` seeded random points of (low, high)^n, at those
    where every one is real and finite (``sqrt(1 - v**2/c**2)`` is complex past ``v = c``:
    such points say nothing and are skipped)."""
    import sympy

    symbols = sorted(set().union(*(e.free_symbols for e in exprs)), key=lambda x: x.name)
    rng = np.random.default_rng(seed)
    for _ in range(points):
        at = {x: sympy.Float(float(v)) for x, v in zip(symbols, rng.uniform(low, high, len(symbols)), strict=True)}
        try:
            values = [complex(e.xreplace(at).evalf()) for e in exprs]
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            continue
        if all(abs(v.imag) <= 1e-12 and math.isfinite(v.real) for v in values):
            yield tuple(v.real for v in values)


def _apart_somewhere(a: sympy.Expr, b: sympy.Expr, points: int = 12) -> bool:
    """Whether ``a`` and ``b`` differ clearly at some point of (0.1, 3)^n where both are real
    and finite: what ``equals`` leaves undecided is then refuted."""
    return any(abs(va - vb) > 1e-6 * max(1.0, abs(va), abs(vb))
               for va, vb in _real_values((a, b), 0.1, 3.0, points, seed=0))


def _decimal(value: float, rel_tol: float) -> sympy.Rational | None:
    """The rational with the smallest denominator (at most :data:`RATIO_MAX_DENOMINATOR`)
    within ``rel_tol`` of ``value``, or None: a truth's constant written in decimals, as
    ``2*1.1*1.9 = 209/50`` that expanding a square leaves."""
    import sympy

    for q in range(1, RATIO_MAX_DENOMINATOR + 1):
        p = round(value * q)
        if abs(p / q - value) <= rel_tol * abs(value):
            return sympy.Rational(p, q)
    return None


def _near_one_widely(ratio: sympy.Expr, tol: float, points: int = 12) -> bool:
    """Whether ``ratio`` is within ``tol`` of 1 at points of (0.1, 10)^n where it is real and
    finite (at least three): a cheap screen before ``simplify``, and wider than any sampling
    range, so that an approximation that is good only on the data (a long formula at test NMSE
    1e-13) fails it at once."""
    values = [v for (v,) in _real_values((ratio,), 0.1, 10.0, points, seed=1)]
    return len(values) >= 3 and all(abs(v - 1.0) <= tol for v in values)


def _ratio_is_one(expanded: sympy.Expr, target: sympy.Expr, rel_tol: float) -> bool:
    """Whether ``expanded`` (fitted values in) over ``target`` is, with each float read as
    its decimal (:func:`_decimal`, where one is near), a number within
    ``LOOSE_FACTOR * rel_tol`` of 1. The variables must cancel exactly, so only a constant
    factor may stay a float; every constant that multiplies a variable must be the truth's."""
    import sympy

    try:
        decimals = {}
        for atom in expanded.atoms(sympy.Float):
            closed = _decimal(float(atom), rel_tol)
            if closed is not None:
                decimals[atom] = closed
        ratio = expanded.xreplace(decimals) / target
        if not _near_one_widely(ratio, LOOSE_FACTOR * rel_tol):
            return False
        ratio = sympy.simplify(ratio)
        if ratio.free_symbols:
            return False
        value = complex(ratio.evalf())
    except (TypeError, ValueError, ZeroDivisionError, RecursionError, AttributeError, OverflowError):
        return False
    return abs(value.imag) <= 1e-12 and abs(value.real - 1.0) <= LOOSE_FACTOR * rel_tol


def _floats_snapped(expr: sympy.Expr, rel_tol: float) -> sympy.Expr:
    """``expr`` with each float that matches a closed form (:func:`snap_constant`) replaced by it."""
    import sympy

    closed = {atom: form for atom in expr.atoms(sympy.Float)
              if (form := snap_constant(float(atom), rel_tol)) is not None}
    return expr.xreplace(closed)


#: A term of a sum whose coefficient is below this share of the sum's largest is the rounding
#: left by terms that cancel (:func:`_cancelled`): far below what the snapping tolerance admits.
CANCELLED_BELOW = 1e-9


def _cancelled(cand: sympy.Expr, floats: Mapping[sympy.Symbol, sympy.Expr],
               variables: Sequence[str]) -> sympy.Expr | None:
    """The candidate with its fitted values in (those below :data:`ZERO_BELOW` as 0, float
    exponents that are small fractions as fractions, so like terms meet), expanded, and every
    term of a sum whose coefficient is below :data:`CANCELLED_BELOW` of that sum's largest
    dropped; None when sympy cannot build it."""
    import sympy

    def fraction(exponent: sympy.Float) -> sympy.Expr:
        near = sympy.Rational(float(exponent)).limit_denominator(12)
        return near if float(near) == float(exponent) else exponent

    def chop(total: sympy.Add) -> sympy.Expr:
        sizes = [abs(float(term.as_coeff_Mul()[0])) for term in total.args]
        largest = max(sizes)
        kept = [t for t, size in zip(total.args, sizes, strict=True)
                if size >= CANCELLED_BELOW * largest]
        return sympy.Add(*kept) if len(kept) < len(total.args) else total

    try:
        values = {symbol: sympy.Integer(0) if abs(float(value)) < ZERO_BELOW else value
                  for symbol, value in floats.items()}
        expr = _positive(cand.xreplace(values), variables)
        expr = expr.xreplace({power: sympy.Pow(power.base, fraction(power.exp))
                              for power in expr.atoms(sympy.Pow)
                              if isinstance(power.exp, sympy.Float)})
        return sympy.expand(expr).replace(lambda e: isinstance(e, sympy.Add), chop)
    except (TypeError, ValueError, RecursionError, ZeroDivisionError, AttributeError):
        return None


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
    first = _with_closed_forms(cand, snapped, variables)
    first_verdict = _same(first, target)
    if first_verdict:
        return True
    # A2: a phase (a constant added inside a sin or cos) snapped as one first: a wide pi
    # multiple (``-97/(30*pi)``) can match a phase ``-13/5 + pi/2`` within the tolerance too.
    phases = {symbol: phase for symbol in _phase_symbols(cand, formula.constants)
              if symbol in floats
              and (phase := _phase_in_any_turn(float(floats[symbol]), rel_tol)) is not None
              and phase != snapped.get(symbol)}
    if phases:
        if _same(_with_closed_forms(cand, {**snapped, **phases}, variables), target):
            return True
    # Undecided only when every constant snapped: a free symbol left over is a real difference.
    undecided = first_verdict is None and not first.free_symbols - target.free_symbols
    # B: over-parametrised candidates (c0*(x + c1*x*y) with c0*c1 = 1): substitute the floats,
    # expand, and snap the coefficients of the expanded form instead.
    if len(floats) < len(formula.constants):
        return None if undecided else False
    expanded = None
    try:
        expanded = sympy.expand(_positive(cand.xreplace(floats), variables))
        second = _floats_snapped(expanded, rel_tol)
        second_verdict = _same(second, target)
    except (TypeError, ValueError, RecursionError):
        second_verdict = False
    if second_verdict:
        return True
    if second_verdict is None and not second.has(sympy.Float):
        undecided = True
    # C: an overall factor that is no closed form (a fitted exp(c*x + d*x**2 + e) is a
    # Gaussian bump whose amplitude is exp(e + ...)): SRBench's "the ratio is a constant",
    # with the constants that carry the variables read as decimals and the ratio near 1.
    if expanded is not None and _ratio_is_one(expanded, target, rel_tol):
        return True
    # D: terms that cancel (``x0*sqrt(c1 + c2*x2) + c4*x0*x2**0.5`` with c1 ~ 0 and
    # sqrt(c2) = -c4): B and C again on the form where they are gone (:func:`_cancelled`).
    cancelled = _cancelled(cand, floats, variables)
    if cancelled is not None and cancelled != expanded:
        try:
            if _same(_floats_snapped(cancelled, rel_tol), target):
                return True
        except (TypeError, ValueError, RecursionError):
            pass
        if _ratio_is_one(cancelled, target, rel_tol):
            return True
    return None if undecided else False
