"""Physical units as exact exponent vectors, parsed from text such as ``kg*m/s**2``.

A :class:`Unit` is the dimension of a quantity: one rational exponent per base unit of
:data:`BASE_UNITS`. Scale does not matter for dimensional analysis, so ``km`` is ``m`` and ``g``
is ``kg``. The AI Feynman tables measure electric quantities in volts (a charge is ``J/V``), so
the ampere is stored through the volt (``A = W/V = kg*m**2/(s**3*V)``): ``V*A`` then equals
``W`` and a current written in amperes matches one written as the table writes it. The ``A``
entry of :attr:`Unit.exponents` is therefore always 0.

:class:`DatasetUnits` holds the unit of every variable of a dataset and of its target.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational, Real
from typing import Any

__all__ = [
    "BASE_UNITS",
    "DERIVED_UNITS",
    "DatasetUnits",
    "Unit",
    "UnitError",
    "parse_unit",
]

#: The base units, in the order of :attr:`Unit.exponents`: metre, second, kilogram, kelvin,
#: volt, ampere, candela, mole.
BASE_UNITS: tuple[str, ...] = ("m", "s", "kg", "K", "V", "A", "cd", "mol")
_INDEX = {name: i for i, name in enumerate(BASE_UNITS)}
_AMPERE = _INDEX["A"]
#: The ampere through the volt: A = kg*m**2/(s**3*V).
_AMPERE_AS = {"kg": 1, "m": 2, "s": -3, "V": -1}
#: Rendering order: the conventional ``kg*m/s**2``.
_RENDER_ORDER = ("kg", "m", "s", "K", "V", "cd", "mol")

#: Named units besides the base ones, each as base-unit text (scale dropped).
DERIVED_UNITS: Mapping[str, str] = {
    "g": "kg",
    "N": "kg*m/s**2",
    "J": "kg*m**2/s**2",
    "eV": "kg*m**2/s**2",
    "W": "kg*m**2/s**3",
    "Pa": "kg/(m*s**2)",
    "Hz": "1/s",
    "C": "A*s",
    "ohm": "V/A",
    "Ohm": "V/A",
    "Ω": "V/A",
    "S": "A/V",
    "F": "A*s/V",
    "H": "V*s/A",
    "Wb": "V*s",
    "T": "V*s/m**2",
    "L": "m**3",
    "rad": "1",
    "sr": "1",
}
#: Scale prefixes accepted before a base or derived unit (``km``, ``ms``, ``kPa``, ``µV``).
PREFIXES: tuple[str, ...] = ("Y", "Z", "E", "P", "T", "G", "M", "k", "h", "da", "d", "c", "m",
                             "u", "µ", "μ", "n", "p", "f", "a")
#: Words that mean "no unit".
_DIMENSIONLESS_WORDS = ("", "1", "dimensionless", "-")

#: Superscript exponents as papers write them (``m²``, ``s⁻¹``), read as ``^2``, ``^-1``.
_SUPERSCRIPTS = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
_SUPERSCRIPT_RUN = re.compile("[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+")

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?|\.\d+)|(?P<name>[A-Za-zΩµμ_]+)"
                    r"|(?P<op>\*\*|[*·/^()+-]))")


class UnitError(ValueError):
    """A unit that cannot be understood; the message says what and how to write it."""


def _fraction(value: Any, where: str) -> Fraction:
    if isinstance(value, bool):
        raise UnitError(f"{where}: an exponent must be a number, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    if isinstance(value, Real):
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise UnitError(f"{where}: an exponent must be finite, got {value!r}")
        return Fraction(number).limit_denominator(1000)
    if isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            pass
    raise UnitError(f"{where}: an exponent must be a number such as 2, -1 or 1/2, got {value!r}")


@dataclass(frozen=True)
class Unit:
    """An exact exponent vector over :data:`BASE_UNITS` (immutable; ``*``, ``/``, ``**``).

    Build one with :func:`parse_unit` / :meth:`parse` (text), :meth:`of` (a mapping such as
    ``{"m": 1, "s": -2}``) or :meth:`from_exponents` (eight numbers, or the five m, s, kg, K, V
    of the Feynman table).
    """

    exponents: tuple[Fraction, ...]

    def __post_init__(self) -> None:
        values = tuple(_fraction(v, "unit") for v in self.exponents)
        if len(values) != len(BASE_UNITS):
            raise UnitError(f"a unit has {len(BASE_UNITS)} exponents ({', '.join(BASE_UNITS)}), "
                            f"got {len(values)}")
        amps = values[_AMPERE]
        if amps:
            moved = list(values)
            for name, power in _AMPERE_AS.items():
                moved[_INDEX[name]] += amps * power
            moved[_AMPERE] = Fraction(0)
            values = tuple(moved)
        object.__setattr__(self, "exponents", values)

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def dimensionless(cls) -> Unit:
        return _ONE

    @classmethod
    def of(cls, exponents: Mapping[str, Any]) -> Unit:
        """From base-unit names to exponents, e.g. ``{"kg": 1, "m": 1, "s": -2}``."""
        values = [Fraction(0)] * len(BASE_UNITS)
        for name, power in exponents.items():
            if name not in _INDEX:
                raise UnitError(f"unknown base unit {name!r} in {dict(exponents)!r}; the base "
                                f"units are {', '.join(BASE_UNITS)}")
            values[_INDEX[name]] += _fraction(power, f"exponent of {name}")
        return cls(tuple(values))

    @classmethod
    def from_exponents(cls, exponents: Sequence[Any]) -> Unit:
        """From eight exponents in :data:`BASE_UNITS` order, or five (m, s, kg, K, V), as the
        AI Feynman units table lists them."""
        values = list(exponents)
        if len(values) == 5:
            values += [0, 0, 0]
        if len(values) != len(BASE_UNITS):
            raise UnitError(f"an exponent vector has {len(BASE_UNITS)} entries "
                            f"({', '.join(BASE_UNITS)}) or 5 (m, s, kg, K, V), got "
                            f"{len(values)}: {list(exponents)!r}")
        return cls(tuple(_fraction(v, f"exponent of {BASE_UNITS[i]}") for i, v in enumerate(values)))

    @classmethod
    def parse(cls, text: str) -> Unit:
        return parse_unit(text)

    @classmethod
    def coerce(cls, value: Any) -> Unit:
        """A unit from text, a mapping, an exponent sequence or a :class:`Unit`."""
        if isinstance(value, Unit):
            return value
        if isinstance(value, str):
            return parse_unit(value)
        if isinstance(value, Mapping):
            return cls.of(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 1:
            return _ONE
        if isinstance(value, Iterable):
            return cls.from_exponents(list(value))
        raise UnitError(f"a unit is text such as 'kg*m/s**2', a mapping such as "
                        f"{{'m': 1, 's': -1}} or a list of exponents; got {value!r}")

    # -- algebra -----------------------------------------------------------------------------

    def __mul__(self, other: Unit) -> Unit:
        return Unit(tuple(a + b for a, b in zip(self.exponents, other.exponents, strict=True)))

    def __truediv__(self, other: Unit) -> Unit:
        return Unit(tuple(a - b for a, b in zip(self.exponents, other.exponents, strict=True)))

    def __pow__(self, power: Fraction | int) -> Unit:
        factor = _fraction(power, "power")
        return Unit(tuple(a * factor for a in self.exponents))

    @property
    def is_dimensionless(self) -> bool:
        return not any(self.exponents)

    def as_dict(self) -> dict[str, Fraction]:
        """The non-zero exponents by base-unit name."""
        return {name: power for name, power in zip(BASE_UNITS, self.exponents, strict=True) if power}

    def __str__(self) -> str:
        powers = self.as_dict()
        if not powers:
            return "1"
        up = [_factor(name, powers[name]) for name in _RENDER_ORDER if powers.get(name, 0) > 0]
        down = [_factor(name, -powers[name]) for name in _RENDER_ORDER if powers.get(name, 0) < 0]
        top = "*".join(up) if up else "1"
        if not down:
            return top
        bottom = down[0] if len(down) == 1 else "(" + "*".join(down) + ")"
        return f"{top}/{bottom}"

    def describe(self) -> str:
        """``str(self)``, or ``dimensionless`` (for sentences)."""
        return "dimensionless" if self.is_dimensionless else str(self)

    def __repr__(self) -> str:
        return f"Unit({str(self)!r})"


def _factor(name: str, power: Fraction) -> str:
    if power == 1:
        return name
    if power.denominator == 1:
        return f"{name}**{power.numerator}"
    return f"{name}**({power})"


_ONE = Unit(tuple(Fraction(0) for _ in BASE_UNITS))


# -- text --------------------------------------------------------------------------------------


def _named(symbol: str, text: str) -> Unit:
    if symbol in _INDEX:
        return Unit.of({symbol: 1})
    if symbol in DERIVED_UNITS:
        return parse_unit(DERIVED_UNITS[symbol])
    for prefix in PREFIXES:
        rest = symbol[len(prefix):]
        if symbol.startswith(prefix) and rest and (rest in _INDEX or rest in DERIVED_UNITS) \
                and rest != "kg":
            return _named(rest, text)
    known = ", ".join([*BASE_UNITS, *DERIVED_UNITS])
    raise UnitError(f"unknown unit {symbol!r} in {text!r}; known units are {known} (with SI "
                    "prefixes such as k, m, µ), combined with *, / and ** (e.g. 'kg*m/s**2')")


class _Reader:
    """A recursive-descent reader: product := power ((* | / | juxtaposition) power)*."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise UnitError(f"cannot read the unit {text!r} at {text[pos:].strip()[:10]!r}: "
                                "write names such as kg, m, s, N, J combined with *, / and **")
            kind = match.lastgroup or "op"
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            pos = match.end()
        self.i = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str, int]:
        token = self.peek()
        if token is None:
            raise UnitError(f"the unit {self.text!r} ends too early; e.g. 'm/s**2', 'kg*m**2'")
        self.i += 1
        return token

    def product(self) -> Unit:
        unit = self.power()
        while (token := self.peek()) is not None:
            kind, value, _ = token
            if kind == "op" and value in ("*", "·"):
                self.take()
                unit = unit * self.power()
            elif kind == "op" and value == "/":
                self.take()
                unit = unit / self.power()
            elif kind == "name" or (kind == "op" and value == "("):
                unit = unit * self.power()
            else:
                break
        return unit

    def power(self) -> Unit:
        base = self.atom()
        token = self.peek()
        if token is not None and token[0] == "op" and token[1] in ("^", "**"):
            self.take()
            return base ** self.exponent()
        return base

    def atom(self) -> Unit:
        kind, value, at = self.take()
        if kind == "name":
            return _named(value, self.text)
        if kind == "num":
            if Fraction(value) == 1:
                return _ONE
            raise UnitError(f"a unit has no numbers except 1 and exponents: {value!r} at offset "
                            f"{at} in {self.text!r} (write a fractional exponent as m**(1/2))")
        if value == "(":
            inner = self.product()
            self.expect(")")
            return inner
        raise UnitError(f"unexpected {value!r} at offset {at} in the unit {self.text!r}")

    def exponent(self) -> Fraction:
        kind, value, at = self.take()
        if kind == "op" and value == "(":
            number = self.signed()
            token = self.peek()
            if token is not None and token[1] == "/":
                self.take()
                denominator = self.signed()
                if denominator == 0:
                    raise UnitError(f"division by zero in an exponent of {self.text!r}")
                number = number / denominator
            self.expect(")")
            return number
        self.i -= 1
        return self.signed()

    def signed(self) -> Fraction:
        kind, value, at = self.take()
        sign = 1
        if kind == "op" and value in ("-", "+"):
            sign = -1 if value == "-" else 1
            kind, value, at = self.take()
        if kind != "num":
            raise UnitError(f"expected a number as exponent at offset {at} in {self.text!r}, "
                            f"got {value!r} (e.g. s**-2, m**(1/2))")
        return sign * Fraction(value)

    def expect(self, op: str) -> None:
        kind, value, at = self.take()
        if value != op:
            raise UnitError(f"expected {op!r} at offset {at} in the unit {self.text!r}, got {value!r}")


def parse_unit(text: str) -> Unit:
    """A unit from text: ``kg*m/s**2``, ``m^2``, ``N m``, ``m**(1/2)``, ``kg·m²/s²``, ``1`` or
    ``""`` (dimensionless); :class:`UnitError` says what was not understood."""
    if not isinstance(text, str):
        raise UnitError(f"a unit text must be a string, got {type(text).__name__}")
    stripped = _SUPERSCRIPT_RUN.sub(lambda m: "^" + m.group(0).translate(_SUPERSCRIPTS), text.strip())
    if stripped.lower() in _DIMENSIONLESS_WORDS:
        return _ONE
    reader = _Reader(stripped)
    unit = reader.product()
    rest = reader.peek()
    if rest is not None:
        raise UnitError(f"unexpected {rest[1]!r} at offset {rest[2]} in the unit {stripped!r}")
    return unit


# -- a dataset's units -------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetUnits:
    """The unit of each variable and of the target of one dataset."""

    variables: tuple[tuple[str, Unit], ...]
    target: Unit

    @classmethod
    def from_mapping(cls, units: Mapping[str, Any], features: Sequence[str],
                     target_name: str) -> DatasetUnits:
        """From name -> unit (text, mapping or exponents) covering every feature and the target;
        a :class:`UnitError` names what is missing, unknown or unreadable."""
        if not isinstance(units, Mapping):
            raise UnitError(f"units must map each variable and the target to a unit, got "
                            f"{type(units).__name__}")
        names = [*features, target_name]
        missing = [name for name in names if name not in units]
        unknown = sorted(str(name) for name in units if name not in names)
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"no unit for {', '.join(missing)}")
            if unknown:
                parts.append(f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
                             f"a variable or the target")
            raise UnitError(f"dataset units: {'; '.join(parts)} (variables: "
                            f"{', '.join(features)}; target: {target_name}); give one unit per "
                            f"name, '1' for dimensionless")
        parsed: dict[str, Unit] = {}
        for name in names:
            try:
                parsed[name] = Unit.coerce(units[name])
            except UnitError as exc:
                raise UnitError(f"unit of {name!r}: {exc}") from None
        return cls(tuple((name, parsed[name]) for name in features), parsed[target_name])

    def of(self, name: str) -> Unit:
        for variable, unit in self.variables:
            if variable == name:
                return unit
        raise KeyError(f"no unit for {name!r}; the units cover {', '.join(self.names)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.variables)

    def as_dict(self) -> dict[str, Unit]:
        return dict(self.variables)

    def as_text(self, target_name: str) -> dict[str, str]:
        """Name -> unit text for every variable and the target (for JSON and prompts)."""
        out = {name: str(unit) for name, unit in self.variables}
        out[target_name] = str(self.target)
        return out
