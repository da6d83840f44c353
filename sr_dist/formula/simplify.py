"""The form a person reads: a fitted formula with its constants snapped, dead terms dropped, and
sympy's cheap rewrites, each kept only when the data say it fits as well.

A fitted candidate is stored as text with free constants (``q*(c0*Ef + c1*B*v*sin(theta) + c2)``)
plus their fitted values (``c0=1.0000001, c1=0.99999, c2=6.2e-08``). :func:`simplify_formula`
turns that into ``q*(Ef + B*v*sin(theta))``. The rules, in order:

1. **Write the numbers in** and tidy the tree (``x*1 -> x``, ``x + 0 -> x``, ``0*x -> 0``,
   ``x**1 -> x``, ``-(-x) -> x``, literal arithmetic whose result is short).
2. **Snap each constant**: to ``0`` (the term is dropped) if that fits, else to the shortest
   text that fits among an integer, a rational ``p/q`` with ``q <= 12``, ``p/q`` times ``pi``,
   ``1/pi`` or ``e`` (``2*pi``, ``pi/2``, ``1/(4*pi)``: the families
   :data:`~sr_dist.formula.constants.SIMPLIFIER_FAMILIES` of the closed-form catalog shared with
   the exactness judge, :mod:`sr_dist.formula.constants`), each tried only within a relative
   distance of :data:`SNAP_WINDOW` of the fitted value, and the value rounded to 1, 2, ... 12
   significant digits (nearest first among equally short ones: on an exact fit ``pi`` wins over
   ``3.1``, which does not fit; on a noisy one ``3.72`` wins over ``26/7``). The nearest closed
   forms of all constants are tried jointly first (so a pair such as ``c0*x/c1`` that only
   fits when both snap is found), then each constant greedily, in order of first appearance.
3. **sympy** (with a hard deadline): the tree as sympy builds it (like terms combined), then
   ``factor_terms``, ``powsimp``, ``together``, ``cancel`` and ``factor``; the shortest form
   that fits wins if it is shorter than the current one. Then a second snap pass over the numbers
   sympy produced (``0.333333 + 0.666667 -> 1``).

**The tolerance.** A change is kept only if the NMSE of the new form on the rows given (the
validation split, in sr-dist's own callers) stays within
``new_nmse <= raw_nmse * (1 + rel_tol) + SIMPLIFY_ABS_TOL``, always against the *raw* fitted
formula's NMSE, so small losses never add up past the bound. ``rel_tol`` defaults to
:data:`SIMPLIFY_REL_TOL` = 1e-2: a form 1% worse than the fit is inside the sampling noise of
any validation split (the NMSE of ``n`` rows is known to about ``sqrt(2/n)``, 4% at 1000 rows).
The absolute floor :data:`SIMPLIFY_ABS_TOL` = 1e-12 is ``NMSE_RESOLUTION`` (sr_dist.candidate):
below it NMSE differences are float rounding noise, so an exact fit at 1e-15 may be replaced by
its closed form at 1e-13. At most :data:`MAX_CHECK_ROWS` evenly spaced rows are used.

**Why sympy runs in a thread, with cheap passes only.** ``sympy.simplify`` can run for minutes
on a 200-node formula, and a call here happens for every Pareto entry of every run. A child
process could be killed at the deadline, but each one pays sympy's import (0.3-0.6 s measured on
2 cores) and forking a Ray worker is unsafe. So only bounded rewrites are used (no ``simplify``,
no ``trigsimp``, no ``expand``), each on a formula of at most :data:`MAX_NODES` nodes (larger ones skip sympy), and they run
in a daemon thread that the caller stops waiting for at the deadline, cheapest first: the forms
done by then are used, a slow pass costs at worst some background CPU, never the run, and its
result is dropped.

:func:`simplify_formula` never raises on a bad formula or bad data: it returns the raw form with
``changed=False`` and a step saying why.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from .constants import SIMPLIFIER_FAMILIES, SIMPLIFIER_MAX_DENOMINATOR, Scaled
from .core import parse_formula
from .errors import FormulaError
from .nodes import NAMED_NUMBERS, Node
from .numeric import evaluate_numpy
from .render import format_number, render, to_sympy
from .tree import fold_tree, iter_nodes, replace_leaves

if TYPE_CHECKING:  # pragma: no cover - typing only
    import sympy  # type: ignore[import-untyped]  # sympy ships no type information

__all__ = [
    "MAX_CHECK_ROWS",
    "MAX_NODES",
    "SIMPLIFY_ABS_TOL",
    "SIMPLIFY_REL_TOL",
    "SNAP_WINDOW",
    "Simplified",
    "simplify_formula",
    "written_in",
    "sympy_expression",
]

#: Default relative NMSE tolerance of a simplification (see the module docstring).
SIMPLIFY_REL_TOL = 1e-2
#: Absolute NMSE floor of the tolerance; equal to ``sr_dist.candidate.NMSE_RESOLUTION``.
SIMPLIFY_ABS_TOL = 1e-12
#: A closed form is tried for a constant only within this relative distance of its value.
SNAP_WINDOW = 1e-3
#: At most this many rows (evenly spaced) are used for the NMSE checks.
MAX_CHECK_ROWS = 4096
#: Formulas larger than this skip the sympy passes: a pass cut off at the deadline keeps running
#: in its thread, and on large trees even the cheap passes take seconds.
MAX_NODES = 60
#: Largest denominator of a snapped rational (the catalog's ``SIMPLIFIER_MAX_DENOMINATOR``).
MAX_DENOMINATOR = SIMPLIFIER_MAX_DENOMINATOR
#: Most significant digits a constant is rounded to before it is left as fitted.
MAX_DIGITS = 12


@dataclass(frozen=True)
class Simplified:
    """A simplified formula and the evidence that it fits as well as the raw one.

    ``expression`` is in sr-dist's formula language with the numbers written in (no free
    constants; ``parse_formula`` reads it); ``sympy_text`` is ``str()`` of its sympy form;
    ``nmse``/``raw_nmse`` are the simplified and raw forms' NMSE on the rows checked;
    ``changed`` is False when nothing could be simplified within tolerance (or the input was
    unusable); ``steps`` says what was done, or why nothing was.
    """

    expression: str
    sympy_text: str
    nmse: float
    raw_nmse: float
    changed: bool
    steps: tuple[str, ...]


class _Unsupported(Exception):
    """A sympy expression with no counterpart in the formula language."""


# --------------------------------------------------------------------------- numbers and trees

def _num(value: float, name: str | None = None) -> Node:
    return Node("num", (), float(value), name)


def _plain_num(node: Node) -> bool:
    return node.op == "num" and node.name is None


def _short(value: float) -> bool:
    """A literal worth writing as a number rather than as the expression that made it."""
    return math.isfinite(value) and len(format_number(value)) <= 8


def _tidy_node(node: Node, kids: tuple[Node, ...]) -> Node:  # noqa: C901, PLR0911, PLR0912
    op = node.op
    if not kids:
        return node
    if len(kids) == 1:
        (a,) = kids
        if op == "neg":
            if a.op == "neg":
                return a.args[0]
            if _plain_num(a):
                return _num(-float(a.value or 0.0))
        elif _plain_num(a) and op in ("abs",):
            return _num(abs(float(a.value or 0.0)))
        return Node(op, kids)
    a, b = kids
    av = a.value if _plain_num(a) else None
    bv = b.value if _plain_num(b) else None
    if av is not None and bv is not None and op != "pow":
        with np.errstate(all="ignore"):
            folded = {"add": av + bv, "sub": av - bv, "mul": av * bv,
                      "div": av / bv if bv != 0 else math.nan}[op]
        if _short(folded):
            return _num(folded)
    if op == "add":
        if av == 0:
            return b
        if bv == 0:
            return a
        if bv is not None and bv < 0:
            return Node("sub", (a, _num(-bv)))
        if b.op == "neg":
            return Node("sub", (a, b.args[0]))
        if a.op == "neg":
            return Node("sub", (b, a.args[0]))
    elif op == "sub":
        if bv == 0:
            return a
        if av == 0:
            return _tidy_node(Node("neg"), (b,))
        if bv is not None and bv < 0:
            return Node("add", (a, _num(-bv)))
        if b.op == "neg":
            return Node("add", (a, b.args[0]))
    elif op == "mul":
        if av == 0 or bv == 0:
            return _num(0.0)
        if av == 1:
            return b
        if bv == 1:
            return a
        if av == -1:
            return _tidy_node(Node("neg"), (b,))
        if bv == -1:
            return _tidy_node(Node("neg"), (a,))
        if a.op == "neg" and b.op == "neg":
            return Node("mul", (a.args[0], b.args[0]))
    elif op == "div":
        if av == 0:
            return _num(0.0)
        if bv == 1:
            return a
        if bv == -1:
            return _tidy_node(Node("neg"), (a,))
    elif op == "pow":
        if bv == 1:
            return a
        if bv == 0 or av == 1:
            return _num(1.0)
        if av is not None and bv is not None and float(bv).is_integer() and abs(bv) <= 8:
            with np.errstate(all="ignore"):
                folded = float(np.power(av, bv))
            if _short(folded):
                return _num(folded)
    return Node(op, kids)


def _tidy(tree: Node) -> Node:
    """Apply the tidy rules until nothing changes (each pass shrinks or keeps the tree)."""
    for _ in range(8):
        tidier = fold_tree(tree, _tidy_node)
        if tidier == tree:
            break
        tree = tidier
    return tree


def _substitute(tree: Node, values: Mapping[str, Node]) -> Node:
    return replace_leaves(tree, "const", values)


def _shortest_nearest(value: float, form: _Closed) -> tuple[int, float]:
    """Order of closed forms for ``value``: the shortest text, then the nearest value."""
    return len(form.text), abs(form.value - value)


def _size(tree: Node) -> int:
    return sum(1 for _ in iter_nodes(tree))


# --------------------------------------------------------------------------- closed forms

@dataclass(frozen=True)
class _Closed:
    """One closed form tried for a constant: its tree, its value and how it reads in a step."""

    node: Node
    value: float
    text: str


def _rational_node(p: int, q: int) -> Node:
    if q == 1 or _short(p / q):
        return _num(p / q)
    node = Node("div", (_num(abs(p)), _num(q)))
    return Node("neg", (node,)) if p < 0 else node


def _scaled(p: int, q: int, family: Scaled) -> Node:
    """A member ``p/q * base**power`` of a family with ``power`` 1 or -1 (no root) as a
    readable tree: ``2*pi``, ``pi/2``, ``3*e/4``, ``1/(4*pi)``."""
    atom = _num(NAMED_NUMBERS[family.base], family.base)
    if family.power == -1:
        den: Node = atom if q == 1 else Node("mul", (_num(q), atom))
        node = Node("div", (_num(abs(p)), den))
    else:
        top = atom if abs(p) == 1 else Node("mul", (_num(abs(p)), atom))
        node = top if q == 1 else Node("div", (top, _num(q)))
    return Node("neg", (node,)) if p < 0 else node


def _closed_forms(value: float, allowed: frozenset[str]) -> list[_Closed]:
    """Closed forms within :data:`SNAP_WINDOW` of ``value``, simplest first: the members of
    :data:`~sr_dist.formula.constants.SIMPLIFIER_FAMILIES` (those naming a number only when
    ``allowed`` holds it) with ``q <= MAX_DENOMINATOR``, in lowest terms."""
    out: list[_Closed] = []
    magnitude = abs(value)
    if magnitude == 0.0 or not math.isfinite(value):
        return out
    families = [f for f in SIMPLIFIER_FAMILIES if f.named is None or f.named in allowed]
    for family in families:
        for q in range(1, MAX_DENOMINATOR + 1):
            target = family.target(value, q)
            if not math.isfinite(target) or abs(target) > 1e15:
                continue
            p = round(target)
            if p == 0 or math.gcd(p, q) != 1:
                continue
            approx = family.value(p, q)
            if abs(approx - value) > SNAP_WINDOW * magnitude:
                continue
            node = _rational_node(p, q) if family.named is None else _scaled(p, q, family)
            out.append(_Closed(node, approx, render(node)))
    return out


def _rounded(value: float) -> Iterator[_Closed]:
    """``value`` rounded to 1, 2, ... significant digits (each distinct, shorter than it)."""
    if value == 0.0 or not math.isfinite(value):
        return
    seen: set[float] = set()
    full = format_number(value)
    for digits in range(1, MAX_DIGITS + 1):
        approx = float(f"{value:.{digits}g}")
        text = format_number(approx)
        if approx in seen or approx == value or len(text) >= len(full):
            continue
        seen.add(approx)
        yield _Closed(_num(approx), approx, text)


def _alternatives(value: float, allowed: frozenset[str], digits: bool) -> Iterator[_Closed]:
    """What a constant may become, simplest first: 0, then the closed forms and (when
    ``digits``) the roundings, shortest text first, nearest first among equally short ones."""
    yield _Closed(_num(0.0), 0.0, "0")
    forms = _closed_forms(value, allowed)
    if digits:
        taken = {c.value for c in forms}
        forms += [r for r in _rounded(value) if r.value not in taken]
    yield from sorted(forms, key=lambda c: (len(c.text), abs(c.value - value)))


# --------------------------------------------------------------------------- the NMSE check

@dataclass(frozen=True)
class _Rows:
    """The rows a form is checked on and the bound a change must stay within."""

    X: np.ndarray
    y: np.ndarray
    variance: float
    variables: tuple[str, ...]

    def nmse(self, tree: Node) -> float:
        try:
            pred = evaluate_numpy(tree, self.X, self.variables)
        except (ValueError, FormulaError, ArithmeticError):
            return math.inf
        if not np.all(np.isfinite(pred)):
            return math.inf
        with np.errstate(all="ignore"):  # an overflow is an infinite NMSE, not a warning
            mse = float(np.mean((pred - self.y) ** 2))
        if not math.isfinite(mse):
            return math.inf
        if self.variance > 0.0:
            return mse / self.variance
        return 0.0 if mse == 0.0 else math.inf


def _rows(X: np.ndarray, y: np.ndarray, variables: tuple[str, ...]) -> _Rows:
    data = np.asarray(X, dtype=np.float64)
    target = np.asarray(y, dtype=np.float64).reshape(-1)
    if data.ndim == 1 and len(variables) == 1:
        data = data.reshape(-1, 1)
    if data.ndim != 2 or data.shape[1] != len(variables):
        raise ValueError(f"X must be 2-D with one column per variable ({len(variables)}), "
                         f"got shape {data.shape}")
    if data.shape[0] != target.shape[0]:
        raise ValueError(f"X has {data.shape[0]} rows but y has {target.shape[0]}")
    keep = np.all(np.isfinite(data), axis=1) & np.isfinite(target)
    data, target = data[keep], target[keep]
    if target.shape[0] == 0:
        raise ValueError("no rows with finite X and y to check the simplification on")
    if target.shape[0] > MAX_CHECK_ROWS:
        pick = np.linspace(0, target.shape[0] - 1, MAX_CHECK_ROWS).round().astype(int)
        data, target = data[pick], target[pick]
    return _Rows(data, target, float(np.var(target)), variables)


# --------------------------------------------------------------------------- sympy

_SYMPY_FUNCTIONS = {
    "sin": "sin", "cos": "cos", "tan": "tan", "exp": "exp", "log": "log", "Abs": "abs",
    "tanh": "tanh", "sinh": "sinh", "cosh": "cosh", "asin": "arcsin", "acos": "arccos",
    "atan": "arctan",
}


def _product(nodes: list[Node]) -> Node:
    out = nodes[0]
    for node in nodes[1:]:
        out = Node("mul", (out, node))
    return out


def _from_sympy(expr: Any, variables: frozenset[str]) -> Node:  # noqa: C901, PLR0911, PLR0912
    """The formula-language tree of a sympy expression; :class:`_Unsupported` if it has none."""
    import sympy

    if expr is sympy.pi:
        return _num(math.pi, "pi")
    if expr is sympy.E:
        return _num(math.e, "e")
    if isinstance(expr, sympy.Integer):
        return _num(float(int(expr)))
    if isinstance(expr, sympy.Rational):
        return _rational_node(int(expr.p), int(expr.q))
    if isinstance(expr, sympy.Float):
        value = float(expr)
        if not math.isfinite(value):
            raise _Unsupported("a non-finite number")
        return _num(value)
    if isinstance(expr, sympy.Symbol):
        if expr.name not in variables:
            raise _Unsupported(f"unknown symbol {expr.name}")
        return Node("var", (), None, expr.name)
    if isinstance(expr, sympy.Add):
        terms = list(expr.as_ordered_terms())
        out = _from_sympy(terms[0], variables)
        for term in terms[1:]:
            if term.could_extract_minus_sign():
                out = Node("sub", (out, _from_sympy(-term, variables)))
            else:
                out = Node("add", (out, _from_sympy(term, variables)))
        return out
    if isinstance(expr, sympy.Mul):
        coeff, factors = expr.as_coeff_mul()
        top: list[Node] = []
        bottom: list[Node] = []
        negative = bool(coeff < 0)
        coeff = -coeff if negative else coeff
        if isinstance(coeff, sympy.Rational) and not isinstance(coeff, sympy.Integer):
            if coeff.p != 1 and _short(float(coeff)):  # 2.5*x, but x/4 and 2*x/3
                top.append(_num(float(coeff)))
            else:
                if coeff.p != 1:
                    top.append(_num(float(coeff.p)))
                bottom.append(_num(float(coeff.q)))
        elif coeff != 1:
            top.append(_from_sympy(coeff, variables))
        for factor in factors:
            if isinstance(factor, sympy.Pow) and factor.exp.is_number and factor.exp < 0:
                bottom.append(_from_sympy(factor.base ** (-factor.exp), variables))
            else:
                top.append(_from_sympy(factor, variables))
        node = _product(top) if top else _num(1.0)
        if bottom:
            node = Node("div", (node, _product(bottom)))
        return Node("neg", (node,)) if negative else node
    if isinstance(expr, sympy.Pow):
        base, exponent = expr.args
        if exponent == sympy.Rational(1, 2):
            return Node("sqrt", (_from_sympy(base, variables),))
        if exponent.is_number and exponent < 0:
            return Node("div", (_num(1.0), _from_sympy(base ** (-exponent), variables)))
        return Node("pow", (_from_sympy(base, variables), _from_sympy(exponent, variables)))
    name = type(expr).__name__
    if name in _SYMPY_FUNCTIONS and len(expr.args) == 1:
        return Node(_SYMPY_FUNCTIONS[name], (_from_sympy(expr.args[0], variables),))
    raise _Unsupported(f"sympy {name} has no counterpart in the formula language")


def _sympy_candidates(tree: Node, variables: frozenset[str], out: list[Node]) -> None:
    """Append the tree as sympy builds it, then its form after each bounded rewrite (cheapest
    first, so a deadline cuts off the dearest; see the module docstring), to ``out``."""
    import sympy

    expr = to_sympy(tree)
    passes: tuple[Callable[[Any], Any], ...] = (
        lambda e: e, sympy.factor_terms, sympy.powsimp, sympy.together, sympy.cancel,
        sympy.factor,
    )
    for rewrite in passes:
        try:
            out.append(_from_sympy(rewrite(expr), variables))
        except (_Unsupported, TypeError, ValueError, AttributeError, RecursionError,
                ZeroDivisionError, sympy.PolynomialError):
            continue


def _with_deadline(fn: Callable[[list[Node]], None], seconds: float) -> tuple[list[Node], bool]:
    """Run ``fn(out)`` in a daemon thread for at most ``seconds``: what it appended by then,
    and whether it finished (a pass still running is left to finish in the background; its
    result is dropped)."""
    out: list[Node] = []
    done = threading.Event()

    def work() -> None:
        try:
            fn(out)
        except Exception:  # noqa: BLE001 - any sympy failure just means fewer sympy forms
            pass
        finally:
            done.set()

    worker = threading.Thread(target=work, name="sr-dist-simplify", daemon=True)
    worker.start()
    finished = done.wait(max(seconds, 0.0))
    return list(out), finished


def sympy_expression(simplified_expression: str, variables: Sequence[str]) -> sympy.Expr:
    """The sympy form of a simplified expression (real symbols; ``pi``/``e`` exact), built
    from the parsed tree, never by ``sympify``: the exports start from this."""
    return parse_formula(simplified_expression, variables).to_sympy()


# --------------------------------------------------------------------------- the search

def _bind(names: tuple[str, ...], constants: Sequence[float] | Mapping[str, float]) -> dict[str, float]:
    """Values by constant name: a mapping by name; a sequence by index when the constants
    are named ``c0, c1, ...``, else in order of first appearance."""
    if isinstance(constants, Mapping):
        values = {str(k): float(v) for k, v in constants.items()}
    else:
        seq = [float(v) for v in constants]
        indexed = [re.fullmatch(r"c([0-9]+)", n) for n in names]
        if all(m is not None and int(m.group(1)) < len(seq) for m in indexed):
            values = {n: seq[int(m.group(1))] for n, m in zip(names, indexed) if m is not None}
        elif len(seq) == len(names):
            values = dict(zip(names, seq))
        else:
            raise ValueError(f"the formula has {len(names)} constants ({', '.join(names)}) "
                             f"but {len(seq)} values were given")
    missing = [n for n in names if n not in values]
    if missing:
        raise ValueError(f"no value given for constants: {', '.join(missing)}")
    bad = [n for n in names if not math.isfinite(values[n])]
    if bad:
        raise ValueError(f"constants without a finite fitted value: {', '.join(bad)}")
    return {n: values[n] for n in names}


def _fmt(value: float) -> str:
    return f"{value:.12g}"


class _Search:
    """The state of one simplification: current tree, the bound, the clock, the steps."""

    def __init__(self, rows: _Rows, raw_nmse: float, rel_tol: float, deadline: float,
                 allowed: frozenset[str]) -> None:
        self.rows = rows
        self.bound = raw_nmse * (1.0 + rel_tol) + SIMPLIFY_ABS_TOL
        self.deadline = deadline
        self.allowed = allowed
        self.steps: list[str] = []

    def late(self) -> bool:
        return time.monotonic() > self.deadline

    def fits(self, tree: Node) -> float | None:
        value = self.rows.nmse(tree)
        return value if value <= self.bound else None

    def snap(self, tree: Node, values: dict[str, float], label: Callable[[str], str],
             digits: bool) -> Node:
        """Snap the constants of ``tree`` (const nodes named in ``values``): jointly, then
        greedily (rounding to fewer digits too when ``digits``); returns the tree with every
        constant written in. ``label`` names a constant in the steps ("" for a bare literal)."""
        chosen: dict[str, Node] = {n: _num(v) for n, v in values.items()}
        texts: dict[str, str] = {}
        firsts: dict[str, _Closed] = {}
        for name, value in values.items():
            forms = _closed_forms(value, self.allowed)
            if forms:  # the shortest, then nearest, as the one-at-a-time pass orders them
                firsts[name] = min(forms, key=partial(_shortest_nearest, value))
        if len(firsts) > 1:
            trial = {**chosen, **{n: c.node for n, c in firsts.items()}}
            if self.fits(_tidy(_substitute(tree, trial))) is not None:
                chosen = trial
                texts.update({n: c.text for n, c in firsts.items()})
        for name, value in values.items():
            if name in texts:
                continue
            for alt in _alternatives(value, self.allowed, digits):
                if self.late():
                    self.steps.append("deadline reached while snapping constants")
                    return _tidy(_substitute(tree, chosen))
                trial = {**chosen, name: alt.node}
                if self.fits(_tidy(_substitute(tree, trial))) is not None:
                    chosen = trial
                    texts[name] = alt.text
                    break
        for name, text in texts.items():
            if text == format_number(values[name]):
                continue
            what = f"{label(name)}={_fmt(values[name])}" if label(name) else _fmt(values[name])
            self.steps.append(f"dropped {what}" if text == "0" else f"{what} -> {text}")
        return _tidy(_substitute(tree, chosen))

    def resnap(self, tree: Node, digits: bool) -> Node:
        """Snap the literals in ``tree`` that are not already closed forms (those left as
        fitted, those sympy made) like constants."""
        values: dict[str, float] = {}

        def lift(node: Node, kids: tuple[Node, ...]) -> Node:
            if _plain_num(node) and _needs_snap(float(node.value or 0.0), self.allowed):
                name = f"_s{len(values)}"
                values[name] = float(node.value or 0.0)
                return Node("const", (), None, name)
            return Node(node.op, kids, node.value, node.name) if kids else node

        lifted = fold_tree(tree, lift)
        if not values:
            return tree
        return self.snap(lifted, values, lambda n: "", digits)


def _needs_snap(value: float, allowed: frozenset[str]) -> bool:
    if value.is_integer():
        return False
    forms = _closed_forms(value, allowed)
    return not (forms and forms[0].value == value and _plain_num(forms[0].node))


def _key(tree: Node) -> tuple[int, int]:
    """What "simpler" means: shorter text, then fewer nodes."""
    return len(render(tree)), _size(tree)


def _give_up(expression: str, raw_nmse: float, why: str,
             written: str | None = None) -> Simplified:
    """The raw form, with its fitted numbers written in when they are known (``written``):
    callers evaluate ``expression`` without constants."""
    text = written if written is not None else expression
    return Simplified(text, text, raw_nmse, raw_nmse, False, (why,))


def written_in(expression: str, constants: Sequence[float] | Mapping[str, float],
               variables: Sequence[str]) -> str | None:
    """``expression`` with the fitted values in place of its constants, or ``None`` when it
    does not parse or a value is missing or not finite."""
    names = tuple(str(v) for v in variables)
    try:
        formula = parse_formula(expression, names)
        values = _bind(formula.constants, constants)
    except (FormulaError, ValueError, TypeError):
        return None
    return render(_substitute(formula.tree, {n: _num(v) for n, v in values.items()}))


def _sympy_text(tree: Node) -> str:
    try:
        return str(to_sympy(tree))
    except Exception:  # noqa: BLE001 - the text is informative only
        return render(tree)


def _pick_sympy(search: _Search, tree: Node, found: list[Node]) -> Node:
    """The simplest sympy form that fits (its new literals snapped), if simpler than ``tree``."""
    best, best_key = tree, _key(tree)
    seen = {render(tree)}
    for candidate in found:
        candidate = _tidy(candidate)
        text = render(candidate)
        if text in seen or search.late():
            continue
        seen.add(text)
        if search.fits(candidate) is None:
            continue
        steps = list(search.steps)
        snapped = search.resnap(candidate, digits=False)
        if _key(snapped) < best_key:
            best, best_key, kept = snapped, _key(snapped), [*search.steps, "sympy simplify"]
        search.steps = steps
    if best is not tree:
        search.steps = kept
    return best


def simplify_formula(
    expression: str,
    constants: Sequence[float] | Mapping[str, float],
    X: np.ndarray,
    y: np.ndarray,
    variables: Sequence[str],
    *,
    rel_tol: float = SIMPLIFY_REL_TOL,
    deadline_s: float = 2.0,
) -> Simplified:
    """The simplest form of a fitted formula that fits ``(X, y)`` as well, to the tolerance.

    ``constants`` are the fitted values: a mapping by constant name, or a sequence (by index
    for constants named ``c0, c1, ...``, else in order of first appearance). ``X`` has one
    column per name in ``variables``. See the module docstring for the rules and the tolerance.
    Never raises for a bad formula or bad data: the raw form comes back, ``changed=False``.
    """
    try:
        return _simplify(expression, constants, X, y, variables, rel_tol, deadline_s)
    except Exception as exc:  # noqa: BLE001 - a readable form is a nicety, never a failure
        try:
            written = written_in(str(expression), constants, variables)
        except Exception:  # noqa: BLE001 - the same failure again: keep the text as given
            written = None
        return _give_up(str(expression), math.inf,
                        f"not simplified: {type(exc).__name__}: {exc} (please report this formula)",
                        written)


def _simplify(  # noqa: C901, PLR0911, PLR0912
    expression: str,
    constants: Sequence[float] | Mapping[str, float],
    X: np.ndarray,
    y: np.ndarray,
    variables: Sequence[str],
    rel_tol: float,
    deadline_s: float,
) -> Simplified:
    import sympy  # noqa: F401 - imported before the clock starts: the import is not the work

    start = time.monotonic()
    deadline = start + max(float(deadline_s), 0.0)
    names = tuple(str(v) for v in variables)
    try:
        formula = parse_formula(expression, names)
    except FormulaError as exc:
        return _give_up(str(expression), math.inf, f"not simplified: the formula does not parse ({exc})")
    try:
        values = _bind(formula.constants, constants)
        rows = _rows(X, y, names)
    except (ValueError, TypeError) as exc:
        return _give_up(expression, math.inf, f"not simplified: {exc}")
    raw_tree = _substitute(formula.tree, {n: _num(v) for n, v in values.items()})
    raw_text = render(raw_tree)
    raw_nmse = rows.nmse(raw_tree)
    if not math.isfinite(raw_nmse):
        return Simplified(raw_text, _sympy_text(raw_tree), raw_nmse, raw_nmse, False,
                          ("not simplified: the fitted formula is not finite on every row checked",))
    allowed = frozenset(n for n in NAMED_NUMBERS if n not in names)
    search = _Search(rows, raw_nmse, rel_tol, deadline, allowed)
    tidy_raw = _tidy(formula.tree)  # 1*x, x+0 written by the model itself
    if tidy_raw != formula.tree:
        search.steps.append("tidied (x*1, x + 0, -(-x) and the like)")
    tree = search.snap(tidy_raw, values, lambda n: n, digits=True)
    if search.fits(tree) is None:  # a snap that only fitted before tidying: keep the raw form
        tree, search.steps = raw_tree, ["kept the fitted constants (no snap fitted)"]
    if _size(tree) > MAX_NODES:
        search.steps.append(f"sympy step skipped: more than {MAX_NODES} nodes")
    elif not search.late():
        remaining = deadline - time.monotonic()
        found, finished = _with_deadline(
            lambda out: _sympy_candidates(tree, frozenset(names), out), remaining)
        if not finished:
            search.steps.append("sympy step cut short: deadline reached")
        tree = _pick_sympy(search, tree, found)
    if not search.late():
        tree = search.resnap(tree, digits=True)
    # The text is what callers get: check that it reads back and fits, else fall back.
    text = render(tree)
    try:
        final = parse_formula(text, names)
        nmse = rows.nmse(final.tree) if not final.constants else math.inf
    except FormulaError:
        nmse = math.inf
    if nmse > search.bound:
        return Simplified(raw_text, _sympy_text(raw_tree), raw_nmse, raw_nmse, False,
                          ("not simplified: the simplified text did not read back to the same fit",))
    changed = text != raw_text
    steps = tuple(search.steps) if changed else ("nothing to simplify within tolerance",)
    return Simplified(text, _sympy_text(tree), nmse, raw_nmse, changed, steps)
