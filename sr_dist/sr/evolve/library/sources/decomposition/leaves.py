"""The leaves of the decomposition: a (sub)problem fitted directly, without splitting it further.

Sparse sums of the seed-library basis fitted to the part and to its transforms (``1/t``,
``t**2``, ``1/t**2``, ``sqrt t``, ``log t``, ``exp t``: nested forms such as
``1/sqrt(1 - u**2)``), ratios of sums whose denominator starts with ``1`` or with any one
variable (``(a*x + b*y)/(x + y)``), and power laws.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sr_dist.formula import Node, evaluate_numpy
from sr_dist.sr.evolve.library.basis import build_basis
from sr_dist.sr.evolve.library.blocks import monomial, times_const
from sr_dist.sr.evolve.library.sources.decomposition.parts import (
    PartFit,
    SubProblem,
    denominator_ok,
    fit_rel,
    linear_fit,
    near_exact,
    relative_error,
)
from sr_dist.sr.evolve.library.sources.ratios import ratios_of_sums
from sr_dist.sr.evolve.library.sparse_sums import best_of_each_size, sparse_sums
from sr_dist.sr.evolve.library.transforms import TRANSFORMS
from sr_dist.sr.evolve.tree import binary, const, num, total, unary, var
from sr_dist.sr.structure.power_law import power_law
from sr_dist.sr.structure.pursuit import beam_pursuit
from sr_dist.sr.structure.sample import Sample

__all__ = ["LEAF_TRANSFORMS", "SEVERAL_VARIABLE_LEAF_TRANSFORMS", "leaf_fits", "sum_body", "variable_led_ratios"]


#: The transforms of a part's target that the leaves try, in order (:mod:`transforms`): all of
#: them for a part of one variable, the algebraic ones for a part of several.
LEAF_TRANSFORMS = ("id", "inv", "sq", "invsq", "sqrt", "log", "exp")
#: Most terms in the basis a leaf's sparse sums and ratios are fitted over (a part has few
#: variables: its wider tiers are cut first), and the sample rows they read.
LEAF_BASIS = 1500
LEAF_ROWS = 200


SEVERAL_VARIABLE_LEAF_TRANSFORMS = ("id", "inv", "sq", "invsq")


def leaf_fits(names: Sequence[str], X: np.ndarray, t: np.ndarray, free_offset: bool = False,
            rows: int = LEAF_ROWS, rational_leads: bool = False) -> list[PartFit]:
    """Sparse sums (with and without intercept) of transforms of ``t``, ratios of sums, and
    power laws, each with its values on the sample. With ``free_offset`` (a part of an
    additive split, defined only up to a constant) the intercept is fitted but left out of the
    tree and of its values, so the remainder of the target keeps its natural zero."""
    out: list[PartFit] = []
    fit_rows = slice(0, rows)
    sample = Sample(X[fit_rows], t[fit_rows])
    basis = build_basis(sample, names, list(range(len(names))), LEAF_BASIS)
    if basis is None:
        return out
    index = {term: k for k, term in enumerate(basis.terms)}
    kinds = LEAF_TRANSFORMS if len(names) == 1 else SEVERAL_VARIABLE_LEAF_TRANSFORMS
    for kind in kinds:
        transform = TRANSFORMS[kind]
        if not transform.usable(t):
            continue
        with np.errstate(all="ignore"):
            z = transform.forward(t)
        if not np.all(np.isfinite(z)) or np.std(z) == 0:
            continue
        sums = sparse_sums(basis, z[fit_rows], max_terms=3)
        picked = sums[:3]
        if sums and sums[0][0] > 1e-7:
            # Nothing exact (an estimated part): also the best sum of two and of three terms.
            picked += [s for s in best_of_each_size(sums) if len(s[1]) > 1]
        for _, terms in picked:
            cols = [index[term] for term in terms]
            with np.errstate(all="ignore"):
                V = np.column_stack([evaluate_numpy(term, X, names) for term in terms]) if len(t) > rows else basis.V[:, cols]
            for intercept in (False, True):
                if kind != "id" and len(terms) == 1 and not intercept:
                    continue  # sqrt(x**2), 1/(1/x): the plain sum has it, simpler
                fit = linear_fit(V, z, intercept)
                if fit is None:
                    continue
                A = np.column_stack([np.ones(len(z)), V]) if intercept else V
                coef, *_ = np.linalg.lstsq(A, z, rcond=None)
                if kind == "id" and free_offset and intercept:
                    # The part's own values: the fit without its intercept.
                    body = total([times_const(term) for term in terms])
                    out.append(PartFit(body, V @ coef[1:], relative_error(fit, t), True))
                    continue
                body, has_scale = sum_body(terms, float(coef[1 if intercept else 0]), intercept, kind)
                with np.errstate(all="ignore"):
                    pred = transform.inverse_values(fit)
                out.append(PartFit(transform.inverse(body), pred, relative_error(pred, t), has_scale))
        if kind == "id":
            leads: list[tuple[np.ndarray, Node]] = [(np.ones(len(sample.y)), num(1.0))]
            if rational_leads and len(names) > 1:
                leads += [(sample.X[:, j], var(name)) for j, name in enumerate(names)]
            for s0, s0_node in leads:
                for err, tree in ratios_of_sums(basis, z[fit_rows], s0, s0_node)[:1]:
                    out.append(near_exact(tree, t, err))
    law = power_law(sample, names)
    if law is not None and law.exponents:
        for step in (0.5, 1.0):
            exps = law.rounded(step)
            shape = np.ones(len(t))
            with np.errstate(all="ignore"):
                for j, name in enumerate(names):
                    shape = shape * X[:, j] ** exps.get(name, 0.0)
            fit = linear_fit(shape[:, None], t, False)
            if fit is not None:
                out.append(PartFit(monomial(exps), fit, relative_error(fit, t), True))
    return out


def sum_body(terms: Sequence[Node], lead: float, intercept: bool, kind: str) -> tuple[Node, bool]:
    """The sum a transform is inverted around, without a redundant constant, and whether the
    inverted tree keeps a free scale. ``1/(c*x + c)`` carries its scale twice over once it
    multiplies another part (``c*y/(c*x + c)`` fits no better than ``c*y/(x + c)`` but its
    constants no longer snap), so inside ``1/.``, ``sqrt(.)``, ``(.)**-0.5`` and ``log(.)`` the first
    term keeps the coefficient 1 (its sign from the fit) and the scale comes from outside;
    inside ``exp(.)`` the intercept is the scale; inside ``log(.)`` (``c*log(x + c)``) a
    factor would only shift the sum's constant."""
    if kind in ("inv", "sq", "invsq", "exp") and terms:
        first = terms[0] if lead > 0 else unary("neg", terms[0])
        return total([first] + [times_const(t) for t in terms[1:]] + ([const()] if intercept else [])), False
    if kind == "log" and intercept:
        return total([times_const(t) for t in terms]), False
    return total([times_const(t) for t in terms] + ([const()] if intercept else [])), kind != "exp"


def variable_led_ratios(p: SubProblem, rows: int = LEAF_ROWS) -> list[PartFit]:
    """Ratios of sums whose denominator starts with a variable, ``(a*x + b*y)/(x + y)``: the
    seed library's ratios all start their denominator with 1. Linear in the unknowns:
    ``t*x_j = sum(a_k t_k) - b*t*s`` with numerator terms of up to two factors and one
    denominator term ``s`` (``y``, ``y**2``, ``1/y``, ``sqrt(y)`` of another variable). Each
    ``s`` is forced into the fit and the numerator is found by pursuit on what it leaves:
    a free pursuit picks denominator proxies first and misses the numerator."""
    if p.X.shape[1] > 4 or p.X.shape[1] < 2:
        return []
    sample = Sample(p.X[:rows], p.t[:rows])
    basis = build_basis(sample, p.names, list(range(len(p.names))), LEAF_BASIS)
    out: list[PartFit] = []
    if basis is None:
        return out
    low = np.flatnonzero(basis.order <= 2)
    y = sample.y
    for j, name in enumerate(p.names):
        lead = var(name)
        with np.errstate(all="ignore"):
            lhs = y * sample.X[:, j]
        for k, other in enumerate(p.names):
            if k == j:
                continue
            x = sample.X[:, k]
            node = var(other)
            for s_values, s_node in ((x, node), (x**2, binary("pow", node, num(2.0))),
                                     (1 / x, binary("div", num(1.0), node)), (np.sqrt(np.abs(x)), unary("sqrt", node))):
                w = -y * s_values
                if not np.all(np.isfinite(w)) or np.std(w) == 0:
                    continue
                q = (w - w.mean()) / np.linalg.norm(w - w.mean())
                r = lhs - lhs.mean()
                r = r - q * (q @ r)
                Z = basis.Z[:, low] - np.outer(q, q @ basis.Z[:, low])
                found = beam_pursuit(Z, r, 3, 3, 6)
                best = sorted(found.items(), key=lambda kv: (kv[1] > 1e-7, len(kv[0]), kv[1]))[:1]
                for support, err in best:
                    # The denominator term must matter (without it the ratio is a sum over
                    # x_j) and must not vanish on the sample (a removable pole, x**2-y**2 over
                    # x-y, is a sum in disguise).
                    if err < 1e-6 and fit_rel(basis.V[:, low[list(support)]] / sample.X[:, [j]], y) > 1e-4 \
                            and denominator_ok(basis.V[:, low[list(support)]], w, lhs, sample.X[:, j], s_values):
                        numerator = total([times_const(basis.terms[int(low[i])]) for i in support])
                        denominator = binary("add", lead, times_const(s_node))
                        out.append(near_exact(binary("div", numerator, denominator), p.t, err))
    return out
