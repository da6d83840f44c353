"""The evolve search: pure symbolic-regression operators and state behind the offline proposer.

:mod:`sr_dist.sr.evolve.model` is the model-protocol shell; everything here is plain functions over
formula trees and frozen values, testable without JAX or an agent loop.
"""

from sr_dist.sr.evolve.library import Sample, build_library, library_for_info, sample_from_info, seed_library
from sr_dist.sr.evolve.operators import OPERATORS, Grammar, random_tree
from sr_dist.sr.evolve.population import History, Individual, read_history
from sr_dist.sr.evolve.search import EvolveConfig, Proposal, SearchConfig, propose
from sr_dist.sr.structure.power_law import power_law

__all__ = [
    "OPERATORS",
    "Grammar",
    "History",
    "Individual",
    "Proposal",
    "Sample",
    "build_library",
    "library_for_info",
    "EvolveConfig",
    "SearchConfig",
    "power_law",
    "propose",
    "random_tree",
    "read_history",
    "sample_from_info",
    "seed_library",
]
