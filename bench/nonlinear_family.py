"""A family of laws with nonlinear parameters inside functions, to develop the fitting of
frequencies, phases, rates, slopes and midpoints against (issue 32, item 7).

SRBench-style random trees (``bench/synthetic.py``) rarely put a fitted constant inside a
function; physical and engineering laws often do: a damped oscillation has a rate, a frequency
and a phase, a logistic curve a slope and a midpoint, a saturation a scale. This family draws
such laws from named skeletons, with random constants, variables and ranges:

========================  ==========================================
skeleton                  law (``u``, ``v``, ``w``: distinct variables)
========================  ==========================================
``damped_oscillation``    ``a*exp(-k*u)*sin(f*u + p)``
``shifted_sine``          ``a*sin(f*u + p) + b*v``
``beat``                  ``a*cos(f*u + p)*sin(g*v)``
``sigmoid``               ``a/(1 + exp(s*(m - u)))``
``sigmoid_product``       ``a*v/(1 + exp(s*(m - u)))``
``saturation``            ``a*tanh(k*u*v) + b*w``
``gaussian_bump``         ``a*exp(-k*(u - m)**2)``
``rational_exponential``  ``a*u/(b + exp(k*v))``
``exponential_approach``  ``a*(1 - exp(-k*u))*v``
``oscillation_decay``     ``a*exp(-k*u*v)*cos(f*u)``
========================  ==========================================

With probability ``EXTRA_TERM_P`` a further term ``c*x`` in a variable of its own is added
(up to ``MAX_VARS`` variables). Amplitudes are multiples of 0.1 in [0.5, 4]; frequencies,
rates and slopes multiples of 0.1 in ranges that give between half a period (or one
e-folding) and a few across the variable's range; phases multiples of 0.1 in [0.1, 3];
midpoints multiples of 0.1 inside the range. Constants are exact rationals in the truth, as in
``bench/synthetic.py``, and a draw passes the same degeneracy checks (``degeneracy``).

Formula ``index`` of ``seed`` is drawn from its own stream (``[seed, index, attempt, 77]``), so it
depends on nothing else. **Seeds**: development uses 1 and 2 only; seeds >= 100 are held out,
as in ``bench/synthetic.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # as bench/synthetic.py does

from synthetic import Expr, SyntheticFormula, degeneracy  # noqa: E402

__all__ = ["EXTRA_TERM_P", "FAMILY", "MAX_VARS", "SKELETONS", "draw_nonlinear"]

FAMILY = "nonlinear"
MAX_VARS = 4
EXTRA_TERM_P = 0.4
MAX_ATTEMPTS = 500
#: Sampling ranges: positive, starting in RANGE_LOWS and RANGE_WIDTHS wide.
RANGE_LOWS = (0.1, 0.5, 1.0)
RANGE_WIDTHS = (2.0, 4.0, 6.0)


def _tenths(rng: np.random.Generator, low: float, high: float) -> Fraction:
    """A multiple of 0.1 in [low, high], other than 1 (a unit factor is not a constant)."""
    choices = [k for k in range(round(10 * low), round(10 * high) + 1) if k != 10]
    return Fraction(int(rng.choice(choices)), 10)


def _c(value: Fraction) -> Expr:
    return Expr("const", value=value)


def _v(index: int) -> Expr:
    return Expr("var", var=index)


def _bin(op: str, left: Expr, right: Expr) -> Expr:
    return Expr(op, (left, right))


def _f(name: str, arg: Expr) -> Expr:
    return Expr(name, (arg,))


class _Draw:
    """What a skeleton needs: the random stream and the variables' ranges (drawn on use)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.ranges: list[tuple[float, float]] = []

    def var(self) -> tuple[Expr, tuple[float, float]]:
        low = float(self.rng.choice(RANGE_LOWS))
        span = (low, low + float(self.rng.choice(RANGE_WIDTHS)))
        self.ranges.append(span)
        return _v(len(self.ranges) - 1), span

    def amplitude(self) -> Fraction:
        return _tenths(self.rng, 0.5, 4.0)

    def frequency(self, span: tuple[float, float]) -> Fraction:
        """Between about half a period and three periods across ``span``."""
        width = span[1] - span[0]
        return _tenths(self.rng, max(0.2, np.pi / width), max(0.3, 6 * np.pi / width))

    def rate(self, span: tuple[float, float]) -> Fraction:
        """Between about one and four e-foldings across ``span``."""
        width = span[1] - span[0]
        return _tenths(self.rng, max(0.1, 1.0 / width), max(0.2, min(4.0, 4.0 / width)))

    def phase(self) -> Fraction:
        return _tenths(self.rng, 0.1, 3.0)

    def midpoint(self, span: tuple[float, float]) -> Fraction:
        width = span[1] - span[0]
        return _tenths(self.rng, span[0] + 0.25 * width, span[1] - 0.25 * width)


def _damped_oscillation(d: _Draw) -> Expr:
    u, su = d.var()
    decay = _f("exp", _bin("mul", _c(-d.rate(su)), u))
    wave = _f("sin", _bin("add", _bin("mul", _c(d.frequency(su)), u), _c(d.phase())))
    return _bin("mul", _bin("mul", _c(d.amplitude()), decay), wave)


def _shifted_sine(d: _Draw) -> Expr:
    u, su = d.var()
    v, _ = d.var()
    wave = _f("sin", _bin("add", _bin("mul", _c(d.frequency(su)), u), _c(d.phase())))
    return _bin("add", _bin("mul", _c(d.amplitude()), wave), _bin("mul", _c(d.amplitude()), v))


def _beat(d: _Draw) -> Expr:
    u, su = d.var()
    v, sv = d.var()
    first = _f("cos", _bin("add", _bin("mul", _c(d.frequency(su)), u), _c(d.phase())))
    second = _f("sin", _bin("mul", _c(d.frequency(sv)), v))
    return _bin("mul", _bin("mul", _c(d.amplitude()), first), second)


def _logistic(d: _Draw, u: Expr, su: tuple[float, float]) -> Expr:
    """``1 + exp(s*(m - u))``: the denominator of a logistic curve in ``u``."""
    slope = _tenths(d.rng, max(0.5, 2.0 / (su[1] - su[0])), 4.0)
    return _bin("add", _c(Fraction(1)),
                _f("exp", _bin("mul", _c(slope), _bin("sub", _c(d.midpoint(su)), u))))


def _sigmoid(d: _Draw) -> Expr:
    u, su = d.var()
    return _bin("div", _c(d.amplitude()), _logistic(d, u, su))


def _sigmoid_product(d: _Draw) -> Expr:
    u, su = d.var()
    v, _ = d.var()
    return _bin("div", _bin("mul", _c(d.amplitude()), v), _logistic(d, u, su))


def _saturation(d: _Draw) -> Expr:
    u, su = d.var()
    v, sv = d.var()
    w, _ = d.var()
    # tanh's argument reaches between about 1 and 3 at the box's far corner: it saturates.
    k = _tenths(d.rng, 0.1, max(0.2, min(2.0, 3.0 / (su[1] * sv[1]))))
    bend = _f("tanh", _bin("mul", _bin("mul", _c(k), u), v))
    return _bin("add", _bin("mul", _c(d.amplitude()), bend), _bin("mul", _c(d.amplitude()), w))


def _gaussian_bump(d: _Draw) -> Expr:
    u, su = d.var()
    width = su[1] - su[0]
    k = _tenths(d.rng, max(0.1, 2.0 / width ** 2), max(0.2, min(4.0, 16.0 / width ** 2)))
    centred = Expr("pow", (_bin("sub", u, _c(d.midpoint(su))),), power=2)
    return _bin("mul", _c(d.amplitude()), _f("exp", _bin("mul", _c(-k), centred)))


def _rational_exponential(d: _Draw) -> Expr:
    u, _ = d.var()
    v, sv = d.var()
    bottom = _bin("add", _c(d.amplitude()), _f("exp", _bin("mul", _c(d.rate(sv)), v)))
    return _bin("div", _bin("mul", _c(d.amplitude()), u), bottom)


def _exponential_approach(d: _Draw) -> Expr:
    u, su = d.var()
    v, _ = d.var()
    rise = _bin("sub", _c(Fraction(1)), _f("exp", _bin("mul", _c(-d.rate(su)), u)))
    return _bin("mul", _bin("mul", _c(d.amplitude()), rise), v)


def _oscillation_decay(d: _Draw) -> Expr:
    u, su = d.var()
    v, sv = d.var()
    k = _tenths(d.rng, 0.1, max(0.2, min(2.0, 3.0 / (su[1] * sv[1]))))
    decay = _f("exp", _bin("mul", _bin("mul", _c(-k), u), v))
    wave = _f("cos", _bin("mul", _c(d.frequency(su)), u))
    return _bin("mul", _bin("mul", _c(d.amplitude()), decay), wave)


#: The named skeletons, in the order the docstring lists them (a draw picks one uniformly).
SKELETONS: dict[str, Callable[[_Draw], Expr]] = {
    "damped_oscillation": _damped_oscillation,
    "shifted_sine": _shifted_sine,
    "beat": _beat,
    "sigmoid": _sigmoid,
    "sigmoid_product": _sigmoid_product,
    "saturation": _saturation,
    "gaussian_bump": _gaussian_bump,
    "rational_exponential": _rational_exponential,
    "exponential_approach": _exponential_approach,
    "oscillation_decay": _oscillation_decay,
}


def _shuffled(tree: Expr, order: list[int]) -> Expr:
    """The tree with variable ``i`` renamed ``order[i]`` (so ``x0`` is not always ``u``)."""
    if tree.op == "var":
        assert tree.var is not None
        return replace(tree, var=order[tree.var])
    if not tree.args:
        return tree
    return replace(tree, args=tuple(_shuffled(a, order) for a in tree.args))


def draw_nonlinear(seed: int, index: int) -> tuple[str, SyntheticFormula]:
    """Formula ``index`` of ``seed`` and the name of its skeleton: the first attempt of its own
    stream that passes ``bench/synthetic.py``'s degeneracy checks."""
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be >= 0, got seed={seed}, index={index}")
    names = list(SKELETONS)
    rejected: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([seed, index, attempt, 77])
        name = names[int(rng.integers(len(names)))]
        d = _Draw(rng)
        tree = SKELETONS[name](d)
        if len(d.ranges) < MAX_VARS and rng.random() < EXTRA_TERM_P:
            x, _ = d.var()
            tree = _bin("add", tree, _bin("mul", _c(d.amplitude()), x))
        order = [int(i) for i in rng.permutation(len(d.ranges))]
        ranges = [(0.0, 0.0)] * len(d.ranges)
        for old, new in enumerate(order):
            ranges[new] = d.ranges[old]
        f = SyntheticFormula(seed, index, attempt, _shuffled(tree, order), tuple(ranges), (),
                             family=FAMILY)
        why = degeneracy(f)
        if why is None:
            return name, replace(f, rejected=tuple(rejected))
        rejected.append(why)
    raise RuntimeError(f"no usable {FAMILY} formula for seed {seed}, index {index} in "
                       f"{MAX_ATTEMPTS} attempts")
