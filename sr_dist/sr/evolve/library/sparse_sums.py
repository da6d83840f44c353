"""Sparse sums of basis terms for a target: the beam pursuit and the searches that back it up.

The pursuit (:func:`sr_dist.sr.structure.pursuit.beam_pursuit`) runs on the basis tier by
tier; when nothing exact turns up, pair completions, single completions, best partners and
(on small bases) every triple are tried as well, each a named search of
:mod:`sr_dist.sr.structure`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.basis import WIDE, Basis
from sr_dist.sr.structure.partners import all_triples, best_partners
from sr_dist.sr.structure.pursuit import beam_pursuit, best_additions, fit_error, pair_completions, single_completions
from sr_dist.sr.structure.tolerances import EXACT_SUPPORT, NEAR_EXACT

__all__ = ["EXHAUSTIVE_TERMS", "PAIR_COMPLETION_TERMS", "SINGLE_PAIR_TERMS", "DefaultLimits", "SumSearchLimits",
           "best_of_each_size", "sparse_sums"]


#: Most one-factor terms for the pair completion of :func:`sparse_sums` (its cost is their
#: number squared: 18 shapes of up to six variables).
PAIR_COMPLETION_TERMS = 108


#: Largest basis for which :func:`sparse_sums` pairs every one-factor term with its best
#: partner when nothing exact was found (one projection of the basis per one-factor term).
SINGLE_PAIR_TERMS = 5000


#: Largest basis for which :func:`sparse_sums` scores every pair of terms with its best third
#: when nothing exact was found (a basis over one variable has 47 terms).
EXHAUSTIVE_TERMS = 64


def best_of_each_size(sums: Sequence[tuple[float, list[Node]]]) -> list[tuple[float, list[Node]]]:
    """The sum of least error of each number of terms, fewest terms first: besides
    :func:`sparse_sums`'s first few (fewest terms first when nothing is exact, so all single
    terms) ``x4 + sin(x1)`` fitted to a decomposition's estimate of a part (accurate to about
    1e-4, so nothing is exact there)."""
    best: dict[int, tuple[float, list[Node]]] = {}
    for err, terms in sums:
        if err < best.get(len(terms), (math.inf, []))[0]:
            best[len(terms)] = (err, terms)
    return [best[k] for k in sorted(best)]


class SumSearchLimits(Protocol):
    """The basis sizes up to which the backing searches run (a ``LibraryConfig`` is one)."""

    @property
    def pair_completion_terms(self) -> int: ...
    @property
    def single_pair_terms(self) -> int: ...
    @property
    def exhaustive_terms(self) -> int: ...


@dataclass(frozen=True)
class DefaultLimits:
    pair_completion_terms: int = PAIR_COMPLETION_TERMS
    single_pair_terms: int = SINGLE_PAIR_TERMS
    exhaustive_terms: int = EXHAUSTIVE_TERMS


def sparse_sums(
    basis: Basis, target: np.ndarray, max_terms: int = 4, beam: int = 3, first_beam: int = 6,
    every_pair: bool = False, limits: SumSearchLimits = DefaultLimits(),
) -> list[tuple[float, list[Node]]]:
    """Sparse linear models ``target ~ c0 + sum(c_k t_k)`` found by beam matching pursuit.

    The search runs on the one-factor terms, then on all terms, so simple sums are not crowded
    out by products that correlate better one at a time. With ``every_pair`` (the whole
    problem's sums, not the decomposition's many small ones), each one-factor term is also
    tried with its two best partners when nothing exact turned up.
    Returns ``(relative residual, terms)`` pairs: near-exact models first, fewest terms first.
    """
    if not np.all(np.isfinite(target)) or np.std(target) == 0:
        return []
    t = target - target.mean()
    found: dict[tuple[int, ...], float] = {}
    orders = sorted(set(basis.order.tolist()))
    core = [o for o in orders if o < WIDE]
    for max_order in dict.fromkeys([orders[0], *core[-1:], orders[-1]]):
        columns = np.flatnonzero(basis.order <= max_order)
        for support, err in beam_pursuit(basis.Z[:, columns], t, max_terms, beam, first_beam).items():
            found.setdefault(tuple(int(columns[i]) for i in support), err)
    if min(found.values(), default=1.0) > EXACT_SUPPORT:
        # Nothing exact: each of the best single terms (of the whole basis, of the tiers up to
        # the wide one, and of the terms of one or two factors, where a product of three does
        # not outrank ``x3*x4``) plus the best pair of one-factor terms (a law such as ``I1 + I2 + 2*sqrt(I1*I2)*cos(delta)``),
        # and plus a pursuit over the one-factor terms alone (``x3*x4 + 2.2*x0 + x1 + x2``:
        # after ``x3*x4`` a greedy step over every term picks products such as
        # ``sqrt(x0)*x1`` that stand in for the sum).
        singles = np.flatnonzero(basis.order == 1)
        if 2 <= len(singles) <= limits.pair_completion_terms:
            norm = float(np.sqrt(np.mean(t**2))) or 1.0
            # First terms from the whole basis, from the tiers below the half-integer powers
            # (``x1**-0.5*cos(x2)`` can crowd ``sqrt(x0)*sqrt(x1)*cos(x2)`` out of the whole
            # basis's best) and from the terms of one or two factors.
            firsts = dict.fromkeys([*best_additions(basis.Z, t, (), first_beam)])
            for tier in (np.flatnonzero(basis.order <= WIDE), np.flatnonzero(basis.order <= 2)):
                firsts.update(dict.fromkeys(int(tier[i]) for i in best_additions(basis.Z[:, tier], t, (), first_beam)))
            for first in firsts:
                for support in pair_completions(basis.Z, t, (first,), singles):
                    if len(set(support)) == 3 and support not in found:
                        found[support], _ = fit_error(basis.Z, t, support, norm)
                completions = single_completions(basis.Z, t, first, singles, max_terms - 1, beam, first_beam)
                for support, err in completions.items():
                    if support not in found:
                        found[support] = err
            if every_pair and basis.Z.shape[1] <= limits.single_pair_terms:
                # Every one-factor term with its best partners from the whole basis
                # (``log(x1) + x1*log(x1)/x0``: neither term is among the best first steps).
                for support, err in best_partners(basis.Z, t, singles).items():
                    if support not in found:
                        found[support] = err
    if min(found.values(), default=1.0) > EXACT_SUPPORT and basis.Z.shape[1] <= limits.exhaustive_terms:
        for support, err in all_triples(basis.Z, t).items():
            found.setdefault(support, err)
    ranked = sorted(found.items(), key=lambda kv: (kv[1] > NEAR_EXACT, len(kv[0]), int(basis.order[list(kv[0])].sum()), kv[1]))
    return [(err, [basis.terms[i] for i in support]) for support, err in ranked]
