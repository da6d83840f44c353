"""Sparse linear models by forward stepwise selection: the beam pursuit and its completions.

The columns of ``Z`` are standardised candidate terms, ``t`` a centred target. Forward
stepwise selection (orthogonal least squares: Chen, Billings & Luo, "Orthogonal least squares
methods and their application to non-linear system identification", 1989) adds at each step
the term that lowers the least-squares error most once the current support is projected out,
unlike plain matching pursuit, so a proxy such as ``log(x)`` does not hide ``x``. A beam keeps
several supports per step; pair and single completions score additions a greedy step misses.
Shapes: ``Z`` is rows x terms, ``t`` has one entry per row; supports are sorted index tuples.
"""

from __future__ import annotations

import numpy as np

from sr_dist.sr.structure.tolerances import REFIT_BELOW

__all__ = ["beam_pursuit", "best_additions", "fit_error", "addition_gains", "pair_completions", "project_out", "single_completions"]


def fit_error(Z: np.ndarray, t: np.ndarray, support: tuple[int, ...], norm: float) -> tuple[float, np.ndarray]:
    if not support:
        return 1.0, t
    A = Z[:, list(support)]
    coef, *_ = np.linalg.lstsq(A, t, rcond=None)
    r = t - A @ coef
    return float(np.sqrt(np.mean(r**2)) / norm), r


def project_out(Z: np.ndarray, t: np.ndarray, support: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The residual of ``t`` and the columns of ``Z``, both orthogonal to the ``support`` columns."""
    if not support:
        return t, Z
    Q, _ = np.linalg.qr(Z[:, list(support)])
    return t - Q @ (Q.T @ t), Z - Q @ (Q.T @ Z)


def best_additions(Z: np.ndarray, t: np.ndarray, support: tuple[int, ...], k: int) -> list[int]:
    """The ``k`` terms whose addition lowers the least-squares error most (forward stepwise
    selection: candidates are orthogonalised against the current support, unlike plain
    matching pursuit, so a proxy such as ``log(x)`` does not hide ``x``)."""
    r, Zp = project_out(Z, t, support)
    return [int(i) for i in np.argsort(-addition_gains(Zp, r, support))[:k]]


def addition_gains(Zp: np.ndarray, r: np.ndarray, support: tuple[int, ...]) -> np.ndarray:
    """How much each column of ``Zp`` (orthogonal to ``support``) lowers ``|r|**2``; 0 for the
    support and for columns it already spans."""
    norms = np.einsum("ij,ij->j", Zp, Zp)
    gains: np.ndarray = np.where(norms > 1e-9 * len(r), (Zp.T @ r) ** 2 / np.maximum(norms, 1e-300), 0.0)
    if support:
        gains[list(support)] = 0.0
    return gains


def beam_pursuit(Z: np.ndarray, t: np.ndarray, max_terms: int, beam: int, first_beam: int) -> dict[tuple[int, ...], float]:
    """Beam forward stepwise selection (:func:`best_additions` at each step): every support
    it tries, with its relative residual. A support's residual and its columns, orthogonalised
    against it, pass to its children by one Gram-Schmidt step each; a child's error comes from
    its gain (``|r|**2 - gain``), and from a least-squares refit once it is below
    ``REFIT_BELOW``, where that difference would lose the digits the exactness bars need."""
    n = len(t)
    norm = float(np.sqrt(np.mean(t**2))) or 1.0
    results: dict[tuple[int, ...], float] = {}
    frontier: list[tuple[tuple[int, ...], np.ndarray, np.ndarray]] = [((), t, Z)]
    for step in range(max_terms):
        width = first_beam if step == 0 else beam
        candidates: dict[tuple[int, ...], tuple[float, int, int]] = {}
        for f, (support, r, Zp) in enumerate(frontier):
            gains = addition_gains(Zp, r, support)
            rr = float(r @ r)
            for k in np.argsort(-gains)[:width]:
                new = tuple(sorted(support + (int(k),)))
                if new in candidates or new in results:
                    continue
                err = float(np.sqrt(max(rr - gains[k], 0.0) / n)) / norm
                if err < REFIT_BELOW:
                    err, _ = fit_error(Z, t, new, norm)
                candidates[new] = (err, f, int(k))
        if not candidates:
            break
        results.update({support: c[0] for support, c in candidates.items()})
        chosen = sorted(candidates, key=lambda c: candidates[c][0])[:width]
        children = []
        for support in chosen if step + 1 < max_terms else ():
            _, f, k = candidates[support]
            _, r, Zp = frontier[f]
            q = Zp[:, k] / np.sqrt(Zp[:, k] @ Zp[:, k])
            children.append((support, r - q * (q @ r), Zp - np.outer(q, q @ Zp)))
        frontier = children
        if candidates[chosen[0]][0] < 1e-9:
            # An exact support may carry terms picked before the right ones (a proxy first,
            # then the law, with the proxy's coefficient gone to zero): drop what it does
            # not need (backward elimination).
            support = chosen[0]
            while len(support) > 1:
                drops = {tuple(j for j in support if j != i): 0.0 for i in support}
                for smaller in drops:
                    drops[smaller], _ = fit_error(Z, t, smaller, norm)
                results.update(drops)
                best = min(drops, key=drops.__getitem__)
                if drops[best] >= 1e-9:
                    break
                support = best
            break
    return results


def pair_completions(Z: np.ndarray, t: np.ndarray, support: tuple[int, ...],
                      candidates: np.ndarray, keep: int = 3) -> list[tuple[int, ...]]:
    """``support`` plus the ``keep`` best *pairs* of ``candidates``, scored jointly: the 2-D
    projection of the residual on each pair, for all pairs at once. Greedy steps cannot add
    ``I1 + I2`` to ``sqrt(I1)*sqrt(I2)*cos(delta)``: alone each explains less than a proxy
    (``sqrt(I1)*sqrt(I2)``, ranked first), together they close the sum."""
    r, Cp = project_out(Z[:, [*support, *candidates.tolist()]], t, tuple(range(len(support))))
    Cp = Cp[:, len(support):]
    G = Cp.T @ Cp
    b = Cp.T @ r
    gii = np.diag(G)
    with np.errstate(all="ignore"):
        det = gii[:, None] * gii[None, :] - G**2
        gain = (gii[None, :] * b[:, None] ** 2 - 2 * G * b[:, None] * b[None, :]
                + gii[:, None] * b[None, :] ** 2) / det
    ok = np.triu(det > 1e-9 * np.outer(gii, gii), 1) & np.isfinite(gain)
    if not ok.any():
        return []
    gain = np.where(ok, gain, -np.inf)
    best = np.argsort(-gain, axis=None)[:keep]
    out = []
    for flat in best:
        i, j = np.unravel_index(int(flat), gain.shape)
        if np.isfinite(gain[i, j]):
            out.append(tuple(sorted((*support, int(candidates[i]), int(candidates[j])))))
    return out


def single_completions(Z: np.ndarray, t: np.ndarray, first: int, candidates: np.ndarray,
                        max_terms: int, beam: int, first_beam: int) -> dict[tuple[int, ...], float]:
    """``first`` plus each support :func:`beam_pursuit` finds among ``candidates`` for what
    ``first`` leaves of ``t`` (``candidates`` orthogonalised against it), with its relative
    residual on ``t`` (the residual of the completion on what ``first`` leaves is the same)."""
    others = candidates[candidates != first]
    if max_terms < 1 or not len(others):
        return {}
    r, Zp = project_out(Z[:, [first, *others.tolist()]], t, (0,))
    scale = float(np.sqrt(np.mean(r**2)) / (np.sqrt(np.mean(t**2)) or 1.0))
    found = beam_pursuit(Zp[:, 1:], r, max_terms, beam, first_beam)
    return {tuple(sorted((first, *(int(others[i]) for i in support)))): err * scale
            for support, err in found.items()}
