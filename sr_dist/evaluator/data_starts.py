"""Restart points from the data for constants inside functions (issue 32, item 5).

A frequency inside ``sin``/``cos`` and a midpoint inside ``exp``, ``tanh`` or a power make a
least-squares fit multimodal: from a start more than half a period (or a width) away, LM
converges to the wrong basin, so a skeleton that is the law fits badly and the search drops it.
Random log-uniform restarts rarely land close enough. The data say where to start instead:

* **frequencies**: a ``const*var`` product inside ``sin`` or ``cos`` starts at the peaks of the
  Lomb-Scargle periodogram (Lomb 1976, Scargle 1982; scipy's ``lombscargle``, for unevenly spaced
  samples) along that variable of the target less its least-squares plane in all variables
  (without that, a linear term in another variable drowns the oscillation), strongest first,
  where a peak explains at least :data:`MIN_POWER` of that residual's variance; where that
  periodogram has no such peak, or only ones far weaker than the squared residual's, at half
  the peaks of the periodogram of the squared residual (:func:`frequency_hints`,
  :func:`product_frequencies`): a product of oscillations in two variables,
  ``sin(f*u)*g(v)``, has no marginal peak along ``u`` (``g`` averages out), but its square is
  ``(1 - cos(2*f*u))*g(v)**2/2``, whose peak along ``u`` is at ``2*f``;
* **shifts**: ``var ± const`` inside a function or a power (a Gaussian's or a logistic
  curve's midpoint) starts at quantiles of that variable, so the centre lies inside the data;
* **rates**: a constant that scales a product of variables, ratios, shifted variables and
  powers of them inside a function other than ``sin``/``cos`` (a decay's rate, a logistic
  curve's slope, a saturation's scale, a Gaussian's width) starts at ``+1/m`` and ``-1/m``,
  ``m`` the argument's typical size from the variables' median magnitudes (and a shifted
  variable's half interquartile range), so the function neither saturates nor stays linear
  across the data. A random start for ``tanh(k*u*v)`` with ``u*v`` in the tens is flat
  everywhere, and LM does not leave it.

Restart 0 keeps its all-ones start, the last restart (of three or more) keeps its random one
(where the hints mislead, a random start still has its chance), and the other constants keep
their random values; only the constants that match a pattern get data-driven values, in
restarts 1, 2, ... (one hint each, round-robin). Everything here is a plain function of the tree and the hints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sr_dist.formula import Node

__all__ = ["PRODUCT_POWER_RATIO", "DataHints", "data_hints", "frequency_hints", "hinted_restarts",
           "periodogram", "periodogram_peaks", "product_frequencies"]

#: Rows the periodogram reads (a deterministic, evenly strided subset of the training rows).
MAX_ROWS = 2048
#: Frequencies tried per variable, and the highest number of periods across its range.
GRID = 600
MAX_PERIODS = 40.0
#: Peaks kept per variable (restarts beyond these reuse them round-robin).
PEAKS = 3
#: Share of the residual's variance a peak must explain (normalised Lomb-Scargle power) to be
#: used: pure noise peaks near ln(GRID)/rows (0.3% at 2,048 rows); a product of oscillations
#: in two variables has no marginal peak at all (:func:`product_frequencies` reads those).
MIN_POWER = 0.05
#: How many times the marginal periodogram's strongest power the squared residual's strongest
#: peak must have for its halved frequencies to be used (:func:`frequency_hints`).
PRODUCT_POWER_RATIO = 3.0
#: Quantiles of a variable that shifted arguments start from.
QUANTILES = (0.5, 0.25, 0.75)
_FUNCTIONS = frozenset({"sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "sinh", "cosh",
                        "arcsin", "arccos", "arctan", "abs"})


@dataclass(frozen=True)
class DataHints:
    """Per variable: angular frequencies (strongest periodogram peak first), quantiles
    (:data:`QUANTILES`) and median magnitude."""

    frequencies: Mapping[str, tuple[float, ...]]
    quantiles: Mapping[str, tuple[float, ...]]
    magnitudes: Mapping[str, float] = field(default_factory=dict)


def periodogram_peaks(x: np.ndarray, y: np.ndarray, peaks: int = PEAKS) -> tuple[float, ...]:
    """The angular frequencies of the ``peaks`` highest local maxima of the normalised
    Lomb-Scargle periodogram of ``y`` (less its least-squares line in ``x``) along ``x`` that
    reach :data:`MIN_POWER`; () when there are none or ``x`` is constant or too short. The grid spans half a period to :data:`MAX_PERIODS` periods over
    ``x``'s range (fewer with few distinct values)."""
    return tuple(omega for omega, _ in periodogram(x, y, peaks))


def periodogram(x: np.ndarray, y: np.ndarray, peaks: int = PEAKS) -> tuple[tuple[float, float], ...]:
    """:func:`periodogram_peaks` with each peak's normalised power: ``(frequency, power)``."""
    from scipy.signal import lombscargle  # type: ignore[import-untyped]

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    span = float(np.ptp(x)) if x.size else 0.0
    if x.size < 16 or span <= 0.0:
        return ()
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    if not np.any(residual):
        return ()
    periods = min(MAX_PERIODS, max(1.0, len(np.unique(x)) / 8.0))
    omegas = np.linspace(np.pi / span, 2.0 * np.pi * periods / span, GRID)
    power = lombscargle(x, residual, omegas, normalize=True)
    inner = (power[1:-1] > power[:-2]) & (power[1:-1] >= power[2:]) & (power[1:-1] >= MIN_POWER)
    at = np.flatnonzero(inner) + 1
    best = at[np.argsort(-power[at], kind="stable")][:peaks]
    return tuple((float(omegas[i]), float(power[i])) for i in best)


def product_frequencies(x: np.ndarray, residual: np.ndarray, peaks: int = PEAKS) -> tuple[float, ...]:
    """Half the angular frequencies of :func:`periodogram_peaks` of the squared ``residual``
    along ``x``: where ``residual`` is ``sin(f*x + p)*g(other variables)``, its square
    oscillates at ``2*f`` along ``x`` whatever ``g`` is."""
    return tuple(omega for omega, _ in _squared_peaks(x, residual, peaks))


def _squared_peaks(x: np.ndarray, residual: np.ndarray, peaks: int) -> tuple[tuple[float, float], ...]:
    residual = np.asarray(residual, dtype=np.float64)
    return tuple((omega / 2.0, power) for omega, power in periodogram(x, residual * residual, peaks))


def frequency_hints(x: np.ndarray, residual: np.ndarray, peaks: int = PEAKS) -> tuple[float, ...]:
    """The frequencies that ``sin(c*x + c)`` constants start from: the marginal peaks of
    ``residual`` along ``x``, unless the squared residual's strongest peak
    (:func:`product_frequencies`) has :data:`PRODUCT_POWER_RATIO` times their strongest
    power (or they have none): a product of oscillations leaves only chance peaks in the
    marginal periodogram, while a single oscillation's square peaks no higher than the
    oscillation itself."""
    marginal = periodogram(x, residual, peaks)
    squared = _squared_peaks(x, residual, peaks)
    if squared and (not marginal or squared[0][1] >= PRODUCT_POWER_RATIO * marginal[0][1]):
        return tuple(omega for omega, _ in squared)
    return tuple(omega for omega, _ in marginal)


def data_hints(X: np.ndarray, y: np.ndarray, names: Sequence[str]) -> DataHints:
    """:class:`DataHints` for the columns of ``X`` (named ``names``) against ``y``."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    step = max(1, len(y) // MAX_ROWS)
    Xs, ys = X[::step], y[::step]
    finite = np.all(np.isfinite(Xs), axis=1) & np.isfinite(ys)
    Xs, ys = Xs[finite], ys[finite]
    if len(ys) > Xs.shape[1] + 1:
        design = np.column_stack([Xs, np.ones(len(ys))])
        ys = ys - design @ np.linalg.lstsq(design, ys, rcond=None)[0]
    frequencies: dict[str, tuple[float, ...]] = {}
    quantiles: dict[str, tuple[float, ...]] = {}
    magnitudes: dict[str, float] = {}
    for j, name in enumerate(names):
        column = Xs[:, j]
        frequencies[name] = frequency_hints(column, ys)
        finite = column[np.isfinite(column)]
        quantiles[name] = tuple(float(q) for q in np.quantile(finite, QUANTILES)) if finite.size else ()
        if finite.size:
            magnitudes[name] = float(np.median(np.abs(finite)))
    return DataHints(frequencies, quantiles, magnitudes)


def _pair(node: Node, first: str, second: str) -> tuple[Node, Node] | None:
    """``(a, b)`` of a binary ``node`` whose children are one ``first`` and one ``second`` leaf."""
    if len(node.args) != 2:
        return None
    a, b = node.args
    if a.op == first and b.op == second:
        return a, b
    if a.op == second and b.op == first:
        return b, a
    return None


def _size(node: Node, hints: DataHints) -> float | None:
    """The typical size of a constant-free argument: a variable's median magnitude, a shifted
    variable's half interquartile range, and products, quotients and number powers of those;
    None for anything else (or a zero size)."""
    if node.op == "var":
        return hints.magnitudes.get(str(node.name)) or None
    shifted = _pair(node, "const", "var") if node.op in ("add", "sub") else None
    if shifted is not None:
        q = hints.quantiles.get(str(shifted[1].name), ())
        return (q[2] - q[1]) / 2.0 if len(q) == 3 and q[2] > q[1] else None
    if node.op == "neg":
        return _size(node.args[0], hints)
    if node.op == "pow" and node.args[1].op == "num":
        base = _size(node.args[0], hints)
        return None if base is None else base ** float(node.args[1].value or 0.0) or None
    if node.op in ("mul", "div"):
        a, b = (_size(arg, hints) for arg in node.args)
        if a is None or b is None:
            return None
        return a * b if node.op == "mul" else a / b
    return None


def _chain(node: Node, inverted: bool, out: list[tuple[Node, bool]]) -> None:
    """The factors of a chain of products, quotients and negations, each with whether it
    divides."""
    if node.op == "neg":
        _chain(node.args[0], inverted, out)
    elif node.op == "mul":
        for arg in node.args:
            _chain(arg, inverted, out)
    elif node.op == "div":
        _chain(node.args[0], inverted, out)
        _chain(node.args[1], not inverted, out)
    else:
        out.append((node, inverted))


def _rate(node: Node, hints: DataHints) -> tuple[str, float] | None:
    """``(constant, size)`` when the chain ``node`` is one constant (multiplying) times or over
    arguments that all have a typical size (:func:`_size`), ``size`` their product."""
    factors: list[tuple[Node, bool]] = []
    _chain(node, False, factors)
    constants = [(f, inv) for f, inv in factors if f.op == "const"]
    if len(constants) != 1 or constants[0][1] or len(factors) < 2:
        return None
    size = 1.0
    for f, inv in factors:
        if f.op == "const":
            continue
        m = _size(f, hints)
        if m is None:
            return None
        size = size / m if inv else size * m
    return (str(constants[0][0].name), size) if np.isfinite(size) and size > 0 else None


def _rates(tree: Node, hints: DataHints) -> dict[str, float]:
    """Constants that scale an argument inside a function other than ``sin``/``cos`` (name ->
    the argument's typical size)."""
    found: dict[str, float] = {}
    stack: list[tuple[Node, bool, bool, bool]] = [(tree, False, False, False)]
    while stack:  # (node, in sin/cos, in a function, the parent is a product or quotient)
        node, periodic, inside, in_chain = stack.pop()
        chain = node.op in ("mul", "div") or (node.op == "neg" and in_chain)
        if node.op in ("mul", "div", "neg") and inside and not periodic and not in_chain:
            hit = _rate(node, hints)
            if hit is not None:
                found.setdefault(*hit)
        child_periodic = periodic or node.op in ("sin", "cos")
        child_inside = inside or node.op in _FUNCTIONS
        for child in node.args:
            stack.append((child, child_periodic, child_inside, chain))
    return found


def _patterns(tree: Node) -> tuple[dict[str, str], dict[str, tuple[str, float]]]:
    """Constants that are a frequency of a variable (name -> variable) and constants that
    shift a variable (name -> (variable, sign): the start is ``sign * quantile``)."""
    frequency: dict[str, str] = {}
    shift: dict[str, tuple[str, float]] = {}
    stack: list[tuple[Node, bool, bool]] = [(tree, False, False)]  # (node, in sin/cos, in function)
    while stack:
        node, periodic, inside = stack.pop()
        if node.op == "mul" and periodic:
            found = _pair(node, "const", "var")
            if found is not None:
                frequency.setdefault(str(found[0].name), str(found[1].name))
        if node.op in ("add", "sub") and inside:
            found = _pair(node, "const", "var")
            if found is not None:
                c, v = found
                # x - c and c - x centre at c = q; x + c and c + x at c = -q.
                sign = 1.0 if node.op == "sub" else -1.0
                shift.setdefault(str(c.name), (str(v.name), sign))
        child_periodic = periodic or node.op in ("sin", "cos")
        child_inside = inside or node.op in _FUNCTIONS or node.op == "pow"
        for child in node.args:
            stack.append((child, child_periodic, child_inside))
    return frequency, shift


def hinted_restarts(tree: Node, constants: Sequence[str], restarts: np.ndarray,
                    hints: DataHints) -> np.ndarray:
    """``restarts`` (restarts x constants, columns in ``constants``' order) with data-driven
    values for the frequency, shift and rate constants of ``tree`` in rows 1 .. R-2 (row 1 of
    two; rates alternate ``+1/m``, ``-1/m``);
    a copy, or ``restarts`` itself when nothing matches."""
    if restarts.shape[0] < 2 or not constants:
        return restarts
    rows = range(1, max(2, restarts.shape[0] - 1))
    frequency, shift = _patterns(tree)
    column = {name: j for j, name in enumerate(constants)}
    out = restarts
    for name, variable in frequency.items():
        values = hints.frequencies.get(variable, ())
        if name in column and values:
            out = out.copy() if out is restarts else out
            for r in rows:
                out[r, column[name]] = values[(r - 1) % len(values)]
    for name, (variable, sign) in shift.items():
        values = hints.quantiles.get(variable, ())
        if name in column and name not in frequency and values:
            out = out.copy() if out is restarts else out
            for r in rows:
                out[r, column[name]] = sign * values[(r - 1) % len(values)]
    for name, size in _rates(tree, hints).items() if hints.magnitudes else ():
        if name in column and name not in frequency and name not in shift:
            out = out.copy() if out is restarts else out
            for r in rows:
                out[r, column[name]] = (1.0 if r % 2 else -1.0) / size
    return out
