"""Phase forms: ``a*sin(u) + b*cos(u)`` rewritten as ``R*sin(u + p)``.

A sinusoid with a phase, ``sin(u + p)``, is linear in ``sin(u)`` and ``cos(u)``
(``R*sin(u + p) = R*cos(p)*sin(u) + R*sin(p)*cos(u)``), so the search and the library's sparse
sums often find it as that pair of terms: exact on the data, but three nodes longer, and its
constants are ``cos(p)`` and ``sin(p)`` rather than the phase a person writes. The judge can read
``sin(p)`` back only for small ``p``; a phase is read back in any quarter turn
(:mod:`sr_dist.results.recovery`). So once a formula fits, the search offers its phase forms
(``EvolveConfig.phase_forms``): each pair of terms ``a*sin(u)`` and ``b*cos(u)`` of one sum (``u``
the same subtree, ``a`` and ``b`` free constants, or one of them a literal or absent) becomes
``R*sin(u + p)`` with ``R = hypot(a, b)`` and ``p = atan2(b, a)``, which takes the same values
and is one to three nodes shorter. The new constants carry those values, so the evaluator
refits them from there.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from sr_dist.formula import Node
from sr_dist.sr.evolve.tree import Path, binary, render, replace, tidy, unary, walk

__all__ = ["phase_forms"]

_SUMS = frozenset({"add", "sub"})
_WAVES = frozenset({"sin", "cos"})
#: Relative difference under which two fitted constants of ``u`` count as the same value.
SAME_VALUE_RTOL = 1e-6

#: A signed term of a sum: (+1 or -1, the term).
_Signed = tuple[int, Node]


def _signed_terms(node: Node, sign: int = 1) -> Iterator[_Signed]:
    """The terms of a sum with their signs (``a - (b - c)`` gives ``+a, -b, +c``; ``(-c)*X``
    gives ``-c*X``)."""
    if node.op == "add":
        yield from _signed_terms(node.args[0], sign)
        yield from _signed_terms(node.args[1], sign)
    elif node.op == "sub":
        yield from _signed_terms(node.args[0], sign)
        yield from _signed_terms(node.args[1], -sign)
    elif node.op == "neg":
        yield from _signed_terms(node.args[0], -sign)
    elif node.op == "mul" and "neg" in (node.args[0].op, node.args[1].op):
        # ``-c*X`` parses as ``(-c)*X``, whose ``neg`` tidy would fold into a valueless constant
        negated = [a.op == "neg" for a in node.args]
        left, right = (a.args[0] if n else a for a, n in zip(node.args, negated, strict=True))
        yield (-sign if sum(negated) == 1 else sign), binary("mul", left, right)
    else:
        yield sign, node


def _coefficient(node: Node) -> tuple[float | None, bool] | None:
    """A factor as (value, is a literal): a literal's value, a free constant's carried value
    (None where it carries none), either negated; None when ``node`` is no such factor."""
    if node.op == "num" and node.value is not None:
        return float(node.value), True
    if node.op == "const":
        return node.value, False
    if node.op == "neg":
        inner = _coefficient(node.args[0])
        if inner is not None:
            return (None if inner[0] is None else -inner[0]), inner[1]
    return None


def _wave(term: Node) -> tuple[str, Node, float | None, bool] | None:
    """``term`` as (``sin`` or ``cos``, its argument, its coefficient's value, whether that
    coefficient is known exactly: absent or a literal), or None."""
    if term.op in _WAVES:
        return term.op, term.args[0], 1.0, True
    if term.op == "mul":
        for k, w in (term.args, term.args[::-1]):
            coefficient = _coefficient(k)
            if coefficient is not None and w.op in _WAVES:
                return w.op, w.args[0], coefficient[0], coefficient[1]
    return None


def _same_argument(a: Node, b: Node) -> bool:
    """The same subtree, fitted constants within :data:`SAME_VALUE_RTOL` of each other."""
    if a.op != b.op or len(a.args) != len(b.args):
        return False
    if a.op == "const":  # names differ (each term has its own); fitted values must agree
        return a.value is None or b.value is None \
            or math.isclose(a.value, b.value, rel_tol=SAME_VALUE_RTOL)
    if a.op in ("num", "var"):
        return a.value == b.value and a.name == b.name
    return all(_same_argument(x, y) for x, y in zip(a.args, b.args, strict=True))


def _phase_term(u: Node, a: float | None, b: float | None) -> Node:
    """``R*sin(u + p)`` for ``a*sin(u) + b*cos(u)``, its constants carrying ``R`` and ``p``
    when both ``a`` and ``b`` are known."""
    if a is None or b is None:
        amplitude, phase = Node("const", name="c"), Node("const", name="c")
    else:
        amplitude = Node("const", value=math.hypot(a, b), name="c")
        phase = Node("const", value=math.atan2(b, a), name="c")
    return binary("mul", amplitude, unary("sin", binary("add", u, phase)))


def _rebuilt(terms: list[_Signed]) -> Node:
    """A sum of signed terms, a positive one first where there is one (a leading minus is a
    ``neg``, which :func:`tidy` folds into a constant that carries no value)."""
    terms = sorted(terms, key=lambda t: t[0] < 0)  # stable: the order is kept otherwise
    sign, first = terms[0]
    out = first if sign > 0 else unary("neg", first)
    for sign, term in terms[1:]:
        out = binary("add" if sign > 0 else "sub", out, term)
    return out


def _rewrites_of_sum(terms: list[_Signed]) -> Iterator[list[_Signed]]:
    """Each pairing of a ``sin`` term with a ``cos`` term of the same argument in ``terms``, at
    least one of them with a free constant for coefficient, rewritten (every pair once: each
    sine with the first cosine that matches it)."""
    waves = [(i, _wave(t)) for i, (_, t) in enumerate(terms)]
    sines = [(i, w) for i, w in waves if w is not None and w[0] == "sin"]
    cosines = [(i, w) for i, w in waves if w is not None and w[0] == "cos"]
    used: set[int] = set()
    for i, (_, u, a, a_exact) in sines:
        for j, (_, v, b, b_exact) in cosines:
            if j in used or (a_exact and b_exact) or not _same_argument(u, v):
                continue  # two known coefficients: nothing fitted to read back, no node saved
            used.add(j)
            a_signed = None if a is None else terms[i][0] * a
            b_signed = None if b is None else terms[j][0] * b
            rest = [t for k, t in enumerate(terms) if k not in (i, j)]
            yield rest + [(1, _phase_term(u, a_signed, b_signed))]
            break


def phase_forms(tree: Node) -> list[Node]:
    """Every tree with one ``a*sin(u) + b*cos(u)`` pair of one sum written ``R*sin(u + p)``
    (tidied, without repeats): the same function, shorter."""
    out: list[Node] = []
    seen: set[str] = {render(tree)}
    for path, node in walk(tree):
        if node.op not in _SUMS or _inside_sum(tree, path):
            continue
        for terms in _rewrites_of_sum(list(_signed_terms(node))):
            rewritten = tidy(replace(tree, path, _rebuilt(terms)))
            text = render(rewritten)
            if text not in seen:
                seen.add(text)
                out.append(rewritten)
    return out


def _inside_sum(tree: Node, path: Path) -> bool:
    """Whether the node at ``path`` is a term of a larger sum (only whole sums are rewritten)."""
    if not path:
        return False
    parent = tree
    for i in path[:-1]:
        parent = parent.args[i]
    return parent.op in _SUMS or parent.op == "neg" and _inside_sum(tree, path[:-1])

