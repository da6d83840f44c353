"""Source: ratios of sums ``(a0 + sum(a_k t_k)) / (s0 + sum(b_k s_k))`` by one linear pursuit."""

from __future__ import annotations

import numpy as np

from sr_dist.formula import Node
from sr_dist.sr.evolve.library.basis import Basis
from sr_dist.sr.evolve.tree import binary, const, total
from sr_dist.sr.structure.pursuit import beam_pursuit

__all__ = ["ratios_of_sums"]


def ratios_of_sums(basis: Basis, target: np.ndarray, s0: np.ndarray, s0_node: Node) -> list[tuple[float, Node]]:
    """Near-exact rational models ``(a0 + sum(a_k t_k)) / (s0 + sum(b_k s_k))`` from the linear
    problem ``target*s0 = a0 + sum(a_k t_k) - sum(b_k target*s_k)`` (terms of up to two factors)."""
    low = np.flatnonzero(basis.order <= 2)
    with np.errstate(all="ignore"):
        W = -target[:, None] * basis.V[:, low]
        lhs = target * s0
    sd = W.std(axis=0)
    ok = np.isfinite(sd) & (sd > 0) & np.all(np.isfinite(W), axis=0)
    if not np.all(np.isfinite(lhs)) or np.std(lhs) == 0 or not ok.any():
        return []
    # A denominator term equal to the leading one (target*s0 itself) would be a trivial fit.
    lhs_z = (lhs - lhs.mean()) / lhs.std()
    with np.errstate(all="ignore"):
        same = np.abs(((W - W.mean(axis=0)) / np.where(sd > 0, sd, 1.0)).T @ lhs_z) / len(lhs) > 1 - 1e-9
    ok &= ~same
    if not ok.any():
        return []
    Zw = (W[:, ok] - W[:, ok].mean(axis=0)) / sd[ok]
    Z = np.column_stack([basis.Z[:, low], Zw])
    den_terms = [basis.terms[int(i)] for i in low[ok]]
    n_num = len(low)
    out: list[tuple[float, Node]] = []
    for support, err in sorted(beam_pursuit(Z, lhs - lhs.mean(), 5, 3, 6).items(), key=lambda kv: kv[1])[:6]:
        top = [basis.terms[int(low[i])] for i in support if i < n_num]
        bottom = [den_terms[i - n_num] for i in support if i >= n_num]
        # Only near-exact fits: a loose one is usually a denominator that is nearly zero.
        if top and bottom and err < 1e-6:
            numerator = total([binary("mul", const(), t) for t in top] + [const()])
            denominator = total([s0_node] + [binary("mul", const(), t) for t in bottom])
            out.append((err, binary("div", numerator, denominator)))
    return out
