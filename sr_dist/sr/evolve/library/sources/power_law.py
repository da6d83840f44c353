"""Source: the fitted power law, rounded, and the power law times shapes of its messy variables.

A power law ``c*x**a*y**b`` is the commonest shape in physics. Variables whose exponent does not
round cleanly (or whose log-log residual a few non-power terms explain) are the ones it does not
explain; for those the source multiplies the clean power-law part by shapes of one or two of
them (:mod:`sr_dist.sr.evolve.library.shapes`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.blocks import monomial
from sr_dist.sr.evolve.library.shapes import ONE_VAR_SHAPES, TWO_VAR_SHAPES
from sr_dist.sr.evolve.tree import binary, var
from sr_dist.sr.structure.power_law import PowerLaw

__all__ = ["MESSY_VARIABLES", "PowerLawSeeds", "power_law_seeds"]

#: The messy variables (worst explained first) that get shapes of their own.
MESSY_VARIABLES = 4


@dataclass(frozen=True)
class PowerLawSeeds:
    """The three groups the library interleaves: rounded power laws, one-variable and
    two-variable shapes times the clean part."""

    monomials: tuple[Node, ...]
    one_var: tuple[Node, ...]
    two_var: tuple[Node, ...]


def power_law_seeds(law: PowerLaw, messy_variables: int = MESSY_VARIABLES) -> PowerLawSeeds:
    monomials = [monomial(law.rounded(0.5)), monomial(law.rounded(1.0))]
    outers = law.outer_sets()
    clean = outers[0] if outers else {}
    messy = sorted((k for k in law.exponents if k not in clean), key=lambda k: (-law.gains[k], k))
    one_var: list[Node] = []
    two_var: list[Node] = []
    for name in messy[:messy_variables]:
        base = monomial(clean, skip=[name])
        one_var += [binary("mul", base, shape(var(name))) for shape in ONE_VAR_SHAPES]
    for a, b in itertools.permutations(messy[:messy_variables], 2):
        base = monomial(clean, skip=[a, b])
        two_var += [binary("mul", base, shape(var(a), var(b))) for shape in TWO_VAR_SHAPES]
    return PowerLawSeeds(tuple(monomials), tuple(one_var), tuple(two_var))
