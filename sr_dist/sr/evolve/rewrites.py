"""Rewrites of a fitted solution that keep its function: phase forms, negligible terms dropped.

**Phase forms** (:func:`phase_forms`): ``a*F*sin(u) + b*F*cos(u)`` as ``R*F*sin(u + p)``. A
sinusoid with a phase, ``sin(u + p)``, is linear in ``sin(u)`` and ``cos(u)``
(``R*sin(u + p) = R*cos(p)*sin(u) + R*sin(p)*cos(u)``), so the search and the library's sparse
sums often find it as that pair of terms: exact on the data, but longer, and its constants are
``R*cos(p)`` and ``R*sin(p)`` rather than the phase a person writes. The judge reads such a
constant back only where it happens to be a closed form it tries; a phase it reads back in any
quarter turn (:mod:`sr_dist.results.recovery`). A pair of terms ``a*F*sin(u)`` and
``b*F*cos(u)`` of one sum (the same ``u`` and the same other factors ``F``; ``a`` and ``b``
products of literals and free constants, at least one of those free) becomes ``R*F*sin(u + p)``
with ``R = hypot(a, b)`` and ``p = atan2(b, a)``: the same values, one to three nodes fewer.

**Negligible terms** (:func:`without_negligible_terms`): a sum fitted exactly often keeps a term
whose constant the fit drove to nothing (``c4*exp(1/x1)`` with ``c4 = 8e-21``): the law without
it is shorter and the rest of its constants are already right.

Both keep the fitted values on the constants they keep or make, so the evaluator refits them
from there (a local search). The search offers them for its solutions
(``EvolveConfig.phase_forms``, ``EvolveConfig.drop_negligible_terms``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

from sr_dist.formula import Node
from sr_dist.sr.evolve.tree import (
    Path,
    binary,
    product,
    render,
    replace,
    signed_sum,
    tidy,
    unary,
    walk,
)

__all__ = ["NEGLIGIBLE", "phase_forms", "without_negligible_terms"]

_SUMS = frozenset({"add", "sub"})
_WAVES = frozenset({"sin", "cos"})
#: Relative difference under which two fitted constants of ``u`` or ``F`` count as the same.
SAME_VALUE_RTOL = 1e-6
#: Rewrites applied one after another for the form with every pair rewritten.
MAX_PAIRS = 8
#: A term whose constant factor is below this share of the largest one in its sum is dropped.
NEGLIGIBLE = 1e-9

#: A signed term of a sum: (+1 or -1, the term).
_Signed = tuple[int, Node]


class _Wave(NamedTuple):
    """A term ``k*F*sin(u)`` (or ``cos``): ``k`` the product of its literals and free
    constants, ``F`` its other factors."""

    function: str
    argument: Node
    #: ``k`` with the term's sign; None where a free constant of it carries no value.
    coefficient: float | None
    #: Whether ``k`` is known exactly (literals only, or none): nothing fitted to read back.
    known: bool
    #: ``F``'s factors, in the order of their text.
    cofactors: tuple[Node, ...]


def _signed_terms(node: Node, sign: int = 1) -> Iterator[_Signed]:
    """The terms of a sum with their signs (``a - (b - c)`` gives ``+a, -b, +c``)."""
    if node.op == "add":
        yield from _signed_terms(node.args[0], sign)
        yield from _signed_terms(node.args[1], sign)
    elif node.op == "sub":
        yield from _signed_terms(node.args[0], sign)
        yield from _signed_terms(node.args[1], -sign)
    elif node.op == "neg":
        yield from _signed_terms(node.args[0], -sign)
    elif node.op == "mul" and _has_neg_factor(node):
        # ``-c*X`` parses as ``(-c)*X``, whose ``neg`` tidy would fold into a valueless constant
        sign, factors = _factors(node, sign)
        yield sign, product(factors)
    else:
        yield sign, node


def _has_neg_factor(node: Node) -> bool:
    return node.op == "neg" or node.op == "mul" and any(_has_neg_factor(a) for a in node.args)


def _factors(node: Node, sign: int) -> tuple[int, list[Node]]:
    """The factors of a product, its ``neg`` nodes taken out as a sign."""
    if node.op == "mul":
        sign, left = _factors(node.args[0], sign)
        sign, right = _factors(node.args[1], sign)
        return sign, left + right
    if node.op == "neg":
        return _factors(node.args[0], -sign)
    return sign, [node]


def _wave(sign: int, term: Node) -> _Wave | None:
    """``term`` (of sign ``sign``) as a :class:`_Wave`, or None when it has not exactly one
    ``sin``/``cos`` factor."""
    sign, factors = _factors(term, sign)
    at = [n for n, f in enumerate(factors) if f.op in _WAVES]
    if len(at) != 1:
        return None
    coefficient: float | None = float(sign)
    known = True
    cofactors = []
    for n, f in enumerate(factors):
        if n == at[0]:
            continue
        if f.op == "num" and f.value is not None:
            coefficient = None if coefficient is None else coefficient * f.value
        elif f.op == "const":
            known = False
            coefficient = None if coefficient is None or f.value is None else coefficient * f.value
        else:
            cofactors.append(f)
    wave = factors[at[0]]
    return _Wave(wave.op, wave.args[0], coefficient, known, tuple(sorted(cofactors, key=render)))


def _same(a: Node, b: Node) -> bool:
    """The same subtree, fitted constants within :data:`SAME_VALUE_RTOL` of each other."""
    if a.op != b.op or len(a.args) != len(b.args):
        return False
    if a.op == "const":  # names differ (each term has its own); fitted values must agree
        return a.value is None or b.value is None \
            or math.isclose(a.value, b.value, rel_tol=SAME_VALUE_RTOL)
    if a.op in ("num", "var"):
        return a.value == b.value and a.name == b.name
    return all(_same(x, y) for x, y in zip(a.args, b.args, strict=True))


def _pair(sine: _Wave, cosine: _Wave) -> bool:
    """Whether a sine and a cosine term make a phase form: the same ``u`` and ``F``, and not
    both coefficients known (nothing fitted to read back, no node saved)."""
    return not (sine.known and cosine.known) and _same(sine.argument, cosine.argument) \
        and len(sine.cofactors) == len(cosine.cofactors) \
        and all(_same(x, y) for x, y in zip(sine.cofactors, cosine.cofactors, strict=True))


def _phase_term(sine: _Wave, cosine: _Wave) -> Node:
    """``R*F*sin(u + p)`` for ``a*F*sin(u) + b*F*cos(u)``, its constants carrying ``R`` and
    ``p`` when both ``a`` and ``b`` are known."""
    a, b = sine.coefficient, cosine.coefficient
    if a is None or b is None:
        amplitude, phase = Node("const", name="c"), Node("const", name="c")
    else:
        amplitude = Node("const", value=math.hypot(a, b), name="c")
        phase = Node("const", value=math.atan2(b, a), name="c")
    return product([amplitude, *sine.cofactors, unary("sin", binary("add", sine.argument, phase))])


def _rebuilt(terms: list[_Signed]) -> Node:
    return signed_sum([(term, sign < 0) for sign, term in terms])


def _rewrites_of_sum(terms: list[_Signed]) -> Iterator[list[_Signed]]:
    """Each pairing (:func:`_pair`) of a ``sin`` term with a ``cos`` term in ``terms``,
    rewritten (every pair once: each sine with the first cosine that matches it)."""
    waves = [(i, _wave(sign, t)) for i, (sign, t) in enumerate(terms)]
    sines = [(i, w) for i, w in waves if w is not None and w.function == "sin"]
    cosines = [(i, w) for i, w in waves if w is not None and w.function == "cos"]
    used: set[int] = set()
    for i, sine in sines:
        for j, cosine in cosines:
            if j in used or not _pair(sine, cosine):
                continue
            used.add(j)
            rest = [t for k, t in enumerate(terms) if k not in (i, j)]
            yield rest + [(1, _phase_term(sine, cosine))]
            break


def _single_rewrites(tree: Node) -> Iterator[Node]:
    for path, node in walk(tree):
        if node.op in _SUMS and not _inside_sum(tree, path):
            for terms in _rewrites_of_sum(list(_signed_terms(node))):
                yield tidy(replace(tree, path, _rebuilt(terms)))


def phase_forms(tree: Node) -> list[Node]:
    """Every tree with one pair of one sum written as its phase form, then (where there are
    several pairs) the tree with every pair so written; tidied, without repeats: the same
    function, shorter."""
    out: list[Node] = []
    seen: set[str] = {render(tree)}
    for rewritten in _single_rewrites(tree):
        text = render(rewritten)
        if text not in seen:
            seen.add(text)
            out.append(rewritten)
    if len(out) > 1:
        every = out[0]
        for _ in range(MAX_PAIRS):
            further = next(_single_rewrites(every), None)
            if further is None:
                break
            every = further
        if render(every) not in seen:
            out.append(every)
    return out


def _inside_sum(tree: Node, path: Path) -> bool:
    """Whether the node at ``path`` is a term of a larger sum (only whole sums are rewritten)."""
    if not path:
        return False
    parent = tree
    for i in path[:-1]:
        parent = parent.args[i]
    return parent.op in _SUMS or parent.op == "neg" and _inside_sum(tree, path[:-1])


def _weight(term: Node) -> float | None:
    """The magnitude of a term's constant factor (1 for none; a quotient's is its numerator's
    over its denominator's); None where a free constant of it carries no value."""
    weight = 1.0
    for f in _factors(term, 1)[1]:
        if f.op == "const":
            if f.value is None:
                return None
            weight *= abs(f.value)
        elif f.op == "num" and f.value is not None:
            weight *= abs(f.value)
        elif f.op == "div":
            above, below = _weight(f.args[0]), _weight(f.args[1])
            if above is None or below is None:
                return None
            weight *= above / below if below > 0 else math.inf
    return weight


def _pruned(node: Node) -> tuple[Node, bool]:
    """``node`` without its negligible terms, and whether any was dropped."""
    if node.op in _SUMS:
        terms, dropped = [], False
        for sign, term in _signed_terms(node):
            term, inner = _pruned(term)
            terms.append((sign, term))
            dropped |= inner
        weights = [_weight(t) for _, t in terms]
        known = [w for w in weights if w is not None]
        if len(known) == len(weights) and max(known) > 0:
            kept = [t for t, w in zip(terms, known, strict=True) if w >= NEGLIGIBLE * max(known)]
            if len(kept) < len(terms):
                terms, dropped = kept, True
        return (_rebuilt(terms), True) if dropped else (node, False)
    if not node.args:
        return node, False
    args = [_pruned(a) for a in node.args]
    if not any(dropped for _, dropped in args):
        return node, False
    return Node(node.op, tuple(a for a, _ in args), node.value, node.name), True


def without_negligible_terms(tree: Node) -> Node | None:
    """``tree`` with every term of a sum dropped whose constant factor is below
    :data:`NEGLIGIBLE` times the largest of its sum (sums whose constants all carry values),
    tidied; None when none is dropped."""
    pruned, dropped = _pruned(tree)
    return tidy(pruned) if dropped else None
