"""The closed forms a fitted constant may be snapped to: one catalog for the simplifier
(:mod:`sr_dist.formula.simplify`) and the exactness judge (:mod:`sr_dist.results.recovery`).

A *family* is a set of closed forms indexed by a rational ``p/q``:

- :class:`Scaled`: ``p/q * base**power`` (``base`` a named number, ``pi`` or ``e``; power 0 is
  the plain rational ``p/q``), or the square root of that when ``root``.
- :class:`OfRational`: ``log(p/q)``, ``exp(p/q)``, ``(p/q)**3``, ``sin(p/q)`` or ``cos(p/q)``,
  with ``q <= OF_RATIONAL_MAX_DENOMINATOR`` and the bounds on ``p/q`` below.

:data:`CATALOG` holds every family either module knows of. Each module tries a named subset:

- :data:`RECOVERY_FAMILIES`, the judge's, in its order: the plain :data:`PI_MULTIPLES`
  (``q <= RECOVERY_MAX_DENOMINATOR``, first match wins), then the
  :data:`FUNCTIONS_OF_RATIONALS` (fewest digits wins), then the :data:`PI_MULTIPLE_ROOTS`.
- :data:`SIMPLIFIER_FAMILIES`, the simplifier's: ``p/q``, ``p/q*pi``, ``p/q/pi`` and ``p/q*e``
  (``q <= SIMPLIFIER_MAX_DENOMINATOR``), the forms it writes as short text. It does not try the
  higher powers of pi, the roots or the functions of rationals: they would change what it
  writes for constants it already handles (``1.41421`` would read ``sqrt(2)``).

This module is data and arithmetic only: tolerances, what counts as simplest and how a form is
written (a formula tree, a sympy expression) stay with each module. Every family is a frozen,
hashable value; the functions are pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, TypeAlias

from .nodes import NAMED_NUMBERS

__all__ = [
    "CATALOG",
    "CUBE_MAX_NUMERATOR",
    "EXP_MAX_EXPONENT",
    "E_MULTIPLES",
    "FUNCTIONS_OF_RATIONALS",
    "LOG_MAX_ARGUMENT",
    "OF_RATIONAL_MAX_DENOMINATOR",
    "PI_MULTIPLES",
    "PI_MULTIPLE_ROOTS",
    "PI_POWERS",
    "RECOVERY_FAMILIES",
    "RECOVERY_MAX_DENOMINATOR",
    "SIMPLIFIER_FAMILIES",
    "SIMPLIFIER_MAX_DENOMINATOR",
    "Family",
    "OfRational",
    "Scaled",
]

#: The powers of pi of the :data:`PI_MULTIPLES`, simplest first.
PI_POWERS: tuple[int, ...] = (0, 1, -1, 2, -2, 3, -3)
#: Largest denominator ``q`` of a :class:`Scaled` form the judge tries (``snap_constant``'s default).
RECOVERY_MAX_DENOMINATOR = 32
#: Largest denominator ``q`` of a :class:`Scaled` form the simplifier tries.
SIMPLIFIER_MAX_DENOMINATOR = 12
#: Largest denominator ``q`` inside an :class:`OfRational` form.
OF_RATIONAL_MAX_DENOMINATOR = 10
#: ``log(r)`` only for ``1 < r <= LOG_MAX_ARGUMENT``: past it ``log(p/q)`` is dense enough to
#: match almost any value.
LOG_MAX_ARGUMENT = 10
#: ``exp(s)`` only for ``0 < |s| <= EXP_MAX_EXPONENT``.
EXP_MAX_EXPONENT = 10
#: ``(p/q)**3`` only for ``0 < p <= CUBE_MAX_NUMERATOR``: ``(c*x/y)**3`` expanded leaves
#: ``c**3`` (``(8/5)**3 = 512/125``, a denominator past the plain bounds).
CUBE_MAX_NUMERATOR = 30


@dataclass(frozen=True)
class Scaled:
    """``p/q * base**power``, or its square root when ``root``; ``power == 0`` is ``p/q``."""

    base: Literal["pi", "e"]
    power: int
    root: bool = False

    @property
    def named(self) -> str | None:
        """The named number a member shows (``pi``, ``e``), None for a plain rational."""
        return None if self.power == 0 else self.base

    @property
    def scale(self) -> float:
        """``base**power`` as a float."""
        return NAMED_NUMBERS[self.base] ** self.power

    def target(self, value: float, q: int) -> float:
        """``q`` times ``value`` (squared first for a root) over :attr:`scale`: the numerator of
        the nearest member with denominator ``q`` is this rounded (the caller rounds, and
        guards against a huge or infinite target)."""
        return (value**2 if self.root else value) / self.scale * q

    def value(self, p: int, q: int) -> float:
        """The member's value: ``p/q * scale``, or its square root."""
        approx = p / q * self.scale
        return math.sqrt(approx) if self.root else approx


@dataclass(frozen=True)
class OfRational:
    """``function(p/q)`` for ``function`` one of ``log``, ``exp``, ``cube``, ``sin``, ``cos``
    (``q <= OF_RATIONAL_MAX_DENOMINATOR``, the bounds of :meth:`admits`)."""

    function: Literal["log", "exp", "cube", "sin", "cos"]

    def value(self, p: int, q: int) -> float:
        """``function(p/q)`` as a float."""
        r = p / q
        if self.function == "log":
            return math.log(r)
        if self.function == "exp":
            return math.exp(r)
        if self.function == "cube":
            return r**3
        return math.sin(r) if self.function == "sin" else math.cos(r)

    def numerators(self, magnitude: float, q: int) -> tuple[int, ...]:
        """The numerators ``p`` whose ``function(p/q)`` is nearest ``magnitude`` (> 0), one per
        branch of the inverse (``sin`` has two on ``(0, pi)``); none where no member of the
        family can be near (``log`` past ``log(LOG_MAX_ARGUMENT)``, ``sin``/``cos`` above 1)."""
        if self.function == "log":
            return (round(math.exp(magnitude) * q),) if magnitude <= math.log(LOG_MAX_ARGUMENT) else ()
        if self.function == "exp":
            return (round(math.log(magnitude) * q),)
        if self.function == "cube":
            return (round(magnitude ** (1 / 3) * q),)
        if magnitude > 1:
            return ()
        if self.function == "sin":
            return round(math.asin(magnitude) * q), round((math.pi - math.asin(magnitude)) * q)
        return (round(math.acos(magnitude) * q),)

    def admits(self, p: int, q: int) -> bool:
        """Whether ``p/q`` is inside the family's bounds: ``1 < p/q <= LOG_MAX_ARGUMENT`` for
        ``log``, ``0 < |p/q| <= EXP_MAX_EXPONENT`` for ``exp``, ``0 < p <= CUBE_MAX_NUMERATOR``
        for ``cube``, ``0 < p/q < pi`` for ``sin`` and ``cos``."""
        if self.function == "log":
            return q < p <= LOG_MAX_ARGUMENT * q
        if self.function == "exp":
            return p != 0 and abs(p) <= EXP_MAX_EXPONENT * q
        if self.function == "cube":
            return 0 < p <= CUBE_MAX_NUMERATOR
        return 0 < p < math.pi * q

    @staticmethod
    def digits(p: int, q: int) -> int:
        """How plain ``function(p/q)`` is: ``|p| + q``, fewer first."""
        return abs(p) + q


#: One family of the catalog.
Family: TypeAlias = Scaled | OfRational

#: ``p/q * pi**k`` for ``k`` in :data:`PI_POWERS`, in that order (``k = 0``: ``p/q``).
PI_MULTIPLES: tuple[Scaled, ...] = tuple(Scaled("pi", k) for k in PI_POWERS)
#: ``sqrt(p/q * pi**k)`` for ``k`` in :data:`PI_POWERS`, in that order.
PI_MULTIPLE_ROOTS: tuple[Scaled, ...] = tuple(Scaled("pi", k, root=True) for k in PI_POWERS)
#: ``p/q * e``.
E_MULTIPLES: tuple[Scaled, ...] = (Scaled("e", 1),)
#: ``log``, ``exp``, cube, ``sin`` and ``cos`` of ``p/q``, in the order they are tried.
FUNCTIONS_OF_RATIONALS: tuple[OfRational, ...] = tuple(
    OfRational(f) for f in ("log", "exp", "cube", "sin", "cos"))

#: Every family the simplifier or the judge knows of.
CATALOG: tuple[Family, ...] = (*PI_MULTIPLES, *FUNCTIONS_OF_RATIONALS, *PI_MULTIPLE_ROOTS, *E_MULTIPLES)
#: The judge's families (``sr_dist.results.recovery.snap_constant``), in the order it tries them.
RECOVERY_FAMILIES: tuple[Family, ...] = (*PI_MULTIPLES, *FUNCTIONS_OF_RATIONALS, *PI_MULTIPLE_ROOTS)
#: The simplifier's families (``sr_dist.formula.simplify``), in the order it lists them:
#: ``p/q``, ``p/q*pi``, ``p/q/pi``, ``p/q*e`` (those naming ``pi`` or ``e`` only when the
#: dataset has no variable of that name).
SIMPLIFIER_FAMILIES: tuple[Scaled, ...] = (*PI_MULTIPLES[:3], *E_MULTIPLES)
