"""The seed library of a problem: every source, in one documented order.

Near-exact sparse models come first, then what decomposition finds; then, round-robin: power
laws, power law times shapes of the variables the power law explains worst, power law times
shapes of a dimensionless group, the other sparse models, and the data-free structures. With
units the π-group seeds lead and the rest is interleaved with them. Each entry is a
:class:`~sr_dist.sr.evolve.library.seed.Seed` that names its source; :func:`build_library` and
:func:`seed_library` hand out the trees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.config import DEFAULT_LIBRARY, LibraryConfig
from sr_dist.sr.evolve.library.order import interleave
from sr_dist.sr.evolve.library.sample import sample_from_info
from sr_dist.sr.evolve.library.seed import Seed, seeds_from
from sr_dist.sr.evolve.library.sources.curves import curve_seeds
from sr_dist.sr.evolve.library.sources.data_free import data_free_seeds
from sr_dist.sr.evolve.library.sources.decomposition import decomposition_seeds
from sr_dist.sr.evolve.library.sources.group_shapes import group_shape_seeds
from sr_dist.sr.evolve.library.sources.pair_curves import pair_curve_seeds
from sr_dist.sr.evolve.library.sources.pi_groups import pi_library, units_from_info
from sr_dist.sr.evolve.library.sources.power_law import power_law_seeds
from sr_dist.sr.evolve.library.sources.sinusoid_products import sinusoid_product_seeds
from sr_dist.sr.evolve.library.sources.transformed_sums import transformed_sum_seeds
from sr_dist.sr.structure.power_law import power_law
from sr_dist.sr.structure.sample import Sample
from sr_dist.sr.structure.tolerances import NEAR

__all__ = ["build_library", "decomposition_first", "library_for_info", "library_seeds", "plain_library",
           "seed_library"]


def seed_library(variables: Sequence[str], sample: Sample | None, sparse: bool = True,
                 decompose: bool = True, config: LibraryConfig = DEFAULT_LIBRARY) -> list[Node]:
    """Deterministic, ordered list of starting structures (duplicates removed by the caller).

    Near-exact sparse models come first, then what decomposition finds
    (:func:`decomposition_first`); then, round-robin: power laws, power law times shapes
    of the variables the power law explains worst, power law times shapes of a dimensionless
    group, the other sparse models, and the data-free structures.
    """
    return [seed.tree for seed in plain_seeds(variables, sample, sparse, decompose, config)]


def plain_seeds(variables: Sequence[str], sample: Sample | None, sparse: bool = True,
                decompose: bool = True, config: LibraryConfig = DEFAULT_LIBRARY) -> list[Seed]:
    """:func:`seed_library` with each entry's source."""
    exact, rest = plain_library(variables, sample, sparse, config)
    if not decompose or sample is None or not config.runs("decomposition"):
        return exact + rest
    return decomposition_first(exact, rest, variables, sample, config)


def decomposition_first(exact: Sequence[Seed], rest: Sequence[Seed], variables: Sequence[str],
                        sample: Sample, config: LibraryConfig = DEFAULT_LIBRARY) -> list[Seed]:
    """The library with the decomposition's proposals
    (:mod:`sr_dist.sr.evolve.library.sources.decomposition`): its near-exact ones right after
    the library's near-exact sparse models, the others after the next
    ``config.decomposition_after`` entries."""
    found = decomposition_seeds(sample, variables, config.decomposition_rows, config.decomposition_depth,
                                config.decomposition_solves)
    near = [Seed(tree, err, "decomposition") for err, tree in found if err < NEAR]
    loose = [Seed(tree, err, "decomposition") for err, tree in found if err >= NEAR]
    after = config.decomposition_after
    return [*exact, *near, *rest[:after], *loose, *rest[after:]]


def plain_library(variables: Sequence[str], sample: Sample | None, sparse: bool = True,
                  config: LibraryConfig = DEFAULT_LIBRARY) -> tuple[list[Seed], list[Seed]]:
    """The library without decomposition (see :func:`seed_library`): (near-exact, the rest)."""
    law = power_law(sample, variables) if sample is not None else None
    exact: list[Seed] = []
    loose: list[Seed] = []
    monomials: list[Seed] = []
    one_var: list[Seed] = []
    two_var: list[Seed] = []
    groups: list[Seed] = []
    sums = sparse and sample is not None and config.runs("transformed_sums")
    if law is not None and law.exponents:
        if config.runs("power_law"):
            powers = power_law_seeds(law, config.messy_variables)
            monomials = seeds_from(powers.monomials, "power_law/monomials")
            one_var = seeds_from(powers.one_var, "power_law/one_var")
            two_var = seeds_from(powers.two_var, "power_law/two_var")
        if config.runs("group_shapes"):
            groups = seeds_from(group_shape_seeds(law), "group_shapes")
        if sums and sample is not None:
            exact, loose = transformed_sum_seeds(sample, variables, law.outer_sets(), config)
    elif sums and sample is not None:
        exact, loose = transformed_sum_seeds(sample, variables, [], config)
    free = seeds_from(data_free_seeds(variables), "data_free") if config.runs("data_free") else []
    linear_model = len(variables) <= config.curve_linear_max_variables
    curves = (seeds_from(curve_seeds(variables, linear_model), "curves")
              if config.runs("curves") and len(variables) <= config.curve_max_variables else [])
    pairs = (seeds_from(pair_curve_seeds(variables, linear_model), "pair_curves")
             if config.runs("pair_curves") and len(variables) <= config.pair_curve_max_variables else [])
    waves = (seeds_from(sinusoid_product_seeds(variables, linear_model), "sinusoid_products")
             if config.runs("sinusoid_products")
             and len(variables) <= config.sinusoid_product_max_variables else [])
    return exact, interleave([monomials, one_var, curves, pairs, waves, groups, loose, two_var, free])


def library_seeds(variables: tuple[str, ...], sample: Sample | None, units: Any = None,
                  config: LibraryConfig = DEFAULT_LIBRARY) -> tuple[Seed, ...]:
    """The ordered seed library for a problem, each entry with its source: with units
    (:func:`units_from_info`), the π-group seeds first and the rest interleaved with the
    plain library."""
    library = plain_seeds(variables, sample, config=config)
    if units is not None and config.runs("pi_groups"):
        first, rest = pi_library(variables, units[0], units[1], sample, config)
        library = seeds_from(first, "pi_groups") + interleave([seeds_from(rest, "pi_groups"), library])
    return tuple(library)


def build_library(variables: tuple[str, ...], sample: Sample | None, units: Any = None,
                  config: LibraryConfig = DEFAULT_LIBRARY) -> tuple[Node, ...]:
    """The trees of :func:`library_seeds`, in order."""
    return tuple(seed.tree for seed in library_seeds(variables, sample, units, config))


def library_for_info(info: Mapping[str, Any], config: LibraryConfig = DEFAULT_LIBRARY,
                     with_sources: bool = False) -> tuple[Any, ...]:
    """The library an agent builds from its ``context.info`` (variables, sample, units): its
    trees, or its seeds with ``with_sources``."""
    variables = tuple(info["variables"])
    seeds = library_seeds(variables, sample_from_info(info, variables), units_from_info(info, variables), config)
    return seeds if with_sources else tuple(seed.tree for seed in seeds)
