"""Pairs and triples of terms scored all at once: what greedy steps miss among collinear terms.

Every pair (a first column and its best partner) and every triple (a pair and its best third)
is scored from inner products in one matrix product each, with the orthogonal matching pursuit
step written for a model that already holds one unit column (:func:`gains_beside`).
"""

from __future__ import annotations

import numpy as np

from sr_dist.sr.structure.pursuit import fit_error, project_out
from sr_dist.sr.structure.tolerances import REFIT_BELOW

__all__ = ["all_triples", "best_partners", "gains_beside"]


def gains_beside(C: np.ndarray, qr: np.ndarray, zr: np.ndarray, norms: np.ndarray | float,
                  n: int) -> np.ndarray:
    """``gains[j, k]``: how much adding column ``z_k`` lowers the squared least-squares error of
    ``r`` beyond the unit column ``q_j`` alone, from ``C = Q.T @ Z``, ``qr = Q.T @ r``,
    ``zr = Z.T @ r`` and ``norms = |z_k|**2``: ``(z_k.r - (q_j.z_k)(q_j.r))**2 / (|z_k|**2 -
    (q_j.z_k)**2)``, the orthogonal matching pursuit step with ``q_j`` already in the model. Zero
    where ``z_k`` is (nearly) parallel to ``q_j``."""
    with np.errstate(all="ignore"):
        rest = norms - C**2  # |z_k|**2 once q_j is projected out
        return np.where(rest > 1e-9 * n, (zr[None, :] - C * qr[:, None]) ** 2 / rest, 0.0)


def best_partners(Z: np.ndarray, t: np.ndarray, firsts: np.ndarray, keep: int = 2) -> dict[tuple[int, ...], float]:
    """For each of ``firsts``, itself and each of the ``keep`` columns of ``Z`` that lower the
    least-squares error most beside it, with the pair's relative residual: every pair scored at
    once from ``Z[:, firsts].T @ Z`` (the columns of ``Z`` are standardised, ``|z|**2 = n``;
    ``t`` is centred), refitted by least squares below ``REFIT_BELOW``."""
    n = len(t)
    norm = float(np.sqrt(np.mean(t**2))) or 1.0
    C = Z[:, firsts].T @ Z / np.sqrt(n)  # q_s . z_k with q_s = z_s / sqrt(n)
    qt = Z[:, firsts].T @ t / np.sqrt(n)
    gains = gains_beside(C, qt, Z.T @ t, n, n)
    gains[np.arange(len(firsts)), firsts] = 0.0
    best = np.argsort(-gains, axis=1)[:, :keep]
    left = float(t @ t) - qt**2  # what each first leaves
    out: dict[tuple[int, ...], float] = {}
    for i, (s, row) in enumerate(zip(firsts, best, strict=True)):
        for k in row:
            support = tuple(sorted((int(s), int(k))))
            err = float(np.sqrt(max(left[i] - gains[i, k], 0.0) / n)) / norm
            out[support] = fit_error(Z, t, support, norm)[0] if err < REFIT_BELOW else err
    return out


def all_triples(Z: np.ndarray, t: np.ndarray, keep: int = 8) -> dict[tuple[int, ...], float]:
    """The ``keep`` best supports of three terms among those made of every pair of columns and
    the column that lowers the error most beside it, with their relative residuals. Beam steps
    miss ``exp(x)/x + exp(x)/x**2 + x**2``: its terms are collinear, and alone each explains
    less than proxies such as ``exp(x)``. For each first column the others are projected off
    it, and each second column's best third is read from one product
    (:func:`gains_beside`)."""
    n, m = Z.shape
    norm = float(np.sqrt(np.mean(t**2))) or 1.0
    scored: dict[tuple[int, ...], float] = {}
    for i in range(m):
        r, Zp = project_out(Z, t, (i,))
        norms = np.einsum("ij,ij->j", Zp, Zp)
        live = norms > 1e-9 * n
        live[: i + 1] = False
        if not live.any():
            continue
        with np.errstate(all="ignore"):
            Q = Zp / np.sqrt(np.where(live, norms, 1.0))
            C = Q[:, live].T @ Zp  # q_j . z_k, j live
            qr = Q[:, live].T @ r
        gains = gains_beside(C, qr, Zp.T @ r, norms, n)
        gains[:, ~(norms > 1e-9 * n)] = 0.0
        gains[:, i] = 0.0
        seconds = np.flatnonzero(live)
        gains[np.arange(len(seconds)), seconds] = 0.0
        best = np.argmax(gains, axis=1)
        top = gains[np.arange(len(seconds)), best]
        left = float(r @ r) - qr**2
        errs = np.where(top > 0, np.sqrt(np.maximum(left - top, 0.0) / n) / norm, np.inf)
        for row in np.argsort(errs)[:keep]:
            if not np.isfinite(errs[row]):
                break
            scored[tuple(sorted((i, int(seconds[row]), int(best[row]))))] = float(errs[row])
    out: dict[tuple[int, ...], float] = {}
    for support in sorted(scored, key=scored.__getitem__)[:keep]:
        err = scored[support]
        out[support] = fit_error(Z, t, support, norm)[0] if err < REFIT_BELOW else err
    return out
