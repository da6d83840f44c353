"""The evolve search: pure symbolic-regression operators and state behind the offline proposer.

:mod:`sr_dist.sr.evolve.model` is the model-protocol shell; everything here is plain functions over
formula trees and frozen values, testable without JAX or an agent loop.
"""

from sr_dist.sr.evolve.operators import OPERATORS, Grammar, random_tree
from sr_dist.sr.evolve.population import History, Individual, read_history
from sr_dist.sr.evolve.search import Proposal, SearchConfig, propose
from sr_dist.sr.evolve.seeding import Sample, power_law, sample_from_info, seed_library

__all__ = [
    "OPERATORS",
    "Grammar",
    "History",
    "Individual",
    "Proposal",
    "Sample",
    "SearchConfig",
    "power_law",
    "propose",
    "random_tree",
    "read_history",
    "sample_from_info",
    "seed_library",
]
