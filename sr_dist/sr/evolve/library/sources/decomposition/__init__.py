"""Source: structure found in the data, turned into proposals (separability, symmetries, recursion).

What AI Feynman does (Udrescu & Tegmark, "AI Feynman: a physics-inspired method for symbolic
regression", 2020) and the plain search does not: from the training sample alone, test whether
the target splits into parts over disjoint groups of variables, solve each part as a smaller
problem, and combine the answers. The tests are the structure core's
(:mod:`sr_dist.sr.structure`: held-out surrogates, separability, rank-one products, symmetries,
affinity), the same verdicts the analysis tools give an LLM agent.

- additive ``f = g(A) + h(B)``; multiplicative ``f = g(A) * h(B)`` (on ``log|f|`` when ``f``
  keeps one sign, by a rank-one model when it changes sign); the additive test on ``f**2`` and
  ``1/f`` (``sqrt(g + h)``, ``1/(g + h)``);
- symmetries: the pair ``(x, y)`` enters only as ``x - y``, ``x + y``, ``x * y`` or ``x / y``;
- changes of variable, and affinity in one variable.

**Recursion** (:mod:`.solve`). A separated part gets its own data (its component of the
restricted fit, then, once the other part has a formula, the exact remainder ``f - other`` or
``f / other``); a symmetry replaces the pair by one new variable. Each smaller problem is solved
by the same function: its leaves (:mod:`.leaves`) and again decomposition, to ``depth`` levels.
Every candidate (:class:`.parts.PartFit`) carries its predictions on the sample, so combinations
are ranked by their error on the real target, and only the best few of each part are combined.

The order is data, not a per-problem rule: every test runs on every problem, candidates are
ranked by sample error, and the library places the near-exact ones first. Nothing here sees a
test split, a problem name or a ground truth.
"""

from sr_dist.sr.evolve.library.sources.decomposition.parts import PartFit, rank
from sr_dist.sr.evolve.library.sources.decomposition.solve import Budget, decomposition_seeds, solve

__all__ = ["Budget", "PartFit", "decomposition_seeds", "rank", "solve"]
