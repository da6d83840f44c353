"""Source: a power law times a shape of one dimensionless-looking group of its messy variables."""

from __future__ import annotations

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.blocks import monomial
from sr_dist.sr.evolve.library.shapes import GROUP_SHAPES
from sr_dist.sr.evolve.tree import binary
from sr_dist.sr.structure.power_law import PowerLaw

__all__ = ["group_shape_seeds"]


def group_shape_seeds(law: PowerLaw) -> list[Node]:
    """``c * power law * g(group)``: the group multiplies the variables that do not enter as
    integer powers, each to the sign of its fitted exponent (a saturating or periodic ``g``
    bends the log-log slope towards half-integers, so only integer powers count as clean);
    variants also keep a strongly varying group variable in the power law outside."""
    clean = {k: float(round(a)) for k, a in law.exponents.items()
             if abs(a - round(a)) < 0.15 and round(a) != 0 and law.gains.get(k, 1.0) < 0.03}
    messy = sorted(k for k in law.exponents if k not in clean and abs(law.exponents[k]) > 0.05)[:5]
    if not messy:
        return []
    signs = {k: (-1.0 if law.exponents[k] < 0 else 1.0) for k in messy}
    # A decreasing g (exp(-a)) flips the signs, so the inverse group is tried as well.
    groups = [monomial(signs, with_const=False), monomial({k: -a for k, a in signs.items()}, with_const=False)]
    outers = [clean]
    for k in sorted(messy, key=lambda k: -abs(law.exponents[k])):
        if abs(law.exponents[k]) > 0.75:
            outers.append({**clean, k: -1.0 if law.exponents[k] < 0 else 1.0})
    out: list[Node] = []
    for outer in outers[:3]:
        base = monomial(outer)
        for group in groups:
            out += [binary("mul", base, shape(group)) for shape in GROUP_SHAPES]
    return out
