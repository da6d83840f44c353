"""The recursion of the decomposition: split a problem by the structure found in its data, solve
the parts as smaller problems, and combine the answers (see the package docstring)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from sr_dist.formula import Node, evaluate_numpy
from sr_dist.formula.tree import replace_leaves
from sr_dist.sr.evolve.library.blocks import times_const
from sr_dist.sr.evolve.library.sources.decomposition.leaves import leaf_fits, variable_led_ratios
from sr_dist.sr.evolve.library.sources.decomposition.parts import (
    PartFit,
    SubProblem,
    best_parts,
    combine_product,
    combine_sum,
    linear_fit,
    relative_error,
    sum_terms,
)
from sr_dist.sr.evolve.library.transforms import TRANSFORMS
from sr_dist.sr.evolve.tree import binary, const, total, var
from sr_dist.sr.structure.product import best_product, product_test
from sr_dist.sr.structure.sample import Sample
from sr_dist.sr.structure.separability import additive_components, best_split, log_target
from sr_dist.sr.structure.symmetry import SYMMETRIES, affine_components, best_affine, find_symmetries

__all__ = ["CHANGES", "CHANGE_VARS", "SOLVES", "Budget", "SubProblem", "decomposition_seeds", "solve"]


def solve_parts(p: SubProblem, a: Sequence[int], b: Sequence[int], comp_a: np.ndarray, comp_b: np.ndarray,
                 multiplicative: bool, depth: int, budget: Budget, logged: bool = True) -> list[PartFit]:
    """Both orders of backfitting: solve one part from its estimated component, then the
    other from the exact remainder of the target given the first part's best formula. The
    components of a product are logs (from the split of ``log|t|``) unless ``logged`` is
    False (from :func:`product_test`)."""
    out: list[PartFit] = []
    combine = combine_product if multiplicative else combine_sum
    for first, second, comp in ((a, b, comp_a), (b, a, comp_b)):
        est = np.exp(comp) if multiplicative and logged else comp
        firsts = solve(p.columns(first).names, p.X[:, list(first)], est, depth - 1,
                       free_offset=not multiplicative, budget=budget)
        if not firsts:
            continue
        f0 = firsts[0]
        with np.errstate(all="ignore"):
            if multiplicative:
                rest = p.t / f0.pred
            else:
                # The part was fitted to its own component, so it has the right scale (a
                # regression of the target on it would be biased by the other part).
                rest = p.t - f0.pred
        if not np.all(np.isfinite(rest)):
            continue
        seconds = solve(p.columns(second).names, p.X[:, list(second)], rest, depth - 1, budget=budget)
        for fa, fb in itertools.product(firsts[:2], seconds[:2]):
            out.append(combine(p.t, fa, fb))
    return out


def solve_affine(p: SubProblem, j: int, depth: int, budget: Budget) -> list[PartFit]:
    """``t = A(others) + x_j * B(others)``: the slope ``B`` solved from its estimate, then ``A``
    from the exact remainder, and the other way round; each combination refitted as a sum."""
    others = [k for k in range(p.X.shape[1]) if k != j]
    sub = p.columns(others)
    xj = p.X[:, j]
    comp_a, comp_b = affine_components(p.X, p.t, j)
    lead = var(p.names[j])
    out: list[PartFit] = []

    def combine(a: PartFit, b: PartFit) -> PartFit:
        ta, tb = sum_terms(a.tree), sum_terms(b.tree)
        if ta is not None and tb is not None:
            # Both parts are sums of terms: fit every coefficient at once on the real target
            # (each part was fitted to an estimate, so their own coefficients are not exact).
            own = [term for term in ta if term is not None]  # the sum's own constant covers it
            cols = [evaluate_numpy(term, sub.X, sub.names) for term in own]
            cols += [xj * (np.ones(len(xj)) if term is None else evaluate_numpy(term, sub.X, sub.names))
                     for term in tb]
            fit = linear_fit(np.column_stack(cols), p.t, True)
            if fit is not None:
                slope = total([const() if term is None else times_const(term) for term in tb])
                tree = total([*(times_const(term) for term in own), binary("mul", lead, slope), const()])
                return PartFit(tree, fit, relative_error(fit, p.t), True)
        fit = linear_fit(np.column_stack([a.pred, xj * b.pred]), p.t, True)
        error = np.inf if fit is None else relative_error(fit, p.t)
        slope = binary("mul", lead, b.tree if b.scaled else times_const(b.tree))
        tree = total([a.tree if a.scaled else times_const(a.tree), slope, const()])
        return PartFit(tree, fit if fit is not None else a.pred, error, True)

    slopes = solve(sub.names, sub.X, comp_b, depth - 1, budget=budget)
    if slopes:
        with np.errstate(all="ignore"):
            rest = p.t - xj * slopes[0].pred
        if np.all(np.isfinite(rest)):
            for a, b in itertools.product(solve(sub.names, sub.X, rest, depth - 1, free_offset=True,
                                                budget=budget)[:2], slopes[:2]):
                out.append(combine(a, b))
    intercepts = solve(sub.names, sub.X, comp_a, depth - 1, free_offset=True, budget=budget)
    if intercepts:
        with np.errstate(all="ignore"):
            slope = (p.t - intercepts[0].pred) / xj
        if np.all(np.isfinite(slope)):
            for a, b in itertools.product(intercepts[:2], solve(sub.names, sub.X, slope, depth - 1,
                                                                budget=budget)[:2]):
                out.append(combine(a, b))
    return out


class Budget:
    """How many more sub-problems the recursion may solve: a count, not a clock, so the
    library stays deterministic; the tests run in a fixed order, so what is cut is the last."""

    def __init__(self, solves: int) -> None:
        self.solves = solves

    def take(self) -> bool:
        self.solves -= 1
        return self.solves >= 0


#: Sub-problems one decomposition may solve (each is a few sparse fits; about 0.1 s here).
SOLVES = 24


def solve(names: Sequence[str], X: np.ndarray, t: np.ndarray, depth: int = 3,
          free_offset: bool = False, leaves: bool = True, budget: Budget | None = None) -> list[PartFit]:
    """The best few candidates for ``t`` as a function of the columns ``names`` of ``X``:
    leaves, then (``depth`` > 0) additive and multiplicative splits, splits of ``t**2`` and
    ``1/t``, and pair symmetries, each solved recursively. Ranked by relative error on ``t``.
    ``leaves=False`` skips the plain fits (the seed library already has them for the whole
    problem) except the ratios of sums led by a variable."""
    p = SubProblem(tuple(names), np.asarray(X, dtype=float), np.asarray(t, dtype=float))
    budget = Budget(SOLVES) if budget is None else budget
    if not np.all(np.isfinite(p.t)) or np.std(p.t) == 0 or len(p.t) < 16 or not budget.take():
        return []
    cands = leaf_fits(p.names, p.X, p.t, free_offset) if leaves else variable_led_ratios(p)
    best = best_parts(cands, 1)
    if depth <= 0 or p.X.shape[1] < 2 or (leaves and best and best[0].error < 1e-9):
        return best_parts(cands)
    n = p.X.shape[1]
    targets: list[tuple[str, np.ndarray]] = [("id", p.t)]
    log_t = log_target(p.t)
    if log_t is not None:
        targets.append(("log", log_t))
    if n <= 4:
        for kind in ("sq", "inv"):
            if TRANSFORMS[kind].usable(p.t):
                with np.errstate(all="ignore"):
                    targets.append((kind, TRANSFORMS[kind].forward(p.t)))
    log_split = False
    for kind, z in targets:
        split = best_split(p.X, z)
        if split is None:
            continue
        log_split = log_split or kind == "log"
        comp_a, comp_b = additive_components(p.X, z, split[0], split[1])
        if kind == "log":
            # The split of log|t| names the groups; the rank-one fit of t itself over them
            # estimates the factors far better (2.9e-12 against 1e-3 for
            # ``(exp(x0) - 2.2*x2)*x3*(2.9 + x1)``), and a part is solved from its estimate.
            verdict, fac_a, fac_b = product_test(p.X, p.t, split[0], split[1])
            if verdict.accepted and verdict.restricted < split[2].restricted:
                cands += solve_parts(p, split[0], split[1], fac_a, fac_b, True, depth, budget, logged=False)
                continue
        if kind in ("id", "log"):
            cands += solve_parts(p, split[0], split[1], comp_a, comp_b, kind == "log", depth, budget)
            continue
        transform = TRANSFORMS[kind]
        for c in best_parts(solve_parts(p.with_target(z), split[0], split[1], comp_a, comp_b, False, depth, budget), 2):
            with np.errstate(all="ignore"):
                pred = transform.inverse_values(c.pred)
            cands.append(PartFit(transform.inverse(c.tree), pred, relative_error(pred, p.t), True))
    # Where t changes sign; and for the whole problem also where it keeps one but the
    # surrogate of log|t| was too coarse to accept a split (``log(exp(x0) - 2.2*x2)``).
    product = best_product(p.X, p.t, any_sign=not leaves) if log_t is None or not (leaves or log_split) else None
    if product is not None:
        a, b, comp_a, comp_b = product
        cands += solve_parts(p, a, b, comp_a, comp_b, True, depth, budget, logged=False)
    if depth >= 2 and not any(c.error < 1e-6 for c in cands):
        # Only where the splits found nothing near-exact: each level of it solves four parts.
        affine = best_affine(p.X, p.t)
        if affine is not None:
            cands += solve_affine(p, affine[0], depth, budget)
    for i, j, kind, _ in find_symmetries(p.X, p.t)[: 2 if depth >= 3 else 1]:
        with np.errstate(all="ignore"):
            u = SYMMETRIES[kind](p.X[:, i], p.X[:, j])
        name = f"_u{depth}"
        keep = [k for k in range(n) if k not in (i, j)]
        reduced_names = (name, *(p.names[k] for k in keep))
        reduced = np.column_stack([u, *(p.X[:, k] for k in keep)])
        expr = binary(kind, var(p.names[i]), var(p.names[j]))
        for c in solve(reduced_names, reduced, p.t, depth - 1, free_offset, budget=budget):
            cands.append(PartFit(replace_leaves(c.tree, "var", {name: expr}), c.pred, c.error, c.scaled))
    if n <= CHANGE_VARS and not any(c.error < 1e-9 for c in cands):
        cands += changed_variables(p, depth, budget)
    return best_parts(cands)


#: Most variables for which the changes of variable are tried (each ordered pair and kind is a
#: few additive tests: 20 tests for two variables, 180 for three).
CHANGE_VARS = 3


#: The new variable that replaces ``x_j`` beside the kept ``x_i``: (operation, operands swapped),
#: ``x_j - x_i``, ``x_j + x_i``, ``x_j * x_i``, ``x_j / x_i``, ``x_i / x_j``.
CHANGES: tuple[tuple[str, bool], ...] = (("sub", True), ("add", True), ("mul", True), ("div", True), ("div", False))


def changed_variables(p: SubProblem, depth: int, budget: Budget) -> list[PartFit]:
    """Splits after a change of variable: keep ``x_i``, replace ``x_j`` by ``u = kind(x_i, x_j)``
    and test ``t`` and ``log|t|`` for a split with ``x_i`` and ``u`` on different sides. What a
    symmetry cannot see: ``exp(-(x/y)**2/2)/y`` depends on ``y`` beyond ``x/y``, but it is
    ``h(y) * g(x/y)``; ``(t - u*x)/sqrt(1 - u**2)`` is ``(t/x - u) * h(u)`` in ``(u, t/x - u)``."""
    out: list[PartFit] = []
    n = p.X.shape[1]
    log_t = log_target(p.t)
    targets = [("id", p.t)] + ([("log", log_t)] if log_t is not None else [])
    name = f"_w{depth}"
    for i, j in itertools.permutations(range(n), 2):
        for kind, swap in CHANGES:
            a, b = (j, i) if swap else (i, j)
            with np.errstate(all="ignore"):
                u = SYMMETRIES[kind](p.X[:, a], p.X[:, b])
            if not np.all(np.isfinite(u)) or np.std(u) == 0:
                continue
            X = p.X.copy()
            X[:, j] = u
            names = tuple(name if k == j else p.names[k] for k in range(n))
            expr = binary(kind, var(p.names[a]), var(p.names[b]))
            for target_kind, z in targets:
                split = best_split(X, z)
                if split is None or (i in split[0]) == (j in split[0]):
                    continue
                comp_a, comp_b = additive_components(X, z, split[0], split[1])
                changed = SubProblem(names, X, p.t)
                for c in solve_parts(changed, split[0], split[1], comp_a, comp_b, target_kind == "log", depth, budget):
                    out.append(PartFit(replace_leaves(c.tree, "var", {name: expr}), c.pred, c.error, c.scaled))
    return out


def decomposition_seeds(sample: Sample, variables: Sequence[str], max_rows: int = 400,
                        depth: int = 3, solves: int = SOLVES) -> list[tuple[float, Node]]:
    """``(relative error on the sample, tree)`` for the best candidates the decomposition finds
    (leaves of the whole problem included), best first. Deterministic; training rows only."""
    rows = min(max_rows, len(sample.y))
    X, y = sample.X[:rows], sample.y[:rows]
    if X.shape[1] > 6 or rows < 32:
        return []
    with np.errstate(all="ignore"):
        found = solve(tuple(variables), X, y, depth, leaves=False, budget=Budget(solves))
    return [(c.error, c.tree if c.scaled else times_const(c.tree)) for c in found]
