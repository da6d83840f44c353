"""Source: a power-law part times the inverse transform of a sparse model of the rest.

For each candidate power-law part the target is divided by it and transformed (identity,
reciprocal, square root, square, cube root; without a power-law part also log, exp, sin, tan;
arccos and arcsin where defined: :mod:`sr_dist.sr.evolve.library.transforms`); sparse sums,
Levy ratios and ratios of sums are fitted to each transformed target and inverted back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.basis import build_basis
from sr_dist.sr.evolve.library.blocks import monomial
from sr_dist.sr.evolve.library.config import DEFAULT_LIBRARY, LibraryConfig
from sr_dist.sr.evolve.library.seed import Seed
from sr_dist.sr.evolve.library.sources.rational import rational_seeds
from sr_dist.sr.evolve.library.sources.ratios import ratios_of_sums
from sr_dist.sr.evolve.library.sparse_sums import sparse_sums
from sr_dist.sr.evolve.library.transforms import TRANSFORMS
from sr_dist.sr.evolve.tree import binary, const, num, size, total
from sr_dist.sr.structure.sample import Sample
from sr_dist.sr.structure.tolerances import EXACT_SUPPORT, NEAR

__all__ = ["SOURCE", "transformed_sum_seeds"]


#: The name its seeds carry.
SOURCE = "transformed_sums"


def transformed_sum_seeds(
    sample: Sample, variables: Sequence[str], outers: Sequence[Mapping[str, float]],
    config: LibraryConfig = DEFAULT_LIBRARY, max_basis: int | None = None,
) -> tuple[list[Seed], list[Seed]]:
    """``power-law part * g(sparse model over the other variables)`` for each candidate
    power-law part, ``g`` in (identity, reciprocal, square root, square, cube; without a
    power-law part also log, exp, sin, tan; arccos and arcsin where defined) and sparse sums and ratios of sums;
    returns (near-exact, rest). ``max_basis`` overrides ``config.max_basis``."""
    exact: list[tuple[float, Seed]] = []
    loose: list[tuple[float, Seed]] = []
    index = {v: j for j, v in enumerate(variables)}
    # A few hundred rows identify a sparse model; the evaluator checks it on all of them.
    sample = Sample(sample.X[:config.sample_rows], sample.y[:config.sample_rows])
    basis_terms = config.max_basis if max_basis is None else max_basis

    def keep(err: float, body: Node, outer: Node | None, transform: str, search: str) -> None:
        body = TRANSFORMS[transform].inverse(body)
        tree = body if outer is None else binary("mul", outer, body)
        if math.isfinite(err):
            (exact if err < NEAR else loose).append((err, Seed(tree, err, f"{SOURCE}/{search}")))

    for rank, outer_exps in enumerate([*outers[:3], {}]):
        with np.errstate(all="ignore"):
            scale = np.ones(len(sample.y))
            for k, a in outer_exps.items():
                scale = scale * sample.X[:, index[k]] ** a
            z = sample.y / scale
            kinds = ["id", "inv"]
            if np.all(z > 0):  # where sqrt(z**2) is z
                kinds += ["sq", "sqrt"]
            # Roots: a law may be a power of a sum (``x1*(9/5 + x0*x2)**3``, ``(x0 + x1*x2)**2``),
            # which expanded is a sum of many products no pursuit assembles.
            kinds.append("cbrt")
            if not outer_exps and np.ptp(z) < config.exp_transform_range:
                # The log of a sum (``x2 + log(x1**3 + exp(x0))``: its exp is a sum of two
                # products) ...
                kinds.append("exp")
            if not outer_exps and TRANSFORMS["log"].usable(z):
                # ... and the exp of one (``x2*exp(x0*x1)``: beyond a power law).
                kinds.append("log")
            if TRANSFORMS["acos"].usable(z) and np.ptp(z) > 0:
                # A cosine or sine of a sum (``x0*cos(sin(x2)/sqrt(x1))``,
                # ``sin(cos(sqrt(x0)))``), exact where the sum stays in [0, pi] or
                # [-pi/2, pi/2].
                kinds += ["acos", "asin"]
            if not outer_exps and TRANSFORMS["sin"].usable(z):
                # An angle: the law may be arcsin or arctan of a sum (Snell's law, diffraction).
                kinds += ["sin", "tan"]
            # exp of the target less its maximum: the same sum up to its constants, in range.
            transforms = [(k, TRANSFORMS[k].forward(z - np.max(z) if k == "exp" else z)) for k in kinds]
        # The sum carries its own constants, so the power-law part has none.
        outer = monomial(outer_exps, with_const=False) if outer_exps else None
        names = [v for v in variables if v not in outer_exps]
        basis = build_basis(sample, names, [index[v] for v in names], basis_terms, shape_products=True) if names else None
        if basis is None:
            continue
        for transform, target in transforms:
            if not np.all(np.isfinite(target)):
                continue
            for err, terms in sparse_sums(basis, target, every_pair=True, limits=config)[:4]:
                if transform in ("sin", "tan"):
                    # Without the intercept first: from all-ones constants ``arcsin(c0*x + c1)``
                    # is undefined on every row (c1 = 1) and the fit may never start; laws
                    # under an arcsin rarely carry one (Snell, diffraction).
                    keep(err, total([binary("mul", const(), t) for t in terms]), outer, transform, "sums")
                body = total([binary("mul", const(), t) for t in terms] + [const()])
                keep(err, body, outer, transform, "sums")
            if transform in ("id", "sq"):
                # Ratios of polynomials in one joint solve (the inverse is the same ratio).
                columns = sample.X[:, [index[v] for v in names]]
                for err, body in rational_seeds(columns, target, names):
                    keep(err, body, outer, transform, "rational")
            if transform not in ("id", "sq") or (rank > 0 and outer_exps):
                continue
            # Ratios of sums with a denominator 1 + ... .
            for err, body in ratios_of_sums(basis, target, np.ones(len(target)), num(1.0))[:2]:
                keep(err, body, outer, transform, "ratios")
    exact.sort(key=lambda et: (et[0] > EXACT_SUPPORT, size(et[1].tree)))  # the simplest exact model first
    loose.sort(key=lambda et: et[0])
    return [t for _, t in exact], [t for _, t in loose]
