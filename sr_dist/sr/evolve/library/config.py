"""Every knob of the seed library in one frozen value, reachable as ``model.library.*`` keys.

The defaults are the values the library was developed and measured with (docs/evolve.md,
"Options"); ``bench/library_digest.py`` guards that they build the committed libraries. A run
sets them as ``model.library.max_basis=3000`` (conf/model/evolve.yaml lists them all), a script
as ``EvolveModel(library={"max_basis": 3000})``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from sr_dist.sr.evolve.library.sparse_sums import EXHAUSTIVE_TERMS, PAIR_COMPLETION_TERMS, SINGLE_PAIR_TERMS

__all__ = ["DEFAULT_LIBRARY", "DEFAULT_SOURCES", "SOURCES", "LibraryConfig", "library_config"]

#: The seed sources that run by default, by the names seeds carry (``Seed.source``; a source
#: with sub-searches adds ``/sums``, ``/rational`` or ``/ratios``). ``curves``: classic curves
#: with their constants inside their functions (:mod:`.sources.curves`), for problems of at
#: most ``curve_max_variables`` variables; ``pair_curves``: the same curves of a product or ratio
#: of two variables (:mod:`.sources.pair_curves`), up to ``pair_curve_max_variables``;
#: ``sinusoid_products``: ``a*sin(b*u + c)*sin(d*v + e)`` for each pair of variables
#: (:mod:`.sources.sinusoid_products`), up to ``sinusoid_product_max_variables``.
DEFAULT_SOURCES: tuple[str, ...] = ("transformed_sums", "decomposition", "power_law", "group_shapes",
                                    "data_free", "pi_groups", "curves", "pair_curves",
                                    "sinusoid_products")
#: Every seed source.
SOURCES: tuple[str, ...] = DEFAULT_SOURCES


@dataclass(frozen=True)
class LibraryConfig:
    """The seed library's knobs. Sizes are counts of rows, terms or sub-problems, never seconds,
    so a library is a function of its sample alone."""

    #: The sources that run (any subset of ``SOURCES``, in any order: the library's order is fixed).
    sources: tuple[str, ...] = DEFAULT_SOURCES
    #: Training rows the sparse sums are fitted on (a few hundred identify a sparse model; the
    #: evaluator checks it on every row).
    sample_rows: int = 256
    #: Most terms in the basis of the whole problem's sparse sums (the wider tiers are cut first).
    max_basis: int = 4500
    #: Most terms in the basis over the π groups (the groups are already the right variables).
    pi_basis: int = 1500
    #: Widest target range (max - min) whose ``exp`` is fitted as a sparse sum: past it the
    #: largest rows alone decide the fit.
    exp_transform_range: float = 20.0
    #: Most one-factor terms for the pair completion of the sparse sums (its cost is their number
    #: squared).
    pair_completion_terms: int = PAIR_COMPLETION_TERMS
    #: Largest basis whose one-factor terms are each paired with their best partners when
    #: nothing exact was found.
    single_pair_terms: int = SINGLE_PAIR_TERMS
    #: Largest basis whose every pair of terms is scored with its best third when nothing exact
    #: was found (a basis over one variable has 47 terms).
    exhaustive_terms: int = EXHAUSTIVE_TERMS
    #: The variables the power law explains worst that get shapes of their own.
    messy_variables: int = 4
    #: Training rows the decomposition reads, its recursion depth, and the most sub-problems one
    #: decomposition solves.
    decomposition_rows: int = 400
    decomposition_depth: int = 3
    decomposition_solves: int = 24
    #: Library entries placed between the decomposition's near-exact seeds and its looser ones.
    decomposition_after: int = 8
    #: Widest problem (in variables) that gets the ``curves`` source: it has ``2n - 1`` entries
    #: per curve and variable, 918 for 9 variables (AI Feynman's widest, where it was
    #: measured) and about 30,000 for 50, which would bury the rest of a wide problem's library.
    curve_max_variables: int = 10
    #: Widest problem that gets the ``pair_curves`` source (when it is on): its
    #: ``3*n*(n - 1)/2`` products and ratios each take ``2n - 3`` forms of every curve, 540
    #: entries for 4 variables and 4,158 for 7.
    pair_curve_max_variables: int = 4
    #: Widest problem that gets the ``sinusoid_products`` source (when it is on): its
    #: ``n*(n - 1)/2`` pairs take ``n - 1`` forms each (one more beside a linear model), 24
    #: entries for 4 variables, each a fit of four inner constants.
    sinusoid_product_max_variables: int = 4
    #: Widest problem whose curves and pair curves also stand beside a linear model of every
    #: variable outside them (``a*S(u) + b*v + c*w``; the curves also ``a*v*S(u) + c*w``): 96
    #: more ``curves`` entries, 108 more ``pair_curves`` entries and 6 more ``sinusoid_products``
    #: entries at 4 variables.
    curve_linear_max_variables: int = 4

    def __post_init__(self) -> None:
        unknown = [s for s in self.sources if s not in SOURCES]
        if unknown or len(set(self.sources)) != len(self.sources):
            raise ValueError(f"library.sources must be distinct names among {', '.join(SOURCES)}; got {list(self.sources)}")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "sources":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
                    or (f.name != "decomposition_after" and f.name != "decomposition_depth" and value == 0):
                raise ValueError(f"library.{f.name} must be a positive number, got {value!r}")
            if f.type in ("int",) and not isinstance(value, int):
                raise ValueError(f"library.{f.name} must be an integer, got {value!r}")

    def runs(self, source: str) -> bool:
        return source in self.sources


DEFAULT_LIBRARY = LibraryConfig()


def library_config(options: Mapping[str, Any] | LibraryConfig | None) -> LibraryConfig:
    """A ``LibraryConfig`` from a mapping of its keys (``ValueError`` naming an unknown key)."""
    if options is None:
        return DEFAULT_LIBRARY
    if isinstance(options, LibraryConfig):
        return options
    if not isinstance(options, Mapping):
        raise ValueError(f"library must be a mapping of its keys, got {type(options).__name__}")
    known = {f.name for f in fields(LibraryConfig)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown library key(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values = dict(options)
    if "sources" in values:
        values["sources"] = tuple(values["sources"])
    return LibraryConfig(**values)
