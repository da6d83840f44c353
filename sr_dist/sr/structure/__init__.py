"""The structure core: numeric searches for the shape of a law, numpy only, no formula trees.

Both the offline proposer's seed library (:mod:`sr_dist.sr.evolve.library`) and the analysis
tools an LLM agent calls read these, so both give the same verdicts.

================  ==========================================================================
module            what it finds
================  ==========================================================================
``pursuit``       sparse linear models: beam forward stepwise selection and its completions
``partners``      pairs and triples of collinear terms scored all at once
``power_law``     power laws by a robust (Huber) log-log fit
``rational``      sparse exact ratios of polynomials (Levy's linearised fit)
``surrogate``     held-out smooth surrogates and the verdict on a restricted structure
``separability``  additive and multiplicative splits over groups of variables
``product``       rank-one products where the target changes sign
``symmetry``      pair symmetries and affinity in one variable
``pi_groups``     Buckingham π groups and the prefactor of a dimension matrix (exact fractions)
``tolerances``    the named bars: what "exact" and "near-exact" mean
``sample``        the frozen ``(X, y)`` rows every search reads
================  ==========================================================================
"""

from sr_dist.sr.structure.power_law import PowerLaw, power_law
from sr_dist.sr.structure.sample import Sample
from sr_dist.sr.structure.surrogate import StructureTest

__all__ = ["PowerLaw", "Sample", "StructureTest", "power_law"]
